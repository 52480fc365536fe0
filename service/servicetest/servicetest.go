// Package servicetest builds what the service packages' tests work on,
// with real components: a store on a PostgreSQL transaction rolled back
// when the test ends, a program of two organisations of its own with its
// spec versions, hosts and runs, a signing keyring, and the follow-up jobs
// the service enqueues as River jobs inserted in that transaction.
package servicetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// Store is a store on a transaction of the shared test database of its
// own, rolled back when the test ends (InTx inside it uses savepoints).
func Store(t testing.TB) *store.Store {
	t.Helper()
	return store.New(nil).WithTx(storetest.Tx(t))
}

var seq atomic.Int64

// unique makes a name no other test uses: organisation names and e-mail
// addresses are unique across the shared database, and two open
// transactions inserting one name would wait for each other.
func unique(t testing.TB, prefix string) string {
	t.Helper()
	return fmt.Sprintf("%s %s %d", prefix, strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), seq.Add(1))
}

// Program is a joint program of a vendor and a customer organisation of
// its own.
type Program struct {
	ID, Vendor, Customer int64
	VendorName           string
	CustomerName         string
}

// NewProgram creates a program with its two organisations.
func NewProgram(t testing.TB, st *store.Store) Program {
	t.Helper()
	ctx := context.Background()
	p := Program{VendorName: unique(t, "Vendor"), CustomerName: unique(t, "Customer")}
	var err error
	p.Vendor, err = st.CreateOrganization(ctx, p.VendorName, "vendor")
	require.NoError(t, err)
	p.Customer, err = st.CreateOrganization(ctx, p.CustomerName, "customer")
	require.NoError(t, err)
	p.ID, err = st.CreateProgram(ctx, "Program", "", p.Vendor, p.Customer, nil)
	require.NoError(t, err)
	return p
}

// Member creates an account of org (the program's vendor or customer) and
// adds it to the program with role; it returns the account.
func (p Program) Member(t testing.TB, st *store.Store, name string, org int64, role store.Role) store.User {
	t.Helper()
	ctx := context.Background()
	email := fmt.Sprintf("%s-%d@%s.example", name, seq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	id, err := st.CreateUser(ctx, store.NewUser{Email: email, DisplayName: name, PasswordHash: "x", OrganizationID: &org})
	require.NoError(t, err)
	_, err = st.SetMember(ctx, p.ID, id, role)
	require.NoError(t, err)
	u, err := st.UserByID(ctx, id)
	require.NoError(t, err)
	return u
}

// Profile stores a profile as a new profile's version 1.
func (p Program) Profile(t testing.TB, st *store.Store, spec acceptance.ProfileSpec) store.SpecVersion {
	t.Helper()
	spec = spec.Normalized()
	require.Empty(t, acceptance.ValidateProfile(spec))
	canon, err := acceptance.ProfileCanonicalJSON(spec)
	require.NoError(t, err)
	digest, err := acceptance.ProfileDigest(spec)
	require.NoError(t, err)
	_, v, err := st.CreateSpec(context.Background(), store.KindProfile, p.ID, store.NewSpecVersion{Name: spec.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	return v
}

// GateSet stores a gate set as a new gate set's version 1.
func (p Program) GateSet(t testing.TB, st *store.Store, spec acceptance.GateSetSpec) store.SpecVersion {
	t.Helper()
	spec = spec.Normalized()
	require.Empty(t, acceptance.ValidateGateSet(spec))
	canon, err := acceptance.GateSetCanonicalJSON(spec)
	require.NoError(t, err)
	digest, err := acceptance.GateSetDigest(spec)
	require.NoError(t, err)
	_, v, err := st.CreateSpec(context.Background(), store.KindGateSet, p.ID, store.NewSpecVersion{Name: spec.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	return v
}

// Host registers a lab host (never reached: its address is loopback's
// discard port).
func (p Program) Host(t testing.TB, st *store.Store, name string) int64 {
	t.Helper()
	id, err := st.CreateHost(context.Background(), p.ID, store.NewHost{Name: name, Address: "127.0.0.1", Port: 9, Username: "lab", AuthMethod: "key"})
	require.NoError(t, err)
	return id
}

// Run creates a run of the program.
func (p Program) Run(t testing.TB, st *store.Store, r store.NewRun) store.Run {
	t.Helper()
	ctx := context.Background()
	r.ProgramID = p.ID
	id, err := st.CreateRun(ctx, r)
	require.NoError(t, err)
	run, err := st.RunByID(ctx, id)
	require.NoError(t, err)
	return run
}

// Keyring is an installation's signing keyring in a folder of the test.
func Keyring(t testing.TB) *attest.Keyring {
	t.Helper()
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	return kr
}

// Env is what the service's rollout operations need: a keyring and the
// job queue, River's, inserting in the caller's transaction.
func Env(t testing.TB) rollout.Env {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{}) // inserts in transactions only
	require.NoError(t, err)
	return rollout.Env{Keyring: Keyring(t), Queue: jobs.NewQueue(client)}
}

// Enqueued lists the run ids (args run_id) of the River jobs of kind that
// the test's transaction holds.
func Enqueued(t testing.TB, st *store.Store, kind string) []int64 {
	t.Helper()
	return EnqueuedBy(t, st, kind, "run_id")
}

// EnqueuedBy lists an id argument (arg) of the River jobs of kind that the
// test's transaction holds.
func EnqueuedBy(t testing.TB, st *store.Store, kind, arg string) []int64 {
	t.Helper()
	rows, err := st.Tx().Query(context.Background(), `SELECT (args->>$2)::bigint FROM river_job WHERE kind = $1 ORDER BY id`, kind, arg)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}
