package store_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// The building blocks of the store tests' setups. A test works in its own
// transaction of the shared test database (txStore), rolled back when it
// ends; a test that must commit (notifications, concurrency) takes a
// database of its own (storetest.NewPool).

// txStore is a Store on a transaction of its own, rolled back at the end
// of the test.
func txStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(nil).WithTx(storetest.Tx(t))
}

var nameSeq atomic.Int64

// uniqueName makes a name no other test uses. Unique indexes on
// organisation names and e-mail addresses span the shared database, and
// two open transactions inserting one name would wait for each other.
func uniqueName(t *testing.T, prefix string) string {
	t.Helper()
	test := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("%s %s %d", prefix, test, nameSeq.Add(1))
}

// uniqueEmail is an address no other test uses.
func uniqueEmail(t *testing.T, local string) string {
	t.Helper()
	return fmt.Sprintf("%s-%d@%s.example", local, nameSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
}

// inSavepoint runs fn in a savepoint of st's transaction, so that a
// statement the test expects PostgreSQL to refuse does not abort the
// test's transaction.
func inSavepoint(st *store.Store, fn func(tx *store.Store) error) error {
	return st.InTx(context.Background(), fn)
}

// programFixture is a joint program of a vendor and a customer
// organisation of its own.
type programFixture struct {
	ID, Vendor, Customer int64
}

func newProgram(t *testing.T, st *store.Store) programFixture {
	t.Helper()
	ctx := context.Background()
	var p programFixture
	var err error
	p.Vendor, err = st.CreateOrganization(ctx, uniqueName(t, "Vendor"), "vendor")
	require.NoError(t, err)
	p.Customer, err = st.CreateOrganization(ctx, uniqueName(t, "Customer"), "customer")
	require.NoError(t, err)
	p.ID, err = st.CreateProgram(ctx, "Program", "", p.Vendor, p.Customer, nil)
	require.NoError(t, err)
	return p
}

// another is a second program of the same two organisations, whose
// objects the first program's reads must not see.
func (p programFixture) another(t *testing.T, st *store.Store) int64 {
	t.Helper()
	id, err := st.CreateProgram(context.Background(), "another", "", p.Vendor, p.Customer, nil)
	require.NoError(t, err)
	return id
}

// newUser creates an account in org (nil: no organisation).
func newUser(t *testing.T, st *store.Store, name string, org *int64) int64 {
	t.Helper()
	id, err := st.CreateUser(context.Background(), store.NewUser{Email: uniqueEmail(t, name), DisplayName: name, PasswordHash: "x", OrganizationID: org})
	require.NoError(t, err)
	return id
}

// member adds a new user of the vendor organisation with role.
func (p programFixture) member(t *testing.T, st *store.Store, name string, role store.Role) int64 {
	t.Helper()
	id := newUser(t, st, name, &p.Vendor)
	_, err := st.SetMember(context.Background(), p.ID, id, role)
	require.NoError(t, err)
	return id
}

// newProfileVersion creates a profile with its version 1.
func newProfileVersion(t *testing.T, st *store.Store, programID int64, name string) store.SpecVersion {
	t.Helper()
	_, sv, err := st.CreateSpec(context.Background(), store.KindProfile, programID,
		store.NewSpecVersion{Name: name, Spec: []byte(`{"name":"` + name + `"}`), Digest: "sha256:" + name})
	require.NoError(t, err)
	return sv
}

// newGateSetVersion creates a gate set with its version 1.
func newGateSetVersion(t *testing.T, st *store.Store, programID int64, name string) store.SpecVersion {
	t.Helper()
	_, sv, err := st.CreateSpec(context.Background(), store.KindGateSet, programID,
		store.NewSpecVersion{Name: name, Spec: []byte(`{"name":"` + name + `"}`), Digest: "sha256:" + name})
	require.NoError(t, err)
	return sv
}

func newHost(t *testing.T, st *store.Store, programID int64, name string) int64 {
	t.Helper()
	id, err := st.CreateHost(context.Background(), programID, store.NewHost{Name: name, Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	return id
}

// runFixture is a program with a host and a profile version to run.
type runFixture struct {
	programFixture
	Host           int64
	ProfileVersion store.SpecVersion
}

func newRunFixture(t *testing.T, st *store.Store) runFixture {
	t.Helper()
	p := newProgram(t, st)
	return runFixture{programFixture: p, Host: newHost(t, st, p.ID, "lab"), ProfileVersion: newProfileVersion(t, st, p.ID, "kv")}
}

// run submits a queued run of the fixture's profile on its host.
func (f runFixture) run(t *testing.T, st *store.Store) int64 {
	t.Helper()
	id, err := st.CreateRun(context.Background(), store.NewRun{ProgramID: f.ID, ProfileVersionID: f.ProfileVersion.ID, HostID: f.Host})
	require.NoError(t, err)
	return id
}

// putArtifact stores data in the artifact store and returns its digest.
func putArtifact(t *testing.T, st *store.Store, data []byte) string {
	t.Helper()
	blob, err := st.Artifacts().Put(context.Background(), bytes.NewReader(data))
	require.NoError(t, err)
	return blob.SHA256
}
