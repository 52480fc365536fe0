package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// Tests of where a program stands (service/standing) as its overview,
// Home, the rollout board and the approval's confirmation show it
// (issue 21): what waits for whom, in words, with links that open where
// it is done.

// standingBundle is a rollout bundle with an engineer on each side.
type standingBundle struct {
	*rolloutBundle
	vendorEngID, custEngID int64
	vendorEng, custEng     *http.Client
}

func setupStanding(t *testing.T) *standingBundle {
	t.Helper()
	rb := setupRollout(t)
	sb := &standingBundle{rolloutBundle: rb}
	ctx := context.Background()
	p, err := rb.store.ProgramByID(ctx, rb.programID)
	require.NoError(t, err)
	add := func(email string, org int64) (int64, *http.Client) {
		id := rb.createUser(t, email, &org, false)
		_, err := rb.store.SetMember(ctx, rb.programID, id, store.RoleEngineer)
		require.NoError(t, err)
		return id, rb.signIn(t, email)
	}
	sb.vendorEngID, sb.vendorEng = add("ve@vendor.example", p.VendorOrgID)
	sb.custEngID, sb.custEng = add("ce@customer.example", p.CustomerOrgID)
	return sb
}

// requestedRun is a judged run the vendor's engineer requested, with a
// (stand-in) signed report: what the other side co-signs.
func (sb *standingBundle) requestedRun(t *testing.T, verdict string) int64 {
	t.Helper()
	ctx := context.Background()
	run := sb.judgedRun(t, verdict)
	_, err := sb.pool.Exec(ctx, `UPDATE runs SET created_by = $2 WHERE id = $1`, run, sb.vendorEngID)
	require.NoError(t, err)
	blob, err := sb.store.Artifacts().Put(ctx, strings.NewReader(fmt.Sprintf("stand-in bundle of run %d", run)))
	require.NoError(t, err)
	_, err = sb.store.AddRunReport(ctx, store.RunReport{RunID: run, BundleSHA256: blob.SHA256, Size: blob.Size, ManifestSHA256: "0", KeyID: "test"})
	require.NoError(t, err)
	return run
}

// waits reads a list of waits (li) of a page: each one's text and link.
func waits(t *testing.T, doc *html.Node, id string) map[string]string {
	t.Helper()
	out := map[string]string{}
	list := htmltest.ByID(doc, id)
	if list == nil {
		return out
	}
	for _, li := range htmltest.All(list, func(n *html.Node) bool { return n.Data == "li" }) {
		a := htmltest.All(li, func(n *html.Node) bool { return n.Data == "a" })
		require.Len(t, a, 1, htmltest.Text(li))
		out[htmltest.Text(a[0])] = htmltest.Attr(a[0], "href")
	}
	return out
}

func (sb *standingBundle) qualifyingLink() string {
	return sb.url(fmt.Sprintf("/runs/new?gate_set_version=%d&profile_version=%d", sb.gateVersion, sb.profileVersion))
}

