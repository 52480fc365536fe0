package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/migrations"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/readiness"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// profileRef is a saved profile: its spec id and its version 1's row id.
type profileRef struct{ spec, version int64 }

type readinessBundle struct {
	*programBundle
	// Hosts with the recorded facts of runners/readiness/testdata, and one
	// never checked.
	rdmaHost, tcpHost, failingHost, freshHost int64
	tcp, local, rdma                          profileRef
}

// setupReadiness is a program with three realistic lab hosts (an NVMe-oF
// RDMA GPU server, an NVMe-oF TCP host without fio, a local-NVMe host
// whose second drive fails), a host never checked, and the KV-cache
// profile over each transport.
func setupReadiness(t *testing.T) *readinessBundle {
	t.Helper()
	b := &readinessBundle{programBundle: setupProgram(t)}
	b.rdmaHost = b.addHost(t, "gpu-rdma-01", nil, "rdma-gpu")
	b.tcpHost = b.addHost(t, "tcp-lab-07", nil, "tcp-nogpu")
	b.failingHost = b.addHost(t, "kv-local-03", map[string]string{"gpu": "L40S"}, "failing-ssd")
	b.freshHost = b.addHost(t, "new-node-09", nil, "")
	b.tcp = b.saveProfile(t, "KV over TCP", acceptance.TransportNVMeoFTCP)
	b.local = b.saveProfile(t, "KV on local NVMe", acceptance.TransportLocalNVMe)
	b.rdma = b.saveProfile(t, "KV over RDMA", acceptance.TransportNVMeoFRDMA)
	return b
}

func fixtureFacts(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "runners", "readiness", "testdata", name+".json"))
	require.NoError(t, err)
	return raw
}

func (b *readinessBundle) addFacts(t *testing.T, host int64, runID *int64, raw []byte) {
	t.Helper()
	sum := sha256.Sum256(raw)
	_, err := b.store.AddHostFacts(context.Background(), host, runID, raw, hex.EncodeToString(sum[:]))
	require.NoError(t, err)
}

// addHost registers a pinned host and records a fixture's facts for it
// ("" leaves it never checked).
func (b *readinessBundle) addHost(t *testing.T, name string, labels map[string]string, fixture string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := b.store.CreateHost(ctx, b.programID, store.NewHost{Name: name, Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key", Labels: labels})
	require.NoError(t, err)
	require.NoError(t, b.store.PinHostKeys(ctx, b.programID, id, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly", "SHA256:fake", nil))
	if fixture != "" {
		b.addFacts(t, id, nil, fixtureFacts(t, fixture))
	}
	return id
}

func (b *readinessBundle) saveProfile(t *testing.T, name string, transport acceptance.Transport) profileRef {
	t.Helper()
	spec := kvTemplate(t)
	spec.Name = name
	spec.Storage.Transport = transport
	_, nv, errs, err := prepareSpec(profileOps, spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	sp, v, err := b.store.CreateSpec(context.Background(), store.KindProfile, b.programID, nv)
	require.NoError(t, err)
	return profileRef{spec: sp.ID, version: v.ID}
}

// finishedRun records a run of a profile that ended in state.
func (b *readinessBundle) finishedRun(t *testing.T, p profileRef, host int64, state string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := b.store.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: p.version, HostID: host})
	require.NoError(t, err)
	require.NoError(t, b.store.SetRunState(ctx, id, state, "test"))
	return id
}

// matrixCell reads one cell of the readiness matrix: a status word, or n/a.
func matrixCell(t *testing.T, page string, host int64, check string) (status, href string) {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`data-cell="%d/%s"><(?:a class="badge (\w+)" href="([^"]*)"[^>]*>(\w+)</a>|span class="muted small"[^>]*>(n/a)</span>)`, host, regexp.QuoteMeta(check)))
	m := re.FindStringSubmatch(page)
	require.NotNil(t, m, "cell %d/%s in the matrix", host, check)
	if m[4] != "" {
		return "n/a", ""
	}
	require.Equal(t, m[1], m[3], "the cell's colour and word agree")
	return m[3], strings.ReplaceAll(m[2], "&amp;", "&")
}

// hostCheck reads one check's status word on a host's readiness page.
func hostCheck(t *testing.T, page, check string) string {
	t.Helper()
	m := regexp.MustCompile(fmt.Sprintf(`(?s)<section class="panel check" id="check-%s">.*?<span class="badge (PASS|WARN|FAIL|UNKNOWN)">(\w+)</span>`, regexp.QuoteMeta(check))).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	require.Equal(t, m[1], m[2])
	return m[2]
}

// fitText is the text of a profile × host cell of the "ready for" table.
func fitText(t *testing.T, page string, p profileRef, host int64) string {
	t.Helper()
	m := regexp.MustCompile(fmt.Sprintf(`(?s)data-fit="%d/%d">(.*?)</td>`, p.spec, host)).FindStringSubmatch(page)
	require.NotNil(t, m, "fit of profile %d on host %d", p.spec, host)
	return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], " ")
}

