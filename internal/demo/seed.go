package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/service/runplan"
	"github.com/accordlab/accord/service/runsubmit"
	"github.com/accordlab/accord/store"
)

// The demo installation seeded in dev mode. Seeding is idempotent: what
// exists already is kept.
const (
	Password        = "accord-demo-2026"
	demoProgramName = "KV-cache tier acceptance (demo)"
	demoVendorOrg   = "Lumenfold Storage Ltd. (demo)" // a made-up name
	demoCustomerOrg = "Inference Customer Ltd. (demo)"
	demoHostName    = "demo-lab"
	// The demo's two runs: the baseline on the local-NVMe path, and the
	// candidate on the NVMe-oF path compared with it.
	BaselineLabel  = "baseline: local NVMe path"
	CandidateLabel = "candidate: NVMe-oF path"
)

type demoUser struct {
	Email, Name, Org string
	Role             store.Role
	Admin            bool
}

var demoUsers = []demoUser{
	{Email: "admin@accord.demo", Name: "Site Admin", Admin: true},
	{Email: "vendor.engineer@accord.demo", Name: "Vera Vendor-Engineer", Org: demoVendorOrg, Role: store.RoleEngineer},
	{Email: "vendor.approver@accord.demo", Name: "Victor Vendor-Approver", Org: demoVendorOrg, Role: store.RoleApprover},
	{Email: "customer.engineer@accord.demo", Name: "Clara Customer-Engineer", Org: demoCustomerOrg, Role: store.RoleEngineer},
	{Email: "customer.approver@accord.demo", Name: "Carl Customer-Approver", Org: demoCustomerOrg, Role: store.RoleApprover},
	{Email: "customer.owner@accord.demo", Name: "Olivia Customer-Owner", Org: demoCustomerOrg, Role: store.RoleOwner},
}

// demoProfiles are the demo lab's own profiles, pointing at its emulators.
func demoProfiles(lab *Lab) []acceptance.ProfileSpec {
	duration := lab.stepDuration
	if duration == 0 {
		duration = DefaultStepDuration
	}
	ttft := func(name, url string, transport acceptance.Transport, what string) acceptance.ProfileSpec {
		return acceptance.ProfileSpec{
			Name:        name,
			Description: "Online inference against the demo emulator, whose KV blocks come from " + what + ". Labelled emulated: no GPU is involved.",
			Purpose:     acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: transport, ArrayModel: "emulated"},
			Repetitions: 3, Warmup: acceptance.Duration(DemoWarmup),
			Steps: []acceptance.StepSpec{{Name: "ttft", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
				Endpoint: url, Model: "emulated", API: "chat",
				PromptTokens: acceptance.TokenDist{Dist: "uniform", Mean: 768, Min: 512, Max: 1024}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 32},
				Prefix: &acceptance.PrefixReuse{Tokens: 256, Distinct: 8},
				Load:   acceptance.Load{Mode: "concurrency", Concurrency: 8}, Duration: acceptance.Duration(duration),
				SLO: acceptance.SLO{TTFTMs: 2000, TPOTMs: 200}, MetricsURL: strings.TrimSuffix(url, "/v1") + "/metrics", Seed: 7,
			}}},
		}.Normalized()
	}
	return []acceptance.ProfileSpec{
		ttft("Demo TTFT · local NVMe path", lab.slowURL, acceptance.TransportLocalNVMe, "a file on disk read at 75 MB/s (the local-NVMe baseline)"),
		ttft("Demo TTFT · NVMe-oF path", lab.fastURL, acceptance.TransportEmulated, "memory (standing for a fast NVMe-oF array)"),
		acceptance.ProfileSpec{
			Name: "Demo KV-cache lookup I/O", Description: "4 KiB random reads of a file in the demo lab with fio.",
			Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
			Repetitions: 3,
			Steps: []acceptance.StepSpec{{Name: "kv-lookup", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{
				RW: "randread", BlockSize: 4 << 10, IODepth: 16, NumJobs: 1, Size: 64 << 20, Runtime: acceptance.Duration(5 * time.Second),
				IOEngine: "psync", Target: lab.fioTarget,
			}}},
		}.Normalized(),
	}
}