// The overview says where the program stands: the rollout's current stage
// named for what it waits for, what waits for whom with links, the latest
// verdicts, the hosts' readiness; and a halt when there is one.
func TestOverviewSaysWhereTheProgramStands(t *testing.T) {
	t.Parallel()
	sb := setupStanding(t)
	sb.addStages(t, "lab-acceptance", "pilot-5pct")

	board := sb.url("/rollout#stage-lab-acceptance")
	confirm := sb.url(fmt.Sprintf("/rollout/stages/%d/approve", sb.stageID(t, "lab-acceptance")))
	doc := sb.pageDoc(t, sb.viewer, sb.url(""))
	require.Equal(t, "in-progress", htmltest.Text(htmltest.ByID(doc, "overview-rollout-status")))
	require.Equal(t, "Stage 1 of 2, lab-acceptance", htmltest.Text(htmltest.ByID(doc, "overview-stage")))
	require.Equal(t, "awaiting a qualifying run", htmltest.Text(htmltest.ByID(doc, "overview-stage-state")))
	require.Equal(t, "KV-cache lookup (4 KiB random read, QD 32): no finished run of KV-cache lookup (4 KiB random read, QD 32) judged by MLPerf Inference Llama-2-70B server latency v1 yet",
		htmltest.Text(htmltest.ByID(doc, "overview-evidence")))
	// A viewer is shown where each wait stands; one who acts on it, where
	// it is done (no link that answers 403).
	qualifying := "Stage 1, lab-acceptance, awaits a qualifying run: KV-cache lookup (4 KiB random read, QD 32) judged by MLPerf Inference Llama-2-70B server latency v1 (an engineer of either side)."
	vendorApproval := "Stage 1, lab-acceptance, awaits the vendor approver: an approval once its gates pass, or a waiver with a reason."
	customerApproval := "Stage 1, lab-acceptance, awaits the customer approver: an approval once its gates pass, or a waiver with a reason."
	require.Equal(t, map[string]string{qualifying: board, vendorApproval: board, customerApproval: board}, waits(t, doc, "waits"))
	require.Equal(t, map[string]string{qualifying: board, vendorApproval: confirm, customerApproval: board},
		waits(t, sb.pageDoc(t, sb.vendorApprover, sb.url("")), "waits"))
	require.Equal(t, map[string]string{qualifying: sb.qualifyingLink(), vendorApproval: board, customerApproval: board},
		waits(t, sb.pageDoc(t, sb.custEng, sb.url("")), "waits"))
	require.NotNil(t, htmltest.ByID(doc, "no-verdicts"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "readiness-hosts")), "gpu-node-07: never checked")

	// A failing run: the gates are not met, and it is among the verdicts.
	failed := sb.requestedRun(t, "FAIL")
	doc = sb.pageDoc(t, sb.viewer, sb.url(""))
	require.Equal(t, "gates not met", htmltest.Text(htmltest.ByID(doc, "overview-stage-state")))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "overview-evidence")), fmt.Sprintf("run #%d FAIL", failed))
	require.Contains(t, waits(t, doc, "waits"), fmt.Sprintf("Stage 1, lab-acceptance, awaits a qualifying run: KV-cache lookup (4 KiB random read, QD 32) judged by MLPerf Inference Llama-2-70B server latency v1 (run #%d is FAIL) (an engineer of either side).", failed))
	verdicts := htmltest.ByID(doc, "latest-verdicts")
	require.Len(t, linksTo(verdicts, sb.url(fmt.Sprintf("/runs/%d", failed))), 1)
	require.Contains(t, htmltest.Text(verdicts), "FAIL")

	// A passing run: the approvals are plain, and its report awaits the
	// customer's co-signature (the vendor's engineer requested it).
	passed := sb.requestedRun(t, "PASS")
	doc = sb.pageDoc(t, sb.viewer, sb.url(""))
	require.Equal(t, "awaiting approval", htmltest.Text(htmltest.ByID(doc, "overview-stage-state")))
	require.Equal(t, map[string]string{
		"Stage 1, lab-acceptance, awaits the vendor approver.":                      board,
		"Stage 1, lab-acceptance, awaits the customer approver.":                    board,
		fmt.Sprintf("Run #%d's report awaits the customer's co-signature.", passed): sb.url(fmt.Sprintf("/runs/%d", passed)),
	}, waits(t, doc, "waits"))

	// A halt shows who halted and why, and what resuming waits for.
	code, page := sb.decide(t, sb.viewer, "lab-acceptance", "halt", "p99 TTFT doubled on the canary")
	require.Equal(t, http.StatusSeeOther, code, page)
	doc = sb.pageDoc(t, sb.vendorEng, sb.url(""))
	require.Equal(t, "halted", htmltest.Text(htmltest.ByID(doc, "overview-rollout-status")))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "overview-halt")), "halted by view <view@customer.example> (customer)")
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "overview-halt")), "p99 TTFT doubled on the canary")
	require.Contains(t, waits(t, doc, "waits"), "Stage 1, lab-acceptance, is halted: it awaits the vendor approver's consent to resume.")
}

