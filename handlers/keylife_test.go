package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// signJudgedRun gives a judged run two raw outputs and signs it as the
// sign_run job does; it returns the bundle.
func (rb *rolloutBundle) signJudgedRun(t *testing.T) []byte {
	t.Helper()
	ctx := context.Background()
	run := rb.judgedRun(t, "PASS")
	for path, body := range map[string]string{"events.jsonl": `{"seq":1}` + "\n", "facts.json": `{"schema_version":1}`} {
		addRunFile(t, rb.store, run, path, body)
	}
	require.NoError(t, rb.store.SetRunVerdict(ctx, run, "PASS"))
	_, err := report.Signer{Store: rb.store, Keyring: rb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.NoError(t, err)
	return rb.download(t, rb.url("/runs/"+itoa64(run)+"/report.tar.gz"))
}

// Revoking the installation's key does not break the decision log: every
// program's head is signed again with the new active key (the revoked
// key's checkpoints kept), the Decisions page still says verified (and
// notes the revocation), a bundle signed before the revocation still
// verifies, one signed after carries the whole log and says how many
// decisions it holds, and the published head tells an old export it is
// behind.
func TestKeyRevocationCarriesTheDecisionLogOn(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	ctx := context.Background()
	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	rb.judgedRun(t, "PASS")
	for _, c := range []*http.Client{rb.vendorApprover, rb.custApprover} {
		code, page := rb.decide(t, c, "lab-acceptance", "approve", "")
		require.Equal(t, http.StatusSeeOther, code, page)
	}
	before := rb.signJudgedRun(t)
	oldExport := rb.download(t, rb.url("/decisions/export"))
	code, page := rb.decide(t, rb.viewer, "pilot-5pct", "halt", "TTFT spikes on the pilot nodes")
	require.Equal(t, http.StatusSeeOther, code, page)

	revokedKey, err := rb.keyring.Active()
	require.NoError(t, err)
	rb.createUser(t, "root@vendor.example", nil, true)
	admin := rb.signIn(t, "root@vendor.example")
	res, page := rb.post(t, admin, "/admin/keys/revoke", url.Values{"key_id": {revokedKey.KeyID()}, "reason": {"laptop stolen"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	activeKey, err := rb.keyring.Active()
	require.NoError(t, err)
	require.NotEqual(t, revokedKey.KeyID(), activeKey.KeyID())

	// The page: verified, the new key signs the head, the revocation noted.
	_, log := rb.get(t, rb.viewer, rb.url("/decisions"))
	require.Contains(t, log, `id="chain-verdict">verified<`)
	require.Contains(t, log, `id="checkpoint-key">`+activeKey.KeyID()+`<`)
	require.Contains(t, log, "was revoked at")
	require.Contains(t, log, "(laptop stolen), after it signed")

	trusted, err := attest.ParseTrustedKeys(rb.download(t, "/.well-known/accord/keys.json"))
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	verify := func(path string, head *attest.LogHead) (string, error) {
		var out bytes.Buffer
		err := attest.VerifyFileWithHead(ctx, path, trusted, head, &out)
		return out.String(), err
	}

	// The export: 3 records, 3 checkpoints kept before the carried-over one;
	// every envelope verifies with securesystemslib's DSSE as well.
	export := rb.download(t, rb.url("/decisions/export"))
	require.Equal(t, 7, attesttest.CheckDecisionLogEnvelopes(t, export, trusted))
	out, err := verify(write("decisions.json", export), nil)
	require.NoError(t, err)
	require.Contains(t, out, "3 records")
	require.Contains(t, out, "signed by "+activeKey.KeyID()+" (3 earlier checkpoints)")
	checkpoints, err := rb.store.ListCheckpoints(ctx, rb.programID)
	require.NoError(t, err)
	require.Len(t, checkpoints, 4)
	require.Equal(t, store.CheckpointForRevocation, checkpoints[3].Reason)
	require.Equal(t, revokedKey.KeyID(), checkpoints[2].KeyID)

	// The bundle signed before the revocation still verifies, with a warning.
	out, err = verify(write("before.tar.gz", before), nil)
	require.NoError(t, err)
	require.Contains(t, out, "REVOKED at")
	require.Contains(t, out, "WARNING: "+attest.FileManifestSig+": key "+revokedKey.KeyID()+" was revoked at")

	// A bundle signed after it carries the whole log and says so.
	after := rb.signJudgedRun(t)
	out, err = verify(write("after.tar.gz", after), nil)
	require.NoError(t, err)
	require.Contains(t, out, "Decision log: 3 records")
	verifyMD := string(fileOf(t, after, "/"+attest.FileVerifyMD))
	require.Contains(t, verifyMD, "was signed: 3 decisions, seq 1 to 3")
	require.NotContains(t, verifyMD, "no decisions")
	require.NotContains(t, verifyMD, "no rollout decisions")

	// Freshness: the published head says the old export is behind, the
	// current one is not.
	headJSON := rb.download(t, rb.url("/decisions/head.json"))
	head, err := attest.ParseLogHead(headJSON)
	require.NoError(t, err)
	var headDoc struct {
		Checkpoint json.RawMessage `json:"checkpoint"`
	}
	require.NoError(t, json.Unmarshal(headJSON, &headDoc))
	keyID, _ := attesttest.VerifyEnvelope(t, headDoc.Checkpoint, trusted, attest.CheckpointPayloadType)
	require.Equal(t, activeKey.KeyID(), keyID)
	require.Equal(t, int64(3), head.Seq)
	_, err = verify(write("old.json", oldExport), head)
	require.ErrorIs(t, err, attest.ErrLogBehind)
	require.ErrorContains(t, err, "BEHIND: the installation's log is at seq 3")
	require.ErrorContains(t, err, "this one ends at seq 2, 1 decision earlier")
	out, err = verify(write("after-head.tar.gz", after), head)
	require.NoError(t, err)
	require.Contains(t, out, "Decision log current")
	require.True(t, strings.HasSuffix(out, "verified\n"), out)
}

// A revocation whose carry-over fails (here the database refuses the new
// checkpoint) left every log's head signed by the revoked key, with no
// retry. Now the key is revoked regardless, the page says the logs will
// be carried over, and they are: before the next report of the program is
// signed (no bundle is signed with the revoked head while it cannot be),
// and by the periodic job, which runs at every start.
func TestKeyRevocationWhoseCarryOverFailsIsRetried(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	ctx := context.Background()
	rb.addStages(t, "lab-acceptance")
	rb.judgedRun(t, "PASS")
	for _, c := range []*http.Client{rb.vendorApprover, rb.custApprover} {
		code, page := rb.decide(t, c, "lab-acceptance", "approve", "")
		require.Equal(t, http.StatusSeeOther, code, page)
	}
	rb.createUser(t, "root@vendor.example", nil, true)
	admin := rb.signIn(t, "root@vendor.example")
	failCarryOver := func(on bool) {
		sql := `DROP TRIGGER decision_checkpoints_test_failure ON decision_checkpoints`
		if on {
			_, err := rb.pool.Exec(ctx, `CREATE FUNCTION test_refuse_carry_over() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'could not extend file: No space left on device (test)'; END $$`)
			if err != nil && !strings.Contains(err.Error(), "already exists") {
				require.NoError(t, err)
			}
			sql = `CREATE TRIGGER decision_checkpoints_test_failure BEFORE INSERT ON decision_checkpoints
				FOR EACH ROW WHEN (NEW.reason = 'key_revoked') EXECUTE FUNCTION test_refuse_carry_over()`
		}
		_, err := rb.pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	headKey := func() string {
		c, err := rb.store.ProgramDecisionChain(ctx, rb.programID)
		require.NoError(t, err)
		return c.Checkpoint.Signatures[0].KeyID
	}
	revoke := func() (revoked, active string) {
		k, err := rb.keyring.Active()
		require.NoError(t, err)
		require.Equal(t, k.KeyID(), headKey())
		res, page := rb.post(t, admin, "/admin/keys/revoke", url.Values{"key_id": {k.KeyID()}, "reason": {"laptop stolen"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
		_, page = rb.get(t, admin, "/admin/keys")
		require.Contains(t, page, "decision logs were signed again with the active key; the others could not be yet (see the server&#39;s log): retried every 60 s and before a report is signed.")
		keys, err := rb.keyring.PublicKeys()
		require.NoError(t, err)
		for _, pk := range keys {
			if pk.ID == k.KeyID() {
				require.Equal(t, attest.KeyRevoked, pk.Status, "the key is revoked whatever the carry-over did")
			}
		}
		now, err := rb.keyring.Active()
		require.NoError(t, err)
		require.Equal(t, k.KeyID(), headKey(), "the head is still the revoked key's")
		var failed bool
		require.NoError(t, rb.pool.QueryRow(ctx, `SELECT (details->>'decision_logs_carry_over_failed')::bool FROM audit_log
			WHERE action = 'signing_key_revoked' AND target = $1`, k.KeyID()).Scan(&failed))
		require.True(t, failed, "the audit says so")
		return k.KeyID(), now.KeyID()
	}
	trusted := func() *attest.KeySet {
		ks, err := attest.ParseTrustedKeys(rb.download(t, "/.well-known/accord/keys.json"))
		require.NoError(t, err)
		return ks
	}

	// The first revocation's carry-over fails.
	failCarryOver(true)
	first, active := revoke()
	// While it still cannot be carried, no report is signed with it.
	run := rb.judgedRun(t, "PASS")
	addRunFile(t, rb.store, run, "facts.json", `{"schema_version":1}`)
	_, err := report.Signer{Store: rb.store, Keyring: rb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.ErrorContains(t, err, "No space left on device (test)")
	require.Equal(t, first, headKey())
	// The failure passes: the next signing carries the log over first.
	failCarryOver(false)
	bundle := rb.signJudgedRun(t)
	require.Equal(t, active, headKey(), "carried over before the signing")
	path := filepath.Join(t.TempDir(), "after.tar.gz")
	require.NoError(t, os.WriteFile(path, bundle, 0o600))
	var out bytes.Buffer
	require.NoError(t, attest.VerifyFileWithHead(ctx, path, trusted(), nil, &out))
	require.Contains(t, out.String(), "signed by "+active)
	log, err := attest.ParseDecisionLog(fileOf(t, bundle, "/"+attest.FileDecisions))
	require.NoError(t, err)
	keyID, _ := attesttest.VerifyEnvelope(t, mustJSON(t, log.Checkpoint), trusted(), attest.CheckpointPayloadType)
	require.Equal(t, active, keyID, "the bundle's log head is the active key's")

	// The second revocation's carry-over fails too; the periodic job, at
	// the start of a worker, carries it over once the failure passed.
	failCarryOver(true)
	second, active := revoke()
	require.NotEqual(t, first, second)
	failCarryOver(false)
	deps := jobs.Deps{Log: rb.log, Store: rb.store, Keyring: rb.keyring, Sealer: rb.sealer, Report: web.RenderReport}
	client, err := river.NewClient(riverpgxv5.New(rb.pool), &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers: jobs.Register(deps), PeriodicJobs: []*river.PeriodicJob{jobs.CarryLogsOverPeriodic()}, FetchPollInterval: 100 * time.Millisecond, TestOnly: true})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	require.Eventually(t, func() bool { return headKey() == active }, 90*time.Second, 200*time.Millisecond, "the periodic job carries the log over")
	_, page := rb.get(t, rb.viewer, rb.url("/decisions"))
	require.Contains(t, page, `id="chain-verdict">verified<`)
	require.Contains(t, page, `id="checkpoint-key">`+active+`<`)
	checkpoints, err := rb.store.ListCheckpoints(ctx, rb.programID)
	require.NoError(t, err)
	var reasons []string
	for _, c := range checkpoints {
		reasons = append(reasons, c.Reason+":"+c.KeyID)
	}
	require.Equal(t, []string{store.CheckpointForRevocation + ":" + active}, reasons[len(reasons)-1:])
	require.Len(t, reasons, 4, "two decisions, then one carry-over per revocation: %v", reasons)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// What the installation publishes once a key was rotated out and another
// revoked: keys.pem holds the active key alone (openssl reads it), each
// key's own PEM under /.well-known/accord/keys/ is that key and nothing
// else (openssl reads it; ssh-keygen converts it to the key whose
// fingerprint is its id), and with the published keys.pem, accord verify
// refuses what the revoked key signs after its revocation.
func TestPublishedKeysAfterARevocation(t *testing.T) {
	t.Parallel()
	attesttest.RequireTools(t, "openssl", "ssh-keygen")
	rb := setupRollout(t)
	ctx := context.Background()
	rb.createUser(t, "root@vendor.example", nil, true)
	admin := rb.signIn(t, "root@vendor.example")
	retired, err := rb.keyring.Active()
	require.NoError(t, err)
	res, page := rb.post(t, admin, "/admin/keys/rotate", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	stolen, err := rb.keyring.Active()
	require.NoError(t, err)
	res, page = rb.post(t, admin, "/admin/keys/revoke", url.Values{"key_id": {stolen.KeyID()}, "reason": {"laptop stolen"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	active, err := rb.keyring.Active()
	require.NoError(t, err)
	dir := t.TempDir()
	save := func(path string) string {
		file := filepath.Join(dir, filepath.Base(path))
		require.NoError(t, os.WriteFile(file, rb.download(t, path), 0o600))
		return file
	}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return string(out)
	}
	// fingerprint is the SHA256 fingerprint of a PEM public key, as
	// ssh-keygen computes it after converting it.
	fingerprint := func(pemFile string) string {
		sshKey := filepath.Join(dir, "converted.pub")
		require.NoError(t, os.WriteFile(sshKey, []byte(run("ssh-keygen", "-i", "-m", "PKCS8", "-f", pemFile)), 0o600))
		fields := strings.Fields(run("ssh-keygen", "-l", "-E", "sha256", "-f", sshKey))
		require.GreaterOrEqual(t, len(fields), 2)
		return fields[1]
	}

	// keys.pem: the active key alone.
	keysPEM := save("/.well-known/accord/keys.pem")
	body, err := os.ReadFile(keysPEM)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(body), "-----BEGIN PUBLIC KEY-----"))
	require.Contains(t, string(body), "# "+active.KeyID()+" active\n")
	require.NotContains(t, string(body), stolen.KeyID())
	require.NotContains(t, string(body), retired.KeyID())
	run("openssl", "pkey", "-pubin", "-in", keysPEM, "-noout")
	require.Equal(t, active.KeyID(), fingerprint(keysPEM))

	// Each key's own PEM, as keys.json names it.
	keysJSON := rb.download(t, "/.well-known/accord/keys.json")
	var doc struct {
		Keys []struct {
			ID, Status string
			PEMFile    string `json:"pem_file"`
		} `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(keysJSON, &doc))
	statuses := map[string]string{}
	for _, k := range doc.Keys {
		statuses[k.ID] = k.Status
		resp, err := http.Get(rb.ts.URL + "/.well-known/accord/" + k.PEMFile)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "application/x-pem-file", resp.Header.Get("Content-Type"))
		file := save("/.well-known/accord/" + k.PEMFile)
		own, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(own), "-----BEGIN PUBLIC KEY-----"), k.ID)
		run("openssl", "pkey", "-pubin", "-in", file, "-noout")
		require.Equal(t, k.ID, fingerprint(file), "%s's own PEM is that key", k.ID)
	}
	require.Equal(t, map[string]string{retired.KeyID(): "retired", stolen.KeyID(): "revoked", active.KeyID(): "active"}, statuses)

	// Whoever kept the revoked key signs a bundle after the revocation:
	// refused with each published form of the keys.
	keys, err := rb.keyring.PublicKeys()
	require.NoError(t, err)
	var revokedAt time.Time
	for _, k := range keys {
		if k.ID == stolen.KeyID() {
			revokedAt = k.RevokedAt
		}
	}
	// The thief ships the key's own public key, not the published ones.
	in := attesttest.SampleInput(t, stolen, []attest.PublicKey{stolen.PublicKey()}, "9", revokedAt.Add(time.Hour))
	var forged bytes.Buffer
	_, err = attest.WriteBundle(ctx, &forged, stolen, in)
	require.NoError(t, err)
	bundle := filepath.Join(dir, "forged.tar.gz")
	require.NoError(t, os.WriteFile(bundle, forged.Bytes(), 0o600))
	for file, says := range map[string]string{
		keysPEM:                               "signed by key " + stolen.KeyID() + ", which is not a trusted key",
		save("/.well-known/accord/keys.json"): "key " + stolen.KeyID() + " was revoked at " + revokedAt.UTC().Format(time.RFC3339) + " (laptop stolen)",
		save("/.well-known/accord/allowed_signers"): "key " + stolen.KeyID() + " was revoked at " + revokedAt.UTC().Format(time.RFC3339) + " (laptop stolen)",
	} {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		trusted, err := attest.ParseTrustedKeys(data)
		require.NoError(t, err)
		err = attest.VerifyFileWithHead(ctx, bundle, trusted, nil, io.Discard)
		require.ErrorContains(t, err, says, filepath.Base(file))
	}
}
