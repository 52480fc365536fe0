package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		var err error
		l, busyRun, err = tx.acquireLease(ctx, hostID, runID, holder, ttl)
		return err
	})
	if errors.Is(err, ErrHostBusy) {
		return Lease{}, busyRun, ErrHostBusy
	}
	if err != nil {
		return Lease{}, 0, err
	}
	return l, 0, nil
}

// AcquireLeases takes every host of a multi-host run, all or none, as
// AcquireLease takes one: in one transaction, locking the hosts' lease
// rows in ascending host id order, so that two runs asking for
// overlapping sets never wait for each other in a cycle, and a set of
// which one host is busy is given up whole (the transaction rolls back:
// no host of it was ever held). Busy: ErrHostBusy with the host and the
// run that keeps it.
func (s *Store) AcquireLeases(ctx context.Context, hostIDs []int64, runID int64, holder string, ttl time.Duration) ([]Lease, int64, int64, error) {
	ids := slices.Clone(hostIDs)
	slices.Sort(ids)
	var leases []Lease
	var busyHost, busyRun int64
	err := s.InTx(ctx, func(tx *Store) error {
		leases = leases[:0]
		for _, id := range ids {
			l, busy, err := tx.acquireLease(ctx, id, runID, holder, ttl)
			if errors.Is(err, ErrHostBusy) {
				busyHost, busyRun = id, busy
			}
			if err != nil {
				return err
			}
			leases = append(leases, l)
		}
		return nil
	})
	if errors.Is(err, ErrHostBusy) {
		return nil, busyHost, busyRun, ErrHostBusy
	}
	if err != nil {
		return nil, 0, 0, err
	}
	return leases, 0, 0, nil
}

// acquireLease is AcquireLease inside the caller's transaction.
func (tx *Store) acquireLease(ctx context.Context, hostID, runID int64, holder string, ttl time.Duration) (Lease, int64, error) {
	var l Lease
	var busyRun int64
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
		return l, 0, fmt.Errorf("store: lease of host %d: %w", hostID, err)
	}
	if held && holderRun != runID && !expired {
		return l, holderRun, ErrHostBusy
	}
	if blocker, err := tx.probeOnHost(ctx, hostID, runID); err != nil {
		return l, 0, err
	} else if blocker != 0 {
		return l, blocker, ErrHostBusy
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
			return l, 0, fmt.Errorf("store: lease of host %d: %w", hostID, qerr)
		}
		return l, busyRun, ErrHostBusy
	}
	if err != nil {
		return l, 0, fmt.Errorf("store: acquire lease of host %d: %w", hostID, err)
	}
	return l, 0, nil
}

// probeOnHost returns another run (not runID) whose probe may be on the
// host (0 when none): a one-host run on it, or a multi-host run of which
// it is a host whose probe was not seen to end.
func (s *Store) probeOnHost(ctx context.Context, hostID, runID int64) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `SELECT r.id FROM runs r
		WHERE r.id <> $2 AND r.launch_intent_at IS NOT NULL AND r.probe_ended_at IS NULL AND `+probeMayRunSQL+`
			AND CASE WHEN EXISTS (SELECT 1 FROM run_hosts rh WHERE rh.run_id = r.id)
				THEN EXISTS (SELECT 1 FROM run_hosts rh WHERE rh.run_id = r.id AND rh.host_id = $1 AND rh.probe_ended_at IS NULL)
				ELSE r.host_id = $1 END
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

// RenewLeases extends every lease of a multi-host run; ErrFenced when
// any was taken over.
func (s *Store) RenewLeases(ctx context.Context, leases []Lease, ttl time.Duration) error {
	for _, l := range leases {
		if err := s.RenewLease(ctx, l, ttl); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseLeases gives every host of a multi-host run back.
func (s *Store) ReleaseLeases(ctx context.Context, leases []Lease) error {
	for _, l := range leases {
		if err := s.ReleaseLease(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// CheckFences is CheckFence for every lease of a multi-host run.
func (s *Store) CheckFences(ctx context.Context, leases []Lease) error {
	for _, l := range leases {
		if err := s.CheckFence(ctx, l); err != nil {
			return err
		}
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

// HostLease returns the current lease of a host (ErrNotFound when free).
func (s *Store) HostLease(ctx context.Context, hostID int64) (Lease, error) {
	var l Lease
	err := s.db.QueryRow(ctx, `SELECT host_id, run_id, token, holder, expires_at FROM host_leases WHERE host_id = $1`, hostID).
		Scan(&l.HostID, &l.RunID, &l.Token, &l.Holder, &l.ExpiresAt)
	if err != nil {
		return l, notFound(err, fmt.Sprintf("lease of host %d", hostID))
	}
	return l, nil
}