// Home lists what waits for each member, whatever their role: engineers
// the qualifying run, the other side's co-signature and their own run
// that failed to start; approvers their side's approval; owners what
// they may do; viewers are told nothing waits for them.
func TestHomeWaitingForYouForEveryRole(t *testing.T) {
	t.Parallel()
	sb := setupStanding(t)
	sb.addStages(t, "lab-acceptance", "pilot-5pct")
	home := func(c *http.Client) map[string]string {
		return waits(t, sb.pageDoc(t, c, "/"), "awaiting")
	}
	const program = "Array X for Llama serving"
	qualifying := "Stage 1, lab-acceptance, awaits a qualifying run: KV-cache lookup (4 KiB random read, QD 32) judged by MLPerf Inference Llama-2-70B server latency v1 (an engineer of either side)."
	require.Equal(t, map[string]string{qualifying: sb.qualifyingLink()}, home(sb.vendorEng))
	require.Equal(t, map[string]string{qualifying: sb.qualifyingLink()}, home(sb.custEng))
	approve := sb.url(fmt.Sprintf("/rollout/stages/%d/approve", sb.stageID(t, "lab-acceptance")))
	require.Equal(t, map[string]string{"Stage 1, lab-acceptance, awaits the customer approver: an approval once its gates pass, or a waiver with a reason.": approve}, home(sb.custApprover))
	require.Equal(t, map[string]string{
		qualifying: sb.qualifyingLink(),
		"Stage 1, lab-acceptance, awaits the vendor approver: an approval once its gates pass, or a waiver with a reason.": approve,
	}, home(sb.owner), "the vendor's owner runs and approves")
	doc := sb.pageDoc(t, sb.viewer, "/")
	require.Nil(t, htmltest.ByID(doc, "awaiting"))
	require.Equal(t, "Nothing waits for you now.", htmltest.Text(htmltest.ByID(doc, "nothing-waits")))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "viewer-note")), "You view "+program+": nothing there waits for you.")

	// A passing run of the vendor's engineer: its report awaits a customer
	// engineer's co-signature, who is told to register a key first.
	passed := sb.requestedRun(t, "PASS")
	cosign := fmt.Sprintf("Run #%d's report awaits the customer's co-signature.", passed)
	require.Equal(t, map[string]string{cosign + " Co-signing takes an SSH key you register under SSH keys first.": sb.url(fmt.Sprintf("/runs/%d", passed))}, home(sb.custEng))
	require.Empty(t, home(sb.vendorEng), "the requester's side does not co-sign")
	_, err := sb.store.AddUserSSHKey(context.Background(), store.UserSSHKey{UserID: sb.custEngID, Name: "laptop", PublicKey: "ssh-ed25519 AAAA", Fingerprint: "SHA256:" + t.Name()})
	require.NoError(t, err)
	require.Equal(t, map[string]string{cosign: sb.url(fmt.Sprintf("/runs/%d", passed))}, home(sb.custEng))

	// A run of the customer's engineer that failed to start waits for them.
	failed, err := sb.store.CreateRun(context.Background(), store.NewRun{ProgramID: sb.programID, ProfileVersionID: sb.profileVersion, HostID: sb.hostID, CreatedBy: sb.custEngID})
	require.NoError(t, err)
	require.NoError(t, sb.store.SetRunState(context.Background(), failed, store.RunFailed, "the host's key is not pinned"))
	got := home(sb.custEng)
	require.Equal(t, sb.url(fmt.Sprintf("/runs/%d", failed)), got[fmt.Sprintf("Run #%d, requested by ce, failed to start (the host's key is not pinned): it awaits them to fix it and run it again.", failed)])
	require.NotContains(t, home(sb.vendorEng), fmt.Sprintf("Run #%d, requested by ce, failed to start (the host's key is not pinned): it awaits them to fix it and run it again.", failed))
}