// Seed makes the demo installation and, the first time, submits a
// baseline run so that the first page has something to show; once that
// run is judged, a candidate run follows it (demoCandidate).
func Seed(ctx context.Context, st *store.Store, sealer *runners.Sealer, rc *river.Client[pgx.Tx], lab *Lab, out io.Writer, baseURL string, log *slog.Logger) error {
	hash, err := auth.HashPassword(Password)
	if err != nil {
		return err
	}
	var programID, hostID int64
	var baselineProfile, gateSet int64
	var candidate *demoCandidate
	err = st.InTx(ctx, func(tx *store.Store) error {
		users := map[string]int64{}
		for _, u := range demoUsers {
			id, err := ensureDemoUser(ctx, tx, u, hash)
			if err != nil {
				return err
			}
			users[u.Email] = id
		}
		if programID, err = ensureDemoProgram(ctx, tx, users[demoUsers[0].Email]); err != nil {
			return err
		}
		for _, u := range demoUsers {
			if u.Role != "" {
				if _, err := tx.SetMember(ctx, programID, users[u.Email], u.Role); err != nil {
					return err
				}
			}
		}
		if hostID, err = ensureDemoHost(ctx, tx, sealer, lab, programID); err != nil {
			return err
		}
		if baselineProfile, gateSet, err = ensureDemoSpecs(ctx, tx, lab, programID, users[demoUsers[1].Email]); err != nil {
			return err
		}
		if err := ensureDemoPlan(ctx, tx, lab, programID, users["customer.owner@accord.demo"]); err != nil {
			return err
		}
		runs, err := tx.ListRuns(ctx, programID, store.RunFilter{Limit: 500})
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			// The first baseline run, through the way every run goes.
			runID, err := submitDemoRun(ctx, tx, rc, runsubmit.Request{ProgramID: programID, ProfileVersionID: baselineProfile, GateSetVersionID: gateSet,
				HostID: hostID, Label: BaselineLabel, By: demoEngineer(users[demoUsers[1].Email])})
			if err != nil {
				return err
			}
			runs = []store.Run{{ID: runID, Label: BaselineLabel}}
		}
		candidate, err = demoCandidatePlan(ctx, tx, lab, programID, hostID, users[demoUsers[1].Email], runs)
		return err
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if candidate != nil {
		go candidate.follow(ctx, st, rc, log)
	}
	fmt.Fprintf(out, `
  Accord demo is up: %s/programs/%d

  Sign in with any of these (password %s):
`, strings.TrimSuffix(baseURL, "/"), programID, Password)
	for _, a := range SignIn().Accounts {
		fmt.Fprintf(out, "    %-32s %s\n", a.Email, a.Role)
	}
	fmt.Fprintf(out, "\n  Demo lab host: sshd on 127.0.0.1:%d; emulators (emulated storage): %s (local NVMe path), %s (NVMe-oF path)\n", lab.sshPort, lab.slowURL, lab.fastURL)
	if candidate != nil {
		fmt.Fprintf(out, "  The demo runs the local-NVMe baseline, then a candidate on the NVMe-oF path against it (for Compare and the rollout's first stage): a few minutes in all.\n")
	}
	if len(lab.reused) > 0 {
		fmt.Fprintf(out, "  The demo lab outlived the last server and is used again: %s\n", strings.Join(lab.reused, ", "))
	}
	fmt.Fprintf(out, "  It runs on after a crash; a clean stop (Ctrl-C, SIGTERM) stops it. Its logs: %s\n\n", filepath.Join(lab.dir, "logs"))
	return nil
}

// Accounts is what the demo tells who signs in: the password every
// account shares and the accounts (the sign-in page's web.DemoSignIn,
// converted by the caller, so that the demo does not import web).
type Accounts struct {
	Password string
	Accounts []Account
}

// Account is one of the demo's accounts.
type Account struct {
	Email, Name, Role, Org string
}

// SignIn lists the demo's accounts for the sign-in page.
func SignIn() Accounts {
	d := Accounts{Password: Password}
	for _, u := range demoUsers {
		role := string(u.Role)
		if u.Admin {
			role = "site admin"
		}
		d.Accounts = append(d.Accounts, Account{Email: u.Email, Name: u.Name, Role: role, Org: u.Org})
	}
	return d
}

func ensureDemoUser(ctx context.Context, tx *store.Store, u demoUser, hash string) (int64, error) {
	existing, err := tx.UserByEmail(ctx, u.Email)
	if err == nil {
		return existing.ID, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	var orgID *int64
	if u.Org != "" {
		kind := "customer"
		if u.Org == demoVendorOrg {
			kind = "vendor"
		}
		id, err := tx.EnsureOrganization(ctx, u.Org, kind)
		if err != nil {
			return 0, err
		}
		orgID = &id
	}
	return tx.CreateUser(ctx, store.NewUser{Email: u.Email, DisplayName: u.Name, PasswordHash: hash, OrganizationID: orgID, IsAdmin: u.Admin})
}

func ensureDemoProgram(ctx context.Context, tx *store.Store, adminID int64) (int64, error) {
	programs, err := tx.ProgramsFor(ctx, adminID)
	if err != nil {
		return 0, err
	}
	for _, p := range programs {
		if p.Name == demoProgramName {
			return p.ID, nil
		}
	}
	vendor, err := tx.OrganizationByName(ctx, demoVendorOrg)
	if err != nil {
		return 0, err
	}
	customer, err := tx.OrganizationByName(ctx, demoCustomerOrg)
	if err != nil {
		return 0, err
	}
	return tx.CreateProgram(ctx, demoProgramName, "A joint acceptance of a KV-cache storage tier, against a demo lab whose storage is emulated.", vendor.ID, customer.ID, &adminID)
}

// ensureDemoHost registers the demo lab's sshd with its key sealed and its
// host key pinned (the demo made both keys itself); a re-made key replaces
// the old pin.
func ensureDemoHost(ctx context.Context, tx *store.Store, sealer *runners.Sealer, lab *Lab, programID int64) (int64, error) {
	hosts, err := tx.ListHosts(ctx, programID)
	if err != nil {
		return 0, err
	}
	client, err := ssh.ParsePrivateKey(lab.clientKey)
	if err != nil {
		return 0, fmt.Errorf("demo lab client key: %w", err)
	}
	// The line in the demo sshd's authorized_keys, as a real host shows it.
	publicKey := sshrun.AuthorizedKey(client.PublicKey())
	var id int64
	for _, h := range hosts {
		if h.Name == demoHostName {
			id = h.ID
		}
	}
	if id == 0 {
		id, err = tx.CreateHost(ctx, programID, store.NewHost{Name: demoHostName, Address: "127.0.0.1", Port: lab.sshPort, Username: lab.user,
			Labels: map[string]string{"gpu": "none (emulated)", "transport": "emulated"}, AuthMethod: "key", Emulated: true,
			PublicKey: publicKey})
		if err != nil {
			return 0, err
		}
	} else if err := tx.SetHostPublicKey(ctx, id, publicKey); err != nil {
		return 0, err
	}
	sealed, err := sealer.Seal(lab.clientKey, labhost.SealLabel(id))
	if err != nil {
		return 0, err
	}
	if err := tx.SetHostSealedKey(ctx, id, sealed); err != nil {
		return 0, err
	}
	// Tests write only in the demo lab's own fio folder (its data
	// directory), every start again (the lab folder may have moved).
	if err := tx.SetHostWritePlaces(ctx, programID, id, []string{filepath.Dir(lab.fioTarget)}, false); err != nil {
		return 0, err
	}
	return id, tx.PinHostKeys(ctx, programID, id, sshrun.AuthorizedKey(lab.hostKey), sshrun.Fingerprint(lab.hostKey), nil)
}

// ensureDemoSpecs adds the starter templates and the demo lab's profiles
// once; it returns the baseline profile's version and the gate set its
// first run is judged by.
func ensureDemoSpecs(ctx context.Context, tx *store.Store, lab *Lab, programID, authorID int64) (int64, int64, error) {
	existing, err := tx.ListSpecs(ctx, store.KindProfile, programID)
	if err != nil {
		return 0, 0, err
	}
	if len(existing) == 0 {
		for _, p := range demoProfiles(lab) {
			if _, err := saveDemoProfile(ctx, tx, programID, authorID, p); err != nil {
				return 0, 0, err
			}
		}
		for _, t := range acceptance.ProfileTemplates() {
			if _, err := saveDemoProfile(ctx, tx, programID, authorID, t.Spec); err != nil {
				return 0, 0, err
			}
		}
		for _, t := range acceptance.GateSetTemplates() {
			canon, err := acceptance.GateSetCanonicalJSON(t.Spec)
			if err != nil {
				return 0, 0, err
			}
			digest, err := acceptance.GateSetDigest(t.Spec)
			if err != nil {
				return 0, 0, err
			}
			if _, _, err := tx.CreateSpec(ctx, store.KindGateSet, programID, store.NewSpecVersion{Name: t.Spec.Name, Spec: canon, Digest: digest,
				Note: "starter template: " + t.Title, CreatedBy: authorID}); err != nil {
				return 0, 0, err
			}
		}
	}
	profile, err := specVersionByName(ctx, tx, store.KindProfile, programID, demoProfiles(lab)[0].Name)
	if err != nil {
		return 0, 0, err
	}
	gates, err := specVersionByName(ctx, tx, store.KindGateSet, programID, "MLPerf Inference Llama-2-70B server latency")
	return profile, gates, err
}

func saveDemoProfile(ctx context.Context, tx *store.Store, programID, authorID int64, p acceptance.ProfileSpec) (int64, error) {
	if errs := acceptance.ValidateProfile(p); len(errs) > 0 {
		return 0, fmt.Errorf("demo profile %q: %w", p.Name, errs)
	}
	canon, err := acceptance.ProfileCanonicalJSON(p)
	if err != nil {
		return 0, err
	}
	digest, err := acceptance.ProfileDigest(p)
	if err != nil {
		return 0, err
	}
	_, v, err := tx.CreateSpec(ctx, store.KindProfile, programID, store.NewSpecVersion{Name: p.Name, Spec: canon, Digest: digest, CreatedBy: authorID})
	return v.ID, err
}

func specVersionByName(ctx context.Context, tx *store.Store, kind store.SpecKind, programID int64, name string) (int64, error) {
	sp, err := specByName(ctx, tx, kind, programID, name)
	if err != nil {
		return 0, err
	}
	v, err := tx.GetSpecVersion(ctx, kind, programID, sp.ID, 0)
	return v.ID, err
}

func specByName(ctx context.Context, tx *store.Store, kind store.SpecKind, programID int64, name string) (store.Spec, error) {
	specs, err := tx.ListSpecs(ctx, kind, programID)
	if err != nil {
		return store.Spec{}, err
	}
	for _, sp := range specs {
		if sp.Name == name {
			return sp, nil
		}
	}
	return store.Spec{}, fmt.Errorf("demo: no %s named %q", kind, name)
}

// demoStages is the demo's rollout plan: the NVMe-oF path must show its
// uplift in the lab, then keep MLPerf's latency bounds as it widens.
var demoStages = []struct{ name, description, gateSet string }{
	{"lab-acceptance", "The NVMe-oF path beats local NVMe in the lab.", "NVMe-oF uplift over local NVMe"},
	{"pilot-5pct", "5% of inference traffic on the NVMe-oF path.", "MLPerf Inference Llama-2-70B server latency"},
	{"fleet-100pct", "All inference traffic on the NVMe-oF path.", "MLPerf Inference Llama-2-70B server latency"},
}

// ensureDemoPlan gives the demo program its rollout plan once; every stage
// is judged on the NVMe-oF path's TTFT profile.
func ensureDemoPlan(ctx context.Context, tx *store.Store, lab *Lab, programID, ownerID int64) error {
	stages, err := tx.ListRolloutStages(ctx, programID)
	if err != nil || len(stages) > 0 {
		return err
	}
	profileName := demoProfiles(lab)[1].Name
	profile, err := specByName(ctx, tx, store.KindProfile, programID, profileName)
	if err != nil {
		return err
	}
	for _, st := range demoStages {
		gates, err := specVersionByName(ctx, tx, store.KindGateSet, programID, st.gateSet)
		if err != nil {
			return err
		}
		if _, err := tx.AddRolloutStage(ctx, programID, st.name, store.StageGates{Description: st.description, GateSetVersionID: gates,
			Profiles: []store.StageProfile{{ProfileID: profile.ID, ProfileName: profile.Name}}}, ownerID); err != nil {
			return err
		}
	}
	return nil
}

// demoCandidate is the demo's second run: the NVMe-oF path's TTFT profile
// judged by the gate set of the rollout's first stage (the uplift over
// local NVMe) against the baseline run, on the demo host, requested by
// the vendor's engineer. It goes through the lab like every run (SSH, the
// probe, the gate engine), so Compare and the rollout stage show measured
// figures in the first minutes. It starts once the baseline is judged,
// since its comparison and charts read the baseline's measurements.
type demoCandidate struct {
	programID, hostID, baselineRunID   int64
	profileVersionID, gateSetVersionID int64
	requestedBy                        int64
}

// demoCandidatePlan is the candidate to run against the demo's baseline
// (runs newest first), or nil when there is one already, or no baseline.
func demoCandidatePlan(ctx context.Context, tx *store.Store, lab *Lab, programID, hostID, requestedBy int64, runs []store.Run) (*demoCandidate, error) {
	var baseline int64
	for _, r := range runs {
		switch r.Label {
		case CandidateLabel:
			return nil, nil
		case BaselineLabel:
			baseline = r.ID
		}
	}
	if baseline == 0 {
		return nil, nil
	}
	stages, err := tx.ListRolloutStages(ctx, programID)
	if err != nil || len(stages) == 0 {
		return nil, err
	}
	profile, err := specVersionByName(ctx, tx, store.KindProfile, programID, demoProfiles(lab)[1].Name)
	if err != nil {
		return nil, err
	}
	return &demoCandidate{programID: programID, hostID: hostID, baselineRunID: baseline, profileVersionID: profile,
		gateSetVersionID: stages[0].GateSetVersionID, requestedBy: requestedBy}, nil
}

// demoBaselinePoll is how often the candidate looks at the baseline run.
const demoBaselinePoll = 2 * time.Second

// follow waits for the baseline run to be judged, then submits the
// candidate; it gives up when the baseline fails or the server stops (the
// next start plans the candidate again).
func (c *demoCandidate) follow(ctx context.Context, st *store.Store, rc *river.Client[pgx.Tx], log *slog.Logger) {
	tick := time.NewTicker(demoBaselinePoll)
	defer tick.Stop()
	for {
		run, err := st.GetRun(ctx, c.programID, c.baselineRunID)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("demo: reading the baseline run", "run_id", c.baselineRunID, "err", err)
		case run.State == store.RunDone && run.Verdict != "":
			id, err := c.submit(ctx, st, rc)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("demo: the candidate run could not be submitted", "err", err)
				}
				return
			}
			if id != 0 {
				log.Info("demo: the candidate run follows the judged baseline", "run_id", id, "baseline_run_id", c.baselineRunID, "baseline_verdict", run.Verdict)
			}
			return
		case store.RunFinal(run.State):
			log.Info("demo: the baseline run did not finish judged, so no candidate is run against it", "run_id", run.ID, "state", run.State, "reason", run.Reason)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// submit creates the candidate run with what the pre-run check says of it
// (kept with the run, as a run started despite warnings keeps them) and
// enqueues it; 0 when a candidate exists already.
func (c *demoCandidate) submit(ctx context.Context, st *store.Store, rc *river.Client[pgx.Tx]) (int64, error) {
	warnings, err := runplan.Check(ctx, st, runplan.Request{ProgramID: c.programID, ProfileVersionID: c.profileVersionID,
		GateSetVersionID: c.gateSetVersionID, BaselineRunID: c.baselineRunID, HostID: c.hostID})
	if err != nil {
		return 0, err
	}
	var id int64
	err = st.InTx(ctx, func(tx *store.Store) error {
		runs, err := tx.ListRuns(ctx, c.programID, store.RunFilter{Limit: 500})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Label == CandidateLabel {
				return nil
			}
		}
		id, err = submitDemoRun(ctx, tx, rc, runsubmit.Request{ProgramID: c.programID, ProfileVersionID: c.profileVersionID,
			GateSetVersionID: c.gateSetVersionID, BaselineRunID: c.baselineRunID, HostID: c.hostID, Label: CandidateLabel,
			Warnings: warnings, By: demoEngineer(c.requestedBy)})
		return err
	})
	return id, err
}

// demoEngineer is the vendor engineer who starts the demo's runs.
func demoEngineer(userID int64) runsubmit.Actor {
	return runsubmit.Actor{UserID: userID, Email: demoUsers[1].Email}
}

// submitDemoRun starts a demo run the way every run starts
// (runsubmit.Submit); a request the checks refuse is an error, since the
// demo made everything it names. The demo's lab host is its own: no
// readiness check stands in its way.
func submitDemoRun(ctx context.Context, tx *store.Store, rc *river.Client[pgx.Tx], req runsubmit.Request) (int64, error) {
	res, err := runsubmit.Submit(ctx, tx, runsubmit.Env{Queue: jobs.NewQueue(rc)}, req)
	if err != nil {
		return 0, err
	}
	if !res.Started() {
		return 0, fmt.Errorf("run %q refused: %v", req.Label, res.Errors)
	}
	return res.RunID, nil
}
