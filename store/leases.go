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
// yielded or died), or an expired lease whose run cannot have a probe on
// the host any more (Run.ProbeMayRun is false: it is evaluated or final,
// or its probe was never launched). A
// worker that dies leaves a detached probe measuring on the host: until
// that run is finished or stopped, the host stays its own, so two probes
// never measure one host at once. Otherwise ErrHostBusy, with the holding
// run's id. Every acquisition gets a new token, so a previous holder of
// the same run is fenced off.
func (s *Store) AcquireLease(ctx context.Context, hostID, runID int64, holder string, ttl time.Duration) (Lease, int64, error) {
	var l Lease
	err := s.db.QueryRow(ctx, `INSERT INTO host_leases (host_id, run_id, token, holder, expires_at)
		VALUES ($1, $2, nextval('host_lease_token'), $3, now() + $4 * interval '1 millisecond')
		ON CONFLICT (host_id) DO UPDATE SET run_id = EXCLUDED.run_id, token = EXCLUDED.token, holder = EXCLUDED.holder,
			acquired_at = now(), expires_at = EXCLUDED.expires_at
		WHERE host_leases.run_id = EXCLUDED.run_id
			OR (host_leases.expires_at < now() AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = host_leases.run_id
				AND r.launched AND r.state NOT IN ('evaluating', 'done', 'failed', 'cancelled')))
		RETURNING host_id, run_id, token, holder, expires_at`, hostID, runID, holder, ttl.Milliseconds()).
		Scan(&l.HostID, &l.RunID, &l.Token, &l.Holder, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		var busyRun int64
		if qerr := s.db.QueryRow(ctx, `SELECT run_id FROM host_leases WHERE host_id = $1`, hostID).Scan(&busyRun); qerr != nil && !errors.Is(qerr, pgx.ErrNoRows) {
			return l, 0, fmt.Errorf("store: lease of host %d: %w", hostID, qerr)
		}
		return l, busyRun, ErrHostBusy
	}
	if err != nil {
		return l, 0, fmt.Errorf("store: acquire lease of host %d: %w", hostID, err)
	}
	return l, 0, nil
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