// A stage says which runs count for it (runs of its profile judged by its
// gate set version), and an engineer starts the qualifying run from it:
// the run form opens with the stage's profile and gate set versions.
func TestStageOffersTheQualifyingRun(t *testing.T) {
	t.Parallel()
	sb := setupStanding(t)
	sb.addStages(t, "lab-acceptance", "pilot-5pct")
	button := fmt.Sprintf("qualify-lab-acceptance-%d", sb.profileID)

	doc := sb.pageDoc(t, sb.vendorEng, sb.url("/rollout"))
	require.Equal(t, "awaiting a qualifying run", htmltest.Text(htmltest.ByID(doc, "stage-state-lab-acceptance")))
	q := htmltest.Text(htmltest.ByID(doc, "qualifying-lab-acceptance"))
	require.Contains(t, q, "Runs that count for KV-cache lookup (4 KiB random read, QD 32): runs of it judged by MLPerf Inference Llama-2-70B server latency v1 — none yet.")
	require.Equal(t, sb.qualifyingLink(), htmltest.Attr(htmltest.ByID(doc, button), "href"))
	require.Equal(t, "Start the qualifying run", htmltest.Text(htmltest.ByID(doc, button)))
	for _, c := range []*http.Client{sb.viewer, sb.custApprover} {
		require.Nil(t, htmltest.ByID(sb.pageDoc(t, c, sb.url("/rollout")), button), "only those who may run are offered it")
	}

	// The link opens the run form with both filled in.
	form := sb.pageDoc(t, sb.vendorEng, sb.qualifyingLink())
	require.Equal(t, id(sb.profileVersion), selected(t, form, "profile_version"))
	require.Equal(t, id(sb.gateVersion), selected(t, form, "gate_set_version"))

	// Judged runs count, the newest first; a run of another gate set does not.
	failed := sb.judgedRun(t, "FAIL")
	passed := sb.judgedRun(t, "PASS")
	other, err := sb.store.CreateRun(context.Background(), store.NewRun{ProgramID: sb.programID, ProfileVersionID: sb.profileVersion, HostID: sb.hostID})
	require.NoError(t, err)
	doc = sb.pageDoc(t, sb.vendorEng, sb.url("/rollout"))
	q = htmltest.Text(htmltest.ByID(doc, "qualifying-lab-acceptance"))
	require.Contains(t, q, fmt.Sprintf("(the newest judged one counts): run #%d PASS, run #%d FAIL", passed, failed))
	require.NotContains(t, q, fmt.Sprintf("run #%d ", other))
	require.Equal(t, "awaiting approval", htmltest.Text(htmltest.ByID(doc, "stage-state-lab-acceptance")))
}

