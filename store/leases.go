package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lease is a run's hold on a host. The token grows with every acquisition:
// writes made on behalf of a run carry it, and a worker whose lease was
// taken over finds its writes refused (ErrFenced).
type Lease struct {
	HostID    int64
	RunID     int64
	Token     int64
	Holder    string
	ExpiresAt time.Time
}

// ErrHostBusy is returned when another run holds an unexpired lease.
var ErrHostBusy = errors.New("the host is busy with another run")

// ErrFenced is returned when a write carries a lease token that is no
// longer current: another worker took the run or the host over.
var ErrFenced = errors.New("the host lease was lost (fencing token is stale)")

// AcquireLease takes the host for a run: a free host, a lease of the same
// run (the run's next job attempt taking over from the previous one, which
// yielded or died), or an expired lease of another run. In every case no
// other run's probe may be on the host (Run.ProbeMayRun: a launch was
// about to happen or happened, and the probe's end was not seen): a worker
// that dies, or loses the answer of its launch, leaves a detached probe
// measuring there, and until that run sees its probe end (or, ended
// without seeing it, the probe's time limit passes) the host stays its
// own, so two probes never measure one host at once. Otherwise
// ErrHostBusy, with the run that keeps the host. Every acquisition gets a
// new token, so a previous holder of the same run is fenced off.
func (s *Store) AcquireLease(ctx context.Context, hostID, runID int64, holder string, ttl time.Duration) (Lease, int64, error) {
	var l Lease
	var busyRun int64
	err := s.InTx(ctx, func(tx *Store) error {
		// Lock the host's lease row first. A holder's fenced write (its
		// launch intent among them) locks it too: it either committed
		// before, and the queries below see it, or it waits for this
		// transaction and then finds its token stale.
		var holderRun int64
		var expired bool
		err := tx.db.QueryRow(ctx, `SELECT run_id, expires_at < now() FROM host_leases WHERE host_id = $1 FOR UPDATE`, hostID).
			Scan(&holderRun, &expired)
		held := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store: lease of host %d: %w", hostID, err)
		}
		if held && holderRun != runID && !expired {
			busyRun = holderRun
			return ErrHostBusy
		}
		if blocker, err := tx.probeOnHost(ctx, hostID, runID); err != nil {
			return err
		} else if blocker != 0 {
			busyRun = blocker
			return ErrHostBusy
		}
		// No row: insert, and if another run's insert won the race, the
		// host is that run's. A row (locked above): take it over.
		q := `INSERT INTO host_leases (host_id, run_id, token, holder, expires_at)
			VALUES ($1, $2, nextval('host_lease_token'), $3, now() + $4 * interval '1 millisecond')
			ON CONFLICT (host_id) DO NOTHING
			RETURNING host_id, run_id, token, holder, expires_at`
		if held {
			q = `UPDATE host_leases SET run_id = $2, token = nextval('host_lease_token'), holder = $3,
					acquired_at = now(), expires_at = now() + $4 * interval '1 millisecond'
				WHERE host_id = $1
				RETURNING host_id, run_id, token, holder, expires_at`
		}
		err = tx.db.QueryRow(ctx, q, hostID, runID, holder, ttl.Milliseconds()).Scan(&l.HostID, &l.RunID, &l.Token, &l.Holder, &l.ExpiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			if qerr := tx.db.QueryRow(ctx, `SELECT run_id FROM host_leases WHERE host_id = $1`, hostID).Scan(&busyRun); qerr != nil && !errors.Is(qerr, pgx.ErrNoRows) {
				return fmt.Errorf("store: lease of host %d: %w", hostID, qerr)
			}
			return ErrHostBusy
		}
		if err != nil {
			return fmt.Errorf("store: acquire lease of host %d: %w", hostID, err)
		}
		return nil
	})
	if errors.Is(err, ErrHostBusy) {
		return Lease{}, busyRun, ErrHostBusy
	}
	if err != nil {
		return Lease{}, 0, err
	}
	return l, 0, nil
}

// probeOnHost returns another run (not runID) whose probe may be on the
// host (0 when none).
func (s *Store) probeOnHost(ctx context.Context, hostID, runID int64) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `SELECT r.id FROM runs r
		WHERE r.host_id = $1 AND r.id <> $2 AND r.launch_intent_at IS NOT NULL AND r.probe_ended_at IS NULL AND `+probeMayRunSQL+`
		ORDER BY r.id LIMIT 1`, hostID, runID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: probes on host %d: %w", hostID, err)
	}
	return id, nil
}

// RenewLease extends a lease; ErrFenced when it was taken over.
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) error {
	tag, err := s.db.Exec(ctx, `UPDATE host_leases SET expires_at = now() + $3 * interval '1 millisecond'
		WHERE host_id = $1 AND token = $2`, l.HostID, l.Token, ttl.Milliseconds())
	if err != nil {
		return fmt.Errorf("store: renew lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// ReleaseLease gives the host back (a no-op when the lease is gone).
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	_, err := s.db.Exec(ctx, `DELETE FROM host_leases WHERE host_id = $1 AND token = $2`, l.HostID, l.Token)
	if err != nil {
		return fmt.Errorf("store: release lease: %w", err)
	}
	return nil
}

// CheckFence returns ErrFenced unless the lease is still current. Call it
// inside the transaction of every write made on the run's behalf: the
// row lock taken here holds until the transaction ends, so a takeover
// cannot slip in between the check and the write.
func (s *Store) CheckFence(ctx context.Context, l Lease) error {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT true FROM host_leases WHERE host_id = $1 AND token = $2 FOR SHARE`, l.HostID, l.Token).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrFenced
	}
	if err != nil {
		return fmt.Errorf("store: check lease: %w", err)
	}
	return nil
}

// LeaseOf returns the current lease of a host (ErrNotFound when free).
func (s *Store) LeaseOf(ctx context.Context, hostID int64) (Lease, error) {
	var l Lease
	err := s.db.QueryRow(ctx, `SELECT host_id, run_id, token, holder, expires_at FROM host_leases WHERE host_id = $1`, hostID).
		Scan(&l.HostID, &l.RunID, &l.Token, &l.Holder, &l.ExpiresAt)
	if err != nil {
		return l, notFound(err, fmt.Sprintf("lease of host %d", hostID))
	}
	return l, nil
}