// The matrix shows each host's checks under the profiles meant for it, in
// colour and words, and which host is ready for which profile.
func TestReadinessMatrix(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	res, page := b.get(t, b.viewer, b.url("/readiness"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `id="readiness-matrix"`)
	require.Contains(t, page, b.url("/readiness/plan"), "the matrix links to the integration plan")

	cell := func(host int64, check string) string {
		s, _ := matrixCell(t, page, host, check)
		return s
	}
	// The RDMA GPU server is judged by the RDMA profile (its fabric) and
	// the local one (its boot drive): only NUMA locality warns, for the
	// boot drive on the other socket.
	for _, d := range readiness.Definitions() {
		want := "PASS"
		switch d.ID {
		case "host.numa-locality":
			want = "WARN"
		case "host.pcie-links":
			// The fixture host's sysfs has no link speed files.
			want = "n/a"
		}
		require.Equal(t, want, cell(b.rdmaHost, d.ID), d.ID)
	}
	// The TCP host is judged by the TCP profile: fio is missing for its fio
	// step, numa I/O policy, one inaccessible path, MTU 1500, old kernel.
	require.Equal(t, "FAIL", cell(b.tcpHost, "tools.fio"))
	require.Equal(t, "WARN", cell(b.tcpHost, "storage.multipath"))
	require.Equal(t, "WARN", cell(b.tcpHost, "storage.ana"))
	require.Equal(t, "WARN", cell(b.tcpHost, "network.mtu"))
	require.Equal(t, "PASS", cell(b.tcpHost, "storage.controllers"))
	require.Equal(t, "n/a", cell(b.tcpHost, "network.rdma"))
	require.Equal(t, "n/a", cell(b.tcpHost, "gpu.driver"))
	// The failing-SSD host: its drive's health fails, GDS is missing for
	// its GPU (label gpu=L40S), no fabric checks apply.
	status, href := matrixCell(t, page, b.failingHost, "storage.health")
	require.Equal(t, "FAIL", status)
	require.Equal(t, b.url(fmt.Sprintf("/readiness/hosts/%d?profile=%d#check-storage.health", b.failingHost, b.local.spec)), href,
		"the cell opens the host's checks under the profile that failed")
	require.Equal(t, "WARN", cell(b.failingHost, "gpu.gds"))
	require.Equal(t, "WARN", cell(b.failingHost, "storage.queues"))
	require.Equal(t, "n/a", cell(b.failingHost, "network.mtu"))
	// A host never checked has no cells.
	require.Regexp(t, fmt.Sprintf(`(?s)<tr id="host-%d">.*?No facts yet: <a href="%s">check the host first</a>`, b.freshHost, regexp.QuoteMeta(b.url(fmt.Sprintf("/hosts/%d", b.freshHost)))), page)
	require.NotContains(t, page, fmt.Sprintf(`data-cell="%d/`, b.freshHost))

	// Go / no-go: every pair.
	require.Contains(t, fitText(t, page, b.rdma, b.rdmaHost), "GO")
	require.NotContains(t, fitText(t, page, b.rdma, b.rdmaHost), "NO-GO")
	require.Contains(t, fitText(t, page, b.local, b.rdmaHost), "GO")
	require.NotContains(t, fitText(t, page, b.local, b.rdmaHost), "NO-GO")
	tcpFit := fitText(t, page, b.tcp, b.rdmaHost)
	require.Contains(t, tcpFit, "NO-GO")
	require.Contains(t, tcpFit, "NVMe controllers live over the expected transport")
	require.Contains(t, fitText(t, page, b.tcp, b.tcpHost), "fio")
	require.Contains(t, fitText(t, page, b.tcp, b.tcpHost), "NO-GO")
	require.Contains(t, fitText(t, page, b.local, b.failingHost), "Controller health (SMART)")
	require.Contains(t, fitText(t, page, b.rdma, b.freshHost), "check the host first")

	// A transport label decides which profiles a host is meant for.
	labelled := b.addHost(t, "labelled", map[string]string{"transport": "nvmeof-tcp"}, "rdma-gpu")
	_, page = b.get(t, b.viewer, b.url("/readiness"))
	s, _ := matrixCell(t, page, labelled, "storage.controllers")
	require.Equal(t, "FAIL", s, "labelled TCP, connected over RDMA")
	// A profile that ran on a host judges it too.
	b.finishedRun(t, b.tcp, b.failingHost, store.RunFailed)
	_, page = b.get(t, b.viewer, b.url("/readiness"))
	s, _ = matrixCell(t, page, b.failingHost, "storage.controllers")
	require.Equal(t, "FAIL", s, "the TCP profile ran on the local host")
}

// Without profiles, hosts are described as they are.
func TestReadinessMatrixWithoutProfiles(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	b := &readinessBundle{programBundle: pb}
	_, page := b.get(t, b.viewer, b.url("/readiness"))
	require.Contains(t, page, `id="no-hosts"`)
	host := b.addHost(t, "kv-local-03", nil, "failing-ssd")
	_, page = b.get(t, b.viewer, b.url("/readiness"))
	require.Contains(t, page, `id="no-profiles"`)
	s, _ := matrixCell(t, page, host, "storage.health")
	require.Equal(t, "FAIL", s)
	s, _ = matrixCell(t, page, host, "tools.fio")
	require.Equal(t, "PASS", s)
	require.Contains(t, page, "as it is: no profile is meant for it")
}

// A host's page shows every check with its evidence (fact, value, command
// or file, excerpt) and how to fix it, under the profile chosen.
func TestReadinessHostPageEvidence(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	path := b.url(fmt.Sprintf("/readiness/hosts/%d", b.failingHost))

	res, page := b.get(t, b.viewer, fmt.Sprintf("%s?profile=%d", path, b.local.spec))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Expectations of profile KV on local NVMe v1: storage over local-nvme; a fio step will run, so fio is required; GPUs expected (host label gpu).")
	require.Equal(t, "FAIL", hostCheck(t, page, "storage.health"))
	require.Equal(t, "WARN", hostCheck(t, page, "storage.scheduler"))
	require.Equal(t, "PASS", hostCheck(t, page, "storage.controllers"))
	require.Empty(t, hostCheck(t, page, "network.rdma"), "checks that do not apply are left out")
	health := regexp.MustCompile(`(?s)<section class="panel check" id="check-storage.health">.*?</section>`).FindString(page)
	require.Contains(t, health, "reliability degraded")
	require.Contains(t, health, "How to fix:")
	require.Contains(t, health, "nvme.controllers[nvme1].smart_log.critical_warning")
	require.Contains(t, health, `<code class="command">nvme smart-log /dev/nvme1 -o json</code>`)
	require.Contains(t, health, "&#34;critical_warning&#34; : 4", "the excerpt of the raw output")
	require.Contains(t, health, "<details open>", "a failing check shows its evidence")
	sched := regexp.MustCompile(`(?s)<section class="panel check" id="check-storage.scheduler">.*?</section>`).FindString(page)
	require.Contains(t, sched, `<code class="file">/sys/block/nvme1n1/queue/scheduler</code>`)
	require.Regexp(t, `(?s)id="blocking-failures".*Controller health \(SMART\)`, page)
	require.Regexp(t, `(?s)id="fits".*KV on local NVMe v1</a>:\s*<span class="badge FAIL">NO-GO</span>`, page)
	require.Contains(t, page, `<option value="`+fmt.Sprint(b.local.spec)+`" selected>`)

	// No profile: the host as it is.
	_, page = b.get(t, b.viewer, path)
	require.Contains(t, page, "No profile chosen")
	require.Equal(t, "FAIL", hostCheck(t, page, "storage.health"))
	require.Equal(t, "PASS", hostCheck(t, page, "tools.fio"))

	// RDMA host under the RDMA profile: all pass, no blocking banner.
	_, page = b.get(t, b.viewer, b.url(fmt.Sprintf("/readiness/hosts/%d?profile=%d", b.rdmaHost, b.rdma.spec)))
	require.Equal(t, "PASS", hostCheck(t, page, "network.rdma"))
	require.NotContains(t, page, `id="blocking-failures"`)
	require.Contains(t, page, `<details>`, "passing checks keep their evidence folded")

	// A host never checked.
	_, page = b.get(t, b.viewer, b.url(fmt.Sprintf("/readiness/hosts/%d", b.freshHost)))
	require.Contains(t, page, "No facts yet: check the host first.")
	require.Contains(t, page, "ask an engineer to check it")
	_, page = b.get(t, b.engineer, b.url(fmt.Sprintf("/readiness/hosts/%d", b.freshHost)))
	require.Contains(t, page, "use “Check host”")
}

// This machine's own facts, collected now: the page shows exactly what the
// checks decide, and what this machine lacks comes out UNKNOWN.
func TestReadinessOnThisMachine(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := facts.Collect(ctx, facts.Options{SkipSmartLog: true})
	require.NoError(t, err)
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	host := b.addHost(t, "this-machine", nil, "")
	b.addFacts(t, host, nil, raw)

	_, page := b.get(t, b.viewer, b.url(fmt.Sprintf("/readiness/hosts/%d?profile=%d", host, b.tcp.spec)))
	checks := readiness.Evaluate(f, readiness.OptionsFor(kvTemplate(t)))
	require.NotEmpty(t, checks)
	unknown := 0
	for _, c := range checks {
		require.Equal(t, string(c.Status), hostCheck(t, page, c.ID), "%s: %s", c.ID, c.Summary)
		if c.Status == readiness.UNKNOWN {
			unknown++
			require.NotEmpty(t, c.Fix, "%s: an UNKNOWN says how to make it knowable", c.ID)
		}
	}
	if f.CPUFreq.Absent {
		require.Equal(t, "UNKNOWN", hostCheck(t, page, "host.cpufreq"), "no cpufreq on this machine")
	}
	if len(f.NVMe.Controllers) == 0 && f.NVMe.Multipath.Absent {
		require.Equal(t, "UNKNOWN", hostCheck(t, page, "storage.multipath"), "no nvme_core on this machine")
		require.Greater(t, unknown, 0)
	}
}

// A run on a host whose blocking checks fail asks for confirmation, through
// the form and the API, and the confirmation is recorded with the run.
func TestRunOnFailingHostAsksForConfirmation(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	ctx := context.Background()
	form := url.Values{"profile_version": {fmt.Sprint(b.local.version)}, "host": {fmt.Sprint(b.failingHost)}}

	res, page := b.postPage(t, b.engineer, b.url("/runs"), form)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `id="readiness-warning"`)
	require.Contains(t, page, "Controller health (SMART): ")
	require.Contains(t, page, "reliability degraded")
	require.Contains(t, page, `id="confirm-readiness"`)
	runs, err := b.store.ListRuns(ctx, b.programID, store.RunFilter{})
	require.NoError(t, err)
	require.Empty(t, runs, "nothing runs without confirmation")

	form.Set("confirm_readiness", "1")
	res, _ = b.postPage(t, b.engineer, b.url("/runs"), form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var runID int64
	_, err = fmt.Sscanf(res.Header.Get("Location"), b.url("/runs/%d"), &runID)
	require.NoError(t, err)
	run, err := b.store.GetRun(ctx, b.programID, runID)
	require.NoError(t, err)
	var override struct {
		ConfirmedBy string   `json:"confirmed_by"`
		Failing     []string `json:"failing_checks"`
	}
	require.NoError(t, json.Unmarshal(run.ReadinessOverride, &override))
	require.Equal(t, "eng@vendor.example", override.ConfirmedBy)
	require.Len(t, override.Failing, 1)
	require.True(t, strings.HasPrefix(override.Failing[0], "Controller health (SMART): "), override.Failing[0])
	_, page = b.get(t, b.viewer, b.url(fmt.Sprintf("/runs/%d", runID)))
	require.Regexp(t, `id="readiness-override"><span class="badge WARN">confirmed</span> run by eng@vendor.example despite failing blocking checks: Controller health \(SMART\)`, page)
	require.Contains(t, page, fmt.Sprintf(`id="host-readiness" class="small" href="%s"`, b.url(fmt.Sprintf("/readiness/hosts/%d?profile=%d", b.failingHost, b.local.spec))))
	audit, err := b.store.ListAudit(ctx, store.AuditFilter{ProgramID: &b.programID})
	require.NoError(t, err)
	require.Equal(t, "run_submitted", audit[0].Action)
	require.Contains(t, audit[0].Details, "readiness_override")

	// The API: 422 naming the checks, then confirmed.
	body := map[string]any{"profile_version_id": b.local.version, "host_id": b.failingHost}
	raw, _ := json.Marshal(body)
	status, out := b.api(t, http.MethodPost, fmt.Sprintf("/api/v1/programs/%d/runs", b.programID), "application/json", raw)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	fields, _ := out["fields"].(map[string]any)
	require.Contains(t, fields["confirm_readiness"], "Controller health (SMART)")
	body["confirm_readiness"] = true
	raw, _ = json.Marshal(body)
	status, out = b.api(t, http.MethodPost, fmt.Sprintf("/api/v1/programs/%d/runs", b.programID), "application/json", raw)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	apiRun, err := b.store.GetRun(ctx, b.programID, int64(out["id"].(float64)))
	require.NoError(t, err)
	require.Contains(t, string(apiRun.ReadinessOverride), "Controller health (SMART)")

	// The profile decides what blocks: the TCP profile on the RDMA host
	// reaches another fabric.
	res, page = b.postPage(t, b.engineer, b.url("/runs"), url.Values{"profile_version": {fmt.Sprint(b.tcp.version)}, "host": {fmt.Sprint(b.rdmaHost)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "NVMe controllers live over the expected transport: Wrong transport")

	// A ready host, and a host never checked, run at once with no override.
	for _, h := range []int64{b.rdmaHost, b.freshHost} {
		res, _ = b.postPage(t, b.engineer, b.url("/runs"), url.Values{"profile_version": {fmt.Sprint(b.rdma.version)}, "host": {fmt.Sprint(h)}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		_, err = fmt.Sscanf(res.Header.Get("Location"), b.url("/runs/%d"), &runID)
		require.NoError(t, err)
		run, err = b.store.GetRun(ctx, b.programID, runID)
		require.NoError(t, err)
		require.Empty(t, run.ReadinessOverride)
		_, page = b.get(t, b.viewer, b.url(fmt.Sprintf("/runs/%d", runID)))
		require.NotContains(t, page, `id="readiness-override"`)
		require.Contains(t, page, `id="host-readiness"`, "the run page links the host's readiness, checked or not")
	}
}

// The facts drift on the host page covers the multipath policy.
func TestFactsDriftShowsMultipathPolicy(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	host := b.addHost(t, "drifting", nil, "")
	before := b.finishedRun(t, b.tcp, host, store.RunDone)
	after := b.finishedRun(t, b.tcp, host, store.RunDone)
	raw := fixtureFacts(t, "tcp-nogpu")
	b.addFacts(t, host, &before, raw)
	var f facts.Facts
	require.NoError(t, json.Unmarshal(raw, &f))
	f.NVMe.Subsystems[0].IOPolicy.Value = "round-robin"
	f.NVMe.Multipath.Value = "N"
	changed, err := json.Marshal(&f)
	require.NoError(t, err)
	b.addFacts(t, host, &after, changed)

	_, page := b.get(t, b.viewer, b.url(fmt.Sprintf("/hosts/%d", host)))
	drift := regexp.MustCompile(`(?s)<div class="panel" id="facts-drift">.*?</table>`).FindString(page)
	require.NotEmpty(t, drift)
	require.Regexp(t, `(?s)nvme\.nvme-subsys0\.iopolicy</td><td class="diff-del small">numa</td><td class="diff-add small">round-robin</td>`, drift)
	require.Regexp(t, `(?s)nvme\.multipath</td><td class="diff-del small">Y</td><td class="diff-add small">N</td>`, drift)
	require.Contains(t, drift, fmt.Sprintf(`href="%s">#%d</a>`, b.url(fmt.Sprintf("/runs/%d", before)), before))
	require.Contains(t, drift, fmt.Sprintf(`href="%s">#%d</a>`, b.url(fmt.Sprintf("/runs/%d", after)), after))
}

// planStep finds a step of the program's plan by kind.
func (b *readinessBundle) planStep(t *testing.T, kind string) store.IntegrationStep {
	t.Helper()
	steps, err := b.store.ListIntegrationSteps(context.Background(), b.programID)
	require.NoError(t, err)
	for _, s := range steps {
		if s.Kind == kind {
			return s
		}
	}
	t.Fatalf("no plan step %s", kind)
	return store.IntegrationStep{}
}

// The plan is seeded on its first view, in the integration sequence.
func TestPlanSeededInOrder(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	ctx := context.Background()
	res, page := b.get(t, b.viewer, b.url("/readiness/plan"))
	require.Equal(t, http.StatusOK, res.StatusCode)
	titles := regexp.MustCompile(`class="step-link">([^<]+)</a>`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, m := range titles {
		got = append(got, m[1])
	}
	require.Equal(t, []string{"Baseline measurements", "Network preparation", "Storage provisioning", "Host setup",
		"GPU-path validation", "Orchestration", "QoS and isolation"}, got)
	_, _ = b.get(t, b.owner, b.url("/readiness/plan"))
	steps, err := b.store.ListIntegrationSteps(ctx, b.programID)
	require.NoError(t, err)
	require.Len(t, steps, len(integrationSequence), "a second view seeds nothing")
	seeded := 0
	audit, err := b.store.ListAudit(ctx, store.AuditFilter{ProgramID: &b.programID})
	require.NoError(t, err)
	for _, e := range audit {
		if e.Action == "plan_seeded" {
			seeded++
		}
	}
	require.Equal(t, 1, seeded)

	// Every seeded check is a real check.
	known := map[string]bool{}
	for _, d := range readiness.Definitions() {
		known[d.ID] = true
	}
	for _, sd := range integrationSequence {
		for _, c := range sd.CheckIDs {
			require.True(t, known[c], "%s: %s", sd.Kind, c)
		}
	}
	// The storage step's checks carry the hosts' results.
	storage := regexp.MustCompile(`(?s)<tr id="step-storage">.*?</tr>`).FindString(page)
	require.Regexp(t, `storage\.health</span>\s*<span class="badge FAIL">FAIL</span>`, storage, "the failing drive, across the program's hosts")
	require.Regexp(t, `storage\.controllers</span>\s*<span class="badge PASS">PASS</span>`, storage)
	require.Regexp(t, `(?s)storage\.controllers.*storage\.multipath.*storage\.ana.*storage\.queues.*storage\.health.*storage\.scheduler`, storage,
		"checks in the order of the readiness page")
}

// The baseline step is done only once a finished local-NVMe run exists;
// sign-offs come one per side and are withdrawn when the step changes.
func TestPlanBaselineAndSignOff(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	ctx := context.Background()
	_, _ = b.get(t, b.viewer, b.url("/readiness/plan"))
	base := b.planStep(t, "baseline")
	stepURL := b.url(fmt.Sprintf("/readiness/plan/steps/%d", base.ID))
	done := url.Values{"status": {store.StepDone}}

	res, _ := b.postPage(t, b.viewer, stepURL, done)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "viewers read")
	res, page := b.postPage(t, b.engineer, stepURL, done)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The baseline step can be done only when a finished baseline run on local NVMe exists")
	// Neither a TCP run nor an unfinished local one counts.
	tcpRun := b.finishedRun(t, b.tcp, b.tcpHost, store.RunDone)
	b.finishedRun(t, b.local, b.failingHost, store.RunFailed)
	res, _ = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepDone}, "run": {fmt.Sprint(tcpRun)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Equal(t, store.StepNotStarted, b.planStep(t, "baseline").Status)

	// A finished local run: done, and the run is attached as evidence.
	localRun := b.finishedRun(t, b.local, b.rdmaHost, store.RunDone)
	owner := b.memberID(t, "own@customer.example")
	res, _ = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepDone}, "owner": {fmt.Sprint(owner)}, "note": {"local NVMe on gpu-rdma-01"},
		"run": {fmt.Sprint(tcpRun)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	step := b.planStep(t, "baseline")
	require.Equal(t, store.StepDone, step.Status)
	require.ElementsMatch(t, []int64{tcpRun, localRun}, step.RunIDs)
	require.Equal(t, owner, *step.OwnerUserID)
	res, page = b.get(t, b.engineer, stepURL)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "(local NVMe) was attached as the baseline")
	require.Contains(t, page, fmt.Sprintf(`href="%s">#%d</a>`, b.url(fmt.Sprintf("/runs/%d", localRun)), localRun))
	require.Contains(t, page, "own (Customer)")

	// Sign-off: one per side.
	signURL := stepURL + "/signoff"
	res, _ = b.postPage(t, b.engineer, signURL, nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, page = b.postPage(t, b.engineer, signURL, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The vendor side signed this step off already")
	res, _ = b.postPage(t, b.viewer, signURL, nil)
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	res, _ = b.postPage(t, b.owner, signURL, nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	step = b.planStep(t, "baseline")
	require.Len(t, step.SignOffs, 2)
	_, page = b.get(t, b.viewer, b.url("/readiness/plan"))
	require.Regexp(t, `(?s)<tr id="step-baseline">.*?signed off by both sides`, page)
	audit, err := b.store.ListAudit(ctx, store.AuditFilter{ProgramID: &b.programID})
	require.NoError(t, err)
	var sides []any
	for _, e := range audit {
		if e.Action == "plan_step_signed_off" {
			require.Equal(t, "plan step baseline", e.Target)
			sides = append(sides, e.Details["side"])
		}
	}
	require.ElementsMatch(t, []any{"vendor", "customer"}, sides)

	// Saving the same step again keeps the sign-offs; reopening it
	// withdraws them.
	res, _ = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepDone}, "owner": {fmt.Sprint(owner)}, "note": {"edited note"},
		"run": {fmt.Sprint(tcpRun), fmt.Sprint(localRun)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, b.planStep(t, "baseline").SignOffs, 2)
	res, _ = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepInProgress}, "run": {fmt.Sprint(localRun)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Empty(t, b.planStep(t, "baseline").SignOffs)
	_, page = b.get(t, b.engineer, stepURL)
	require.Contains(t, page, "its sign-offs were withdrawn")
	res, page = b.postPage(t, b.engineer, signURL, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Only a done step can be signed off")
}

// The step form refuses what is not the program's.
func TestPlanStepFormValidation(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	ctx := context.Background()
	_, _ = b.get(t, b.viewer, b.url("/readiness/plan"))
	net := b.planStep(t, "network")
	stepURL := b.url(fmt.Sprintf("/readiness/plan/steps/%d", net.ID))

	res, page := b.postPage(t, b.engineer, stepURL, url.Values{})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Choose a status.")
	stranger := b.createUser(t, "stranger@example.com", nil, false)
	res, page = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepInProgress}, "owner": {fmt.Sprint(stranger)}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Choose a member of the program.")
	res, page = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepInProgress}, "check": {"network.mtu", "network.teleport"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Choose checks from the list.")
	res, page = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepInProgress}, "run": {"999999"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "no longer part of this program")

	// A good save replaces the checks and the page shows them per host.
	res, _ = b.postPage(t, b.engineer, stepURL, url.Values{"status": {store.StepBlocked}, "check": {"network.rdma", "network.mtu"}, "note": {"switch ports wait for PFC"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	step, err := b.store.GetIntegrationStep(ctx, b.programID, net.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"network.mtu", "network.rdma"}, step.CheckIDs)
	require.Equal(t, store.StepBlocked, step.Status)
	_, page = b.get(t, b.viewer, stepURL)
	checks := regexp.MustCompile(`(?s)<table id="step-checks">.*?</table>`).FindString(page)
	require.Regexp(t, `gpu-rdma-01 <a class="badge PASS"`, checks)
	require.Regexp(t, `tcp-lab-07 <a class="badge WARN"`, checks)
	require.Regexp(t, `new-node-09 <span class="badge UNKNOWN">no facts</span>`, checks)
	require.NotContains(t, page, `id="step-form"`, "viewers see no form")
	require.Contains(t, page, `<span class="badge failed">blocked</span>`)
	require.True(t, bytes.Contains([]byte(page), []byte("switch ports wait for PFC")))
}

func (b *readinessBundle) memberID(t *testing.T, email string) int64 {
	t.Helper()
	members, err := b.store.ListMembers(context.Background(), b.programID)
	require.NoError(t, err)
	for _, m := range members {
		if m.Email == email {
			return m.UserID
		}
	}
	t.Fatalf("no member %s", email)
	return 0
}

// TestPlanStepsMigratedToVendorNeutral: a plan seeded before migration
// 0065 (the NVIDIA-only GPU-path step, a host step without the PCIe
// links) reads as a new one after it; a host step whose checks an
// engineer changed keeps them.
func TestPlanStepsMigratedToVendorNeutral(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	old := []store.IntegrationSeed{
		{Kind: "host", Title: "Host setup", Description: "Kernel, NVMe initiator modules, CPU frequency governor, NUMA placement of NIC, NVMe and GPU, and the tools the runs need.",
			CheckIDs: []string{"host.kernel", "host.initiator-modules", "host.cpufreq", "host.numa-locality", "tools.fio", "tools.nvme-cli"}},
		{Kind: "gpu-path", Title: "GPU-path validation", Description: "NVIDIA driver and GPUDirect Storage, so that reads reach GPU memory the way production will.",
			CheckIDs: []string{"gpu.driver", "gpu.gds"}},
	}
	_, err := pb.store.EnsureIntegrationSteps(ctx, pb.programID, old)
	require.NoError(t, err)
	vendor, err := pb.store.CreateOrganization(ctx, "V2", "vendor")
	require.NoError(t, err)
	customer, err := pb.store.CreateOrganization(ctx, "C2", "customer")
	require.NoError(t, err)
	edited, err := pb.store.CreateProgram(ctx, "Edited", "", vendor, customer, nil)
	require.NoError(t, err)
	customised := append([]store.IntegrationSeed(nil), old...)
	customised[0].CheckIDs = []string{"host.kernel"}
	_, err = pb.store.EnsureIntegrationSteps(ctx, edited, customised)
	require.NoError(t, err)

	sql, err := fs.ReadFile(migrations.FS, "0065_vendor_neutral_plan_steps.sql")
	require.NoError(t, err)
	_, err = pb.pool.Exec(ctx, string(sql))
	require.NoError(t, err)

	steps, err := pb.store.ListIntegrationSteps(ctx, pb.programID)
	require.NoError(t, err)
	byKind := map[string]store.IntegrationStep{}
	for _, st := range steps {
		byKind[st.Kind] = st
	}
	require.Equal(t, gpuPathStepDescription, byKind["gpu-path"].Description)
	require.Equal(t, hostStepDescription, byKind["host"].Description)
	require.Contains(t, byKind["host"].CheckIDs, "host.pcie-links")
	require.Len(t, byKind["host"].CheckIDs, 7)

	steps, err = pb.store.ListIntegrationSteps(ctx, edited)
	require.NoError(t, err)
	for _, st := range steps {
		if st.Kind == "host" {
			require.Equal(t, []string{"host.kernel"}, st.CheckIDs, "an engineer's choice stands")
		}
	}
	// A plan seeded now is what the migration makes of an old one.
	for _, sd := range integrationSequence {
		switch sd.Kind {
		case "host":
			require.Equal(t, hostStepDescription, sd.Description)
			require.Contains(t, sd.CheckIDs, "host.pcie-links")
		case "gpu-path":
			require.Equal(t, gpuPathStepDescription, sd.Description)
			require.NotContains(t, sd.Description, "NVIDIA driver")
		}
	}
}

// addEmulatedHost registers a pinned emulated host, as the demo lab's,
// with a fixture's facts.
func (b *readinessBundle) addEmulatedHost(t *testing.T, name, fixture string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := b.store.CreateHost(ctx, b.programID, store.NewHost{Name: name, Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key",
		Labels: map[string]string{"gpu": "none (emulated)", "transport": "emulated"}, Emulated: true})
	require.NoError(t, err)
	require.NoError(t, b.store.PinHostKeys(ctx, b.programID, id, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly", "SHA256:fake", nil))
	b.addFacts(t, id, nil, fixtureFacts(t, fixture))
	return id
}

// byAttr finds the element whose attribute has the value.
func byAttr(t *testing.T, doc *html.Node, key, value string) *html.Node {
	t.Helper()
	found := htmltest.All(doc, func(n *html.Node) bool { return htmltest.Attr(n, key) == value })
	require.Len(t, found, 1, "one element with %s=%q", key, value)
	return found[0]
}

// An emulated storage path is judged as emulated, as the demo's baseline
// profile on the demo lab's host: a local-NVMe profile that ran there is
// a go, its storage checks n/a (the facts' failing drive is not on the
// path), the host's own checks judged as anywhere; the go / no-go
// summary heads the page; a run there needs no confirmation.
func TestReadinessEmulatedPath(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	emu := b.addEmulatedHost(t, "demo-lab", "failing-ssd")
	b.finishedRun(t, b.local, emu, store.RunDone)

	_, page := b.get(t, b.viewer, b.url("/readiness"))
	doc := htmltest.Parse(t, page)
	cell := func(host int64, check string) *html.Node {
		return byAttr(t, doc, "data-cell", fmt.Sprintf("%d/%s", host, check))
	}
	for _, id := range []string{"storage.controllers", "storage.health", "storage.queues", "storage.scheduler", "host.initiator-modules", "tools.nvme-cli"} {
		c := cell(emu, id)
		require.Equal(t, "n/a emulated", htmltest.Text(c), id)
		a := htmltest.All(c, func(n *html.Node) bool { return n.Data == "a" })
		require.Len(t, a, 1, "%s: the cell opens the check", id)
		require.Equal(t, "badge NA", htmltest.Attr(a[0], "class"), id)
		require.Contains(t, htmltest.Attr(a[0], "title"), "the storage path is emulated", id)
	}
	require.Equal(t, "PASS", htmltest.Text(cell(emu, "tools.fio")), "the host's own checks are judged")
	require.Equal(t, "FAIL", htmltest.Text(cell(b.failingHost, "storage.health")), "the same facts on a real path fail")
	row := htmltest.ByID(doc, fmt.Sprintf("host-%d", emu))
	require.Contains(t, htmltest.Text(row), "7 n/a")
	require.NotContains(t, htmltest.Text(row), "FAIL")

	// The summary at the top: go or no-go for every profile and host.
	summary := htmltest.ByID(doc, "go-no-go")
	require.NotNil(t, summary)
	require.Less(t, strings.Index(page, `id="go-no-go"`), strings.Index(page, `id="readiness-matrix"`), "the summary comes first")
	fit := htmltest.Text(byAttr(t, summary, "data-fit", fmt.Sprintf("%d/%d", b.local.spec, emu)))
	require.Equal(t, "GO emulated path: its storage checks n/a", fit)
	require.True(t, strings.HasPrefix(htmltest.Text(byAttr(t, summary, "data-fit", fmt.Sprintf("%d/%d", b.local.spec, b.failingHost))), "NO-GO Controller health (SMART)"))
	require.Equal(t, "check the host first", strings.TrimPrefix(htmltest.Text(byAttr(t, summary, "data-fit", fmt.Sprintf("%d/%d", b.local.spec, b.freshHost))), "no facts "))
	// KV on local NVMe: a go on the RDMA host and the emulated one, of 5.
	require.Equal(t, "GO on 2 of 5 hosts", htmltest.Text(byAttr(t, summary, "data-overall", fmt.Sprint(b.local.spec))))
	require.Equal(t, []string{"Profile", "Overall", "demo-lab", "gpu-rdma-01", "kv-local-03", "new-node-09", "tcp-lab-07"}, htmltest.Rows(summary)[0])

	// The host's page under the profile: n/a with why, no blocking banner.
	_, page = b.get(t, b.viewer, b.url(fmt.Sprintf("/readiness/hosts/%d?profile=%d", emu, b.local.spec)))
	doc = htmltest.Parse(t, page)
	health := htmltest.ByID(doc, "check-storage.health")
	require.Contains(t, htmltest.Text(health), "n/a · emulated")
	require.Contains(t, htmltest.Text(health), readiness.EmulatedSummary)
	require.NotContains(t, htmltest.Text(health), "How to fix")
	require.Nil(t, htmltest.ByID(doc, "blocking-failures"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "expectation")), "the storage path is emulated")
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "check-counts")), "7 n/a · emulated")

	// A run there starts without asking for confirmation.
	res, _ := b.postPage(t, b.engineer, b.url("/runs"), url.Values{"profile_version": {fmt.Sprint(b.local.version)}, "host": {fmt.Sprint(emu)}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
}