// Approving takes a confirmation step that shows the evidence (each run
// opens) and keeps an optional comment in the signed record; the log
// still verifies, and its evidence opens the runs.
func TestApprovalIsConfirmedWithAComment(t *testing.T) {
	t.Parallel()
	sb := setupStanding(t)
	sb.addStages(t, "lab-acceptance", "pilot-5pct")
	run := sb.judgedRun(t, "PASS")
	stage := sb.stageID(t, "lab-acceptance")
	confirm := sb.url(fmt.Sprintf("/rollout/stages/%d/approve", stage))

	// The board's button opens the confirmation; nothing is signed yet.
	board := sb.pageDoc(t, sb.vendorApprover, sb.url("/rollout"))
	require.Equal(t, confirm, htmltest.Attr(htmltest.ByID(board, "approve-lab-acceptance"), "href"))
	doc := sb.pageDoc(t, sb.vendorApprover, confirm)
	require.Equal(t, "Approve stage 1, lab-acceptance", htmltest.Text(htmltest.ByID(doc, "confirm-title")))
	require.Len(t, linksTo(htmltest.ByID(doc, "confirm-evidence"), sb.url(fmt.Sprintf("/runs/%d", run))), 1)
	require.Equal(t, confirm, htmltest.Attr(htmltest.ByID(doc, "confirm-form"), "action"))
	require.NotNil(t, htmltest.ByID(doc, "confirm-approve"))
	ds, err := sb.store.ListDecisions(context.Background(), sb.programID)
	require.NoError(t, err)
	require.Empty(t, ds)

	// A comment past the limit is refused on the page, with what was written.
	long := strings.Repeat("x", 4001)
	res, page := sb.post(t, sb.vendorApprover, confirm, url.Values{"reason": {long}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	doc = htmltest.Parse(t, page)
	require.Equal(t, "approve refused: the reason must be at most 4000 characters", htmltest.Text(htmltest.ByID(doc, "decision-error")))
	require.Equal(t, long, htmltest.RawText(htmltest.ByID(doc, "decision-comment")))

	const comment = "Checked the p99 tail with the customer's SRE; fine for the lab."
	res, page = sb.post(t, sb.vendorApprover, confirm, url.Values{"reason": {comment}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	ds, err = sb.store.ListDecisions(context.Background(), sb.programID)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "approve", ds[0].Record.Kind)
	require.Equal(t, comment, ds[0].Record.Reason, "the comment is in the signed record")

	board = sb.pageDoc(t, sb.viewer, sb.url("/rollout"))
	require.Contains(t, htmltest.Text(htmltest.ByID(board, "approvals-lab-acceptance")), "Comment: "+comment)
	// The vendor side has signed: its confirmation page says so, and offers no form.
	doc = sb.pageDoc(t, sb.vendorApprover, confirm)
	require.Equal(t, "The vendor side has already approved stage lab-acceptance.", htmltest.Text(htmltest.ByID(doc, "confirm-closed")))
	require.Nil(t, htmltest.ByID(doc, "confirm-form"))

	// The decision log verifies, shows the comment, and its evidence opens the run.
	log := sb.pageDoc(t, sb.viewer, sb.url("/decisions"))
	require.Equal(t, "verified", htmltest.Text(htmltest.ByID(log, "chain-verdict")))
	row := htmltest.ByID(log, "decision-1")
	require.Contains(t, htmltest.Text(row), comment)
	require.Len(t, linksTo(row, sb.url(fmt.Sprintf("/runs/%d", run))), 1)
}

// With failing gates the confirmation is a waiver's, whose reason is
// required.
func TestWaiverIsConfirmedWithItsReason(t *testing.T) {
	t.Parallel()
	sb := setupStanding(t)
	sb.addStages(t, "lab-acceptance")
	sb.judgedRun(t, "FAIL")
	confirm := sb.url(fmt.Sprintf("/rollout/stages/%d/approve", sb.stageID(t, "lab-acceptance")))
	waive := sb.url(fmt.Sprintf("/rollout/stages/%d/waive", sb.stageID(t, "lab-acceptance")))

	board := sb.pageDoc(t, sb.custApprover, sb.url("/rollout"))
	require.Equal(t, confirm, htmltest.Attr(htmltest.ByID(board, "waive-lab-acceptance"), "href"))
	doc := sb.pageDoc(t, sb.custApprover, confirm)
	require.Equal(t, "Approve stage 1, lab-acceptance, with a waiver", htmltest.Text(htmltest.ByID(doc, "confirm-title")))
	require.Equal(t, waive, htmltest.Attr(htmltest.ByID(doc, "confirm-form"), "action"))
	require.NotNil(t, htmltest.ByID(doc, "confirm-waive"))

	res, page := sb.post(t, sb.custApprover, waive, url.Values{"reason": {"  "}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Equal(t, "waive refused: a waive needs a written reason", htmltest.Text(htmltest.ByID(htmltest.Parse(t, page), "decision-error")))
	res, page = sb.post(t, sb.custApprover, waive, url.Values{"reason": {"the lab's p99 is the known warm-up outlier"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	require.Contains(t, htmltest.Text(htmltest.ByID(sb.pageDoc(t, sb.viewer, sb.url("/rollout")), "approvals-lab-acceptance")),
		"Waiver reason: the lab's p99 is the known warm-up outlier")
}
