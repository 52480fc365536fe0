package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/store"
)

// The API client against the real routes: every call `accord submit`
// makes, read back into the client's types, with the errors a pipeline
// acts on (field errors, not found, a refused token).
func TestAPIClientAgainstTheServer(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	base, err := url.Parse(pb.ts.URL)
	require.NoError(t, err)
	client := func(token string) *apiclient.Client {
		return apiclient.New(apiclient.Config{BaseURL: base, Token: token, UserAgent: "accord-test"})
	}
	api := client(pb.engToken)
	pid := pb.programID

	programs, err := api.Programs(ctx)
	require.NoError(t, err)
	require.Len(t, programs, 1)
	require.Equal(t, pid, programs[0].ID)
	require.Equal(t, "Program", programs[0].Name)
	require.Equal(t, "Vendor", programs[0].Vendor)
	require.Equal(t, "Customer", programs[0].Customer)
	require.Equal(t, string(store.RoleEngineer), programs[0].Role)

	signed := pb.signedRun(t) // a host "lab", a profile, a gate set
	hosts, err := api.Hosts(ctx, pid)
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	require.Equal(t, "lab", hosts[0].Name)
	require.False(t, hosts[0].Pinned, "no host key confirmed yet")
	require.NoError(t, pb.store.PinHostKeys(ctx, pid, hosts[0].ID, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly", "SHA256:fake", nil))
	hosts, err = api.Hosts(ctx, pid)
	require.NoError(t, err)
	require.True(t, hosts[0].Pinned)

	profiles, err := api.Specs(ctx, pid, apiclient.Profiles)
	require.NoError(t, err)
	require.Len(t, profiles, 1)
	require.Equal(t, 1, profiles[0].LatestVersion)
	sv, err := api.SpecVersion(ctx, pid, apiclient.Profiles, profiles[0].ID, 1)
	require.NoError(t, err)
	require.Equal(t, profiles[0].LatestDigest, sv.Digest)
	require.True(t, json.Valid(sv.Spec))
	byID, err := api.SpecVersionByID(ctx, pid, apiclient.Profiles, sv.VersionID)
	require.NoError(t, err)
	require.Equal(t, sv.Digest, byID.Digest)
	_, err = api.SpecVersionByID(ctx, pid, apiclient.Profiles, 999999)
	require.True(t, apiclient.IsNotFound(err), "%v", err)
	gateSets, err := api.Specs(ctx, pid, apiclient.GateSets)
	require.NoError(t, err)
	require.Len(t, gateSets, 1)

	// Submitting: field errors name the fields; the same key gets the same run.
	_, err = api.CreateRun(ctx, pid, apiclient.RunRequest{ProfileVersionID: sv.VersionID, HostID: 999999}, "")
	var se *apiclient.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, http.StatusUnprocessableEntity, se.Status)
	require.Contains(t, se.Fields, "host")
	require.False(t, se.Transient())
	key, err := apiclient.NewIdempotencyKey("test-")
	require.NoError(t, err)
	req := apiclient.RunRequest{ProfileVersionID: sv.VersionID, HostID: hosts[0].ID, Label: "from the client", ConfirmReadiness: true}
	run, err := api.CreateRun(ctx, pid, req, key)
	require.NoError(t, err, "%+v", err)
	require.Equal(t, store.RunQueued, run.State)
	require.Equal(t, "from the client", run.Label)
	require.Equal(t, "lab", run.Host)
	require.False(t, run.Final)
	again, err := api.CreateRun(ctx, pid, req, key)
	require.NoError(t, err)
	require.Equal(t, run.ID, again.ID)

	got, err := api.Run(ctx, pid, run.ID)
	require.NoError(t, err)
	require.Equal(t, run.ID, got.ID)
	require.Contains(t, got.URL, "/runs/")
	cancelled, err := api.CancelRun(ctx, pid, run.ID)
	require.NoError(t, err)
	require.Equal(t, run.ID, cancelled.ID)
	require.Equal(t, store.RunCancelled, cancelled.State, "a queued run is cancelled at once")

	// The signed run: its evaluation, and its report streamed.
	_, err = api.Evaluation(ctx, pid, signed)
	require.True(t, apiclient.IsNotFound(err), "no evaluation stored yet: %v", err)
	stored, err := pb.store.GetRun(ctx, pid, signed)
	require.NoError(t, err)
	ev := acceptance.Evaluation{EngineVersion: acceptance.EngineVersion, Verdict: acceptance.Pass, Explanation: "every criterion passes"}
	result, err := json.Marshal(ev)
	require.NoError(t, err)
	_, err = pb.store.SaveEvaluation(ctx, store.StoredEvaluation{RunID: signed, GateSetVersionID: *stored.GateSetVersionID, Overall: "PASS",
		Result: result, Canonical: result, Digest: "sha256:test", EngineVersion: acceptance.EngineVersion})
	require.NoError(t, err)
	gotEv, err := api.Evaluation(ctx, pid, signed)
	require.NoError(t, err)
	require.Equal(t, acceptance.Pass, gotEv.Verdict)
	require.Equal(t, "every criterion passes", gotEv.Explanation)

	rep, err := api.OpenReport(ctx, pid, signed)
	require.NoError(t, err)
	bundle, err := io.ReadAll(rep.Body)
	require.NoError(t, rep.Body.Close())
	require.NoError(t, err)
	sum := sha256.Sum256(bundle)
	require.Equal(t, hex.EncodeToString(sum[:]), rep.SHA256, "the announced digest is the bundle's")
	_, err = api.OpenReport(ctx, pid, run.ID)
	require.True(t, apiclient.IsNotFound(err), "an unsigned run has no report: %v", err)

	// Another program's objects, and a refused token.
	_, err = api.Run(ctx, pid+1000, run.ID)
	require.True(t, apiclient.IsNotFound(err), "%v", err)
	_, err = client("not-a-token").Programs(ctx)
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, http.StatusUnauthorized, se.Status)
	require.NotContains(t, err.Error(), "not-a-token")
}
