package handlers

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime/multipart"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// importFormats are the formats a user may name (detection picks one
// otherwise).
var importFormats = []string{string(parse.FormatFio), string(parse.FormatVLLMBench), string(parse.FormatGenAIPerf),
	string(parse.FormatAIPerf), string(parse.FormatAIPerfRecords), string(parse.FormatGdsio), string(parse.FormatGPUPath)}

// maxResultUpload bounds an uploaded result file.
const maxResultUpload = 64 << 20

func (s *Server) showImport(w http.ResponseWriter, r *http.Request) {
	s.renderImport(w, r, http.StatusOK, "", "")
}

func (s *Server) renderImport(w http.ResponseWriter, r *http.Request, status int, which, errText string) {
	pr := programFrom(r.Context())
	var rf web.RunForm
	if err := s.runChoices(r, &rf); err != nil {
		s.serverError(w, r, err)
		return
	}
	f := web.ImportForm{Profiles: rf.Profiles, GateSets: rf.GateSets, Baselines: rf.Baselines, Formats: importFormats, Which: which, Error: errText}
	p := s.page(r, "Import results", "programs", s.runCrumbs(pr, "Import")...)
	s.render(w, r, status, web.ImportPage(p, pr.ProgramAccess, f))
}

// importTarget is where an imported result goes.
type importTarget struct {
	profile  store.SpecVersion
	spec     acceptance.ProfileSpec
	gates    *int64
	baseline *int64
	label    string
}

func (s *Server) importTargetFrom(r *http.Request) (importTarget, string, error) {
	pr := programFrom(r.Context())
	var t importTarget
	id, _ := strconv.ParseInt(r.FormValue("profile_version"), 10, 64)
	pv, err := s.store.GetSpecVersionByID(r.Context(), store.KindProfile, pr.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return t, "Choose the profile version the results come from.", nil
	}
	if err != nil {
		return t, "", err
	}
	t.profile = pv
	if err := json.Unmarshal(pv.Spec, &t.spec); err != nil {
		return t, "", err
	}
	if g, _ := strconv.ParseInt(r.FormValue("gate_set_version"), 10, 64); g != 0 {
		gv, err := s.store.GetSpecVersionByID(r.Context(), store.KindGateSet, pr.ID, g)
		if errors.Is(err, store.ErrNotFound) {
			return t, "Choose a gate set version of this program.", nil
		}
		if err != nil {
			return t, "", err
		}
		t.gates = &gv.ID
	}
	if b, _ := strconv.ParseInt(r.FormValue("baseline"), 10, 64); b != 0 {
		base, err := s.store.GetRun(r.Context(), pr.ID, b)
		if errors.Is(err, store.ErrNotFound) || (err == nil && base.State != store.RunDone) {
			return t, "The baseline must be a finished run of this program.", nil
		}
		if err != nil {
			return t, "", err
		}
		t.baseline = &base.ID
	}
	t.label = strings.TrimSpace(r.FormValue("label"))
	if len(t.label) > 200 {
		return t, "The label may have at most 200 characters.", nil
	}
	return t, "", nil
}

// importResultFile keeps an uploaded tool output as an imported run: the
// file as its artifact, the measurements its importer reads (chosen by
// content unless named), judged when a gate set is chosen. Nothing is kept
// when the file cannot be read.
func (s *Server) importResultFile(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxResultUpload+1<<20)
	cleanup, err := parseUpload(r, 1<<20)
	defer cleanup()
	if err != nil {
		status := uploadRefusal(err)
		msg := fmt.Sprintf("The file is too large (at most %d MiB).", maxResultUpload>>20)
		if status == http.StatusBadRequest {
			msg = notMultipart
		}
		s.renderImport(w, r, status, "result", msg)
		return
	}
	t, problem, err := s.importTargetFrom(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if problem != "" {
		s.renderImport(w, r, http.StatusUnprocessableEntity, "result", problem)
		return
	}
	runID, rep, problem, err := s.importResult(r, t)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if problem != "" {
		s.renderImport(w, r, http.StatusUnprocessableEntity, "result", problem)
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Imported %d measurements from %s: %d fields read, %d ignored (each listed with its reason on the run page).",
		rep.Measurements, rep.Input, len(rep.Read), len(rep.Ignored)))
	redirect(w, r, web.ProgramLink(programFrom(r.Context()).ID, fmt.Sprintf("/runs/%d", runID)))
}

// importResult imports the form's file (a tool output; its format named or
// detected) as a run: the file and the import's report (what it read, what
// it ignored and why) as artifacts, the measurements, judged when a gate
// set is chosen. The file is spooled (in memory when small, else in a
// temporary file) and read streamed by the ingest's importer, as a run's
// outputs are. problem is a message for the user (nothing is kept then);
// err a failure of the server.
func (s *Server) importResult(r *http.Request, t importTarget) (int64, parse.Report, string, error) {
	f, header, err := r.FormFile("file")
	if err != nil {
		return 0, parse.Report{}, "Choose the result file to import.", nil
	}
	defer f.Close()
	format, step := parse.Format(r.FormValue("format")), cmp.Or(strings.TrimSpace(r.FormValue("step")), "imported")
	if format != "" && !slices.Contains(parse.Formats, format) {
		return 0, parse.Report{}, fmt.Sprintf("Unknown format %q: choose one of the list (or none, to have it detected).", format), nil
	}
	name := path.Base(strings.ReplaceAll(header.Filename, "\\", "/"))
	if name == "." || name == "/" || name == "" {
		name = "result.json"
	}
	spool, err := newImportSpool()
	if err != nil {
		return 0, parse.Report{}, "", err
	}
	defer spool.remove() //nolint:errcheck
	artifact := ingest.ImportedDir + fileSafeName(name)
	if artifact == ImportReportArtifact { // the import's own report goes there
		artifact = ingest.ImportedDir + "uploaded-" + fileSafeName(name)
	}
	if err := spool.sink(r.Context(), artifact, header.Size, f); err != nil {
		var tooLarge *importTooLarge
		if errors.As(err, &tooLarge) {
			return 0, parse.Report{}, fmt.Sprintf("The file is too large (at most %d MiB).", maxResultUpload>>20), nil
		}
		return 0, parse.Report{}, "", err
	}
	res, err := ingest.ImportFile(ingest.CollectionFiles(spool.collection()), format, artifact, parse.Options{Step: step, Repetition: 1, Name: name})
	var undetected *parse.DetectError
	var unreadable *fs.PathError
	switch {
	case errors.As(err, &unreadable): // the spool's file, not the upload's content
		return 0, parse.Report{}, "", err
	case errors.As(err, &undetected):
		return 0, parse.Report{}, "The file's format was not recognised: " + undetected.Error() + ". Choose it in the list.", nil
	case err != nil && format == "":
		return 0, parse.Report{}, "The file could not be imported: " + err.Error(), nil
	case err != nil:
		return 0, parse.Report{}, "The file could not be imported as " + string(format) + ": " + err.Error(), nil
	}
	defer ingest.Release(res.Measurements)
	rep := res.Report
	reportJSON, err := rep.JSON()
	if err != nil {
		return 0, rep, "", err
	}
	if err := spool.sink(r.Context(), ImportReportArtifact, int64(len(reportJSON)), bytes.NewReader(reportJSON)); err != nil {
		return 0, rep, "", err
	}
	notes := append([]string{fmt.Sprintf("the import read %d fields of %s and ignored %d, each with its reason (%s)", len(rep.Read), name, len(rep.Ignored), ImportReportArtifact)}, rep.Warnings...)
	runID, err := s.saveImportedRun(r, t, spool.collection(), res.Measurements, notes, fmt.Sprintf("imported from %s (%s)", name, rep.Format), nil)
	return runID, rep, "", err
}

// parseUpload reads the request's multipart form, files past memory bytes
// waiting in temporary files; the caller defers the returned cleanup.
// (net/http removes those files only for the request it made itself, and
// the middleware's request timeout works on a copy, so they would stay.)
func parseUpload(r *http.Request, memory int64) (cleanup func(), err error) {
	if err := r.ParseMultipartForm(memory); err != nil {
		return func() {}, err
	}
	form := r.MultipartForm
	return func() { _ = form.RemoveAll() }, nil
}

// uploadRefusal is the status of an upload whose multipart form could not
// be read: 413 when it was larger than the route takes (the body's limit,
// or fields other than files past what multipart keeps in memory), 400
// when it is not a well-formed multipart form.
func uploadRefusal(err error) int {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || errors.Is(err, multipart.ErrMessageTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// notMultipart says what a malformed upload should have been.
const notMultipart = "The upload is not a well-formed multipart form (multipart/form-data, as the page's form sends it)."

// ImportReportArtifact is where an imported run keeps its import's report.
const ImportReportArtifact = ingest.ImportedDir + parse.ReportFile

// bundleImportReportArtifact is where a run imported from a report bundle
// keeps the reports of its reading of the bundle's files (a JSON list of
// parse.Report). It is named after the run so that it is never one of the
// bundle's own files: a bundle of a run that was itself imported from a
// bundle carries that run's.
func bundleImportReportArtifact(runID string) string {
	return "accord-import/run-" + runID + "-reports.json"
}

// reportNameTaken: the bundle holds a file where the run's import reports
// go (only a bundle made for it can).
type reportNameTaken struct{ name string }

func (e *reportNameTaken) Error() string {
	return "it holds a file named " + e.name + ", where this installation keeps its own reading of the bundle: import it again"
}

// importSignedReport verifies another installation's bundle against the
// key the user pins, then keeps its artifacts as an imported run whose
// measurements are read again from the raw outputs, so that it can be
// compared with a reproduction here.
func (s *Server) importSignedReport(w http.ResponseWriter, r *http.Request) {
	release, ok := s.enterBundleRead(w, r, func(status int, msg string) { s.renderImport(w, r, status, "report", msg) })
	if !ok {
		return
	}
	defer release()
	r.Body = http.MaxBytesReader(w, r.Body, maxBundleUpload)
	cleanup, err := parseUpload(r, 1<<20)
	defer cleanup()
	if err != nil {
		status := uploadRefusal(err)
		msg := fmt.Sprintf("The upload is too large: at most %d MiB, of which the form's fields other than the bundle take at most 11 MiB.", maxBundleUpload>>20)
		if status == http.StatusBadRequest {
			msg = notMultipart
		}
		s.renderImport(w, r, status, "report", msg)
		return
	}
	t, problem, err := s.importTargetFrom(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	pinned, kerr := attest.ParseTrustedKeys([]byte(r.FormValue("key")))
	if problem == "" && kerr != nil {
		problem = "Paste the signer's public key (an allowed_signers line or a PEM key): " + kerr.Error()
	}
	f, _, ferr := r.FormFile("bundle")
	if problem == "" && ferr != nil {
		problem = "Choose the report bundle to import."
	}
	if problem != "" {
		s.renderImport(w, r, http.StatusUnprocessableEntity, "report", problem)
		return
	}
	defer f.Close()
	spool, err := newImportSpool()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	defer func() {
		if err := spool.remove(); err != nil {
			s.log.Warn("import: temporary files not removed", "request_id", requestID(r.Context()), "err", err)
		}
	}()
	imp, err := attest.ImportBundle(r.Context(), f, pinned, spool.sink)
	var tooLarge *importTooLarge
	var limit *attest.LimitError
	switch {
	case errors.As(err, &tooLarge) || errors.As(err, &limit):
		s.renderImport(w, r, http.StatusRequestEntityTooLarge, "report", "The bundle was not imported: "+err.Error())
		return
	case err != nil:
		s.renderImport(w, r, http.StatusUnprocessableEntity, "report", "The bundle was not imported: it did not verify against the key you pinned: "+err.Error())
		return
	}
	coll := spool.collection()
	folder, err := ingest.ReadFolderReports(ingest.CollectionFiles(coll), t.spec, "imported")
	defer ingest.Release(folder.Measurements)
	if err != nil {
		s.renderImport(w, r, http.StatusUnprocessableEntity, "report", "The bundle verified, but its raw outputs could not be read: "+err.Error())
		return
	}
	if t.label == "" {
		t.label = "imported: " + imp.Info.Title
	}
	read, ignored := 0, 0
	for _, rep := range folder.Reports {
		read, ignored = read+len(rep.Read), ignored+len(rep.Ignored)
	}
	// Kept even when empty, so that the page never shows a report that
	// came with the bundle as this import's.
	reports := append([]parse.Report{}, folder.Reports...)
	runID, err := s.saveImportedRun(r, t, coll, folder.Measurements, folder.Warnings, fmt.Sprintf("imported from a report signed by %s (run %s of another installation)", imp.Report.Manifest.KeyID, imp.Info.RunID), reports)
	var taken *reportNameTaken
	if errors.As(err, &taken) {
		s.renderImport(w, r, http.StatusUnprocessableEntity, "report", "The bundle was not imported: "+taken.Error())
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("The report verified against the pinned key and was imported: %d measurements from %d files, %d fields read, %d ignored (each listed with its reason on the run page).",
		len(folder.Measurements), len(folder.Reports), read, ignored))
	redirect(w, r, web.ProgramLink(programFrom(r.Context()).ID, fmt.Sprintf("/runs/%d", runID)))
}

// saveImportedRun keeps an imported run as the ingest keeps a lab run's
// (service/ingest): its files, measurements and chart data (computed
// first, outside the transaction), judged when it has a gate set; the run
// and its audit entry in the same transaction.
func (s *Server) saveImportedRun(r *http.Request, t importTarget, files *sshrun.Collection, ms []acceptance.Measurement, warnings []string, note string, bundleReports []parse.Report) (int64, error) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	res := ingest.Results{Files: files, Measurements: ms, Warnings: warnings}
	var err error
	if len(ms) > 0 {
		if res.Charts, err = ingest.Charts(ctx, s.store, t.spec, t.baseline, res); err != nil {
			return 0, err
		}
	}
	out := ingest.Outcome{State: store.RunDone, Reason: note}
	if t.gates != nil {
		out.State = store.RunEvaluating
	}
	env := rollout.Env{Keyring: s.keyring}
	if s.river != nil {
		env.Queue = jobs.NewQueue(s.river)
	}
	var runID int64
	err = s.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		runID, err = tx.CreateRun(ctx, store.NewRun{ProgramID: pr.ID, Kind: "imported", ProfileVersionID: t.profile.ID, GateSetVersionID: t.gates,
			BaselineRunID: t.baseline, Label: t.label, CreatedBy: v.ID})
		if err != nil {
			return err
		}
		run, err := tx.RunByID(ctx, runID)
		if err != nil {
			return err
		}
		if err := tx.AddRunNote(ctx, runID, "info", note); err != nil {
			return err
		}
		res := res
		if bundleReports != nil {
			name := bundleImportReportArtifact(strconv.FormatInt(runID, 10))
			if res.Files, err = withBundleReports(files, name, bundleReports); err != nil {
				return err
			}
			read, ignored := 0, 0
			for _, rep := range bundleReports {
				read, ignored = read+len(rep.Read), ignored+len(rep.Ignored)
			}
			if err := tx.AddRunNote(ctx, runID, "info", fmt.Sprintf("the import read %d files of the bundle: %d fields read and %d ignored, each with its reason (%s)",
				len(bundleReports), read, ignored, name)); err != nil {
				return err
			}
		}
		if err := ingest.Save(ctx, tx, env, run, res, out); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "run_imported", ProgramID: &pr.ID,
			Target: fmt.Sprintf("run %d", runID), ClientAddr: clientAddr(r), Details: map[string]any{"note": note, "measurements": len(ms)}})
	})
	return runID, err
}

// withBundleReports adds the reports of a bundle import to its files, as
// the run's bundleImportReportArtifact.
func withBundleReports(files *sshrun.Collection, name string, reports []parse.Report) (*sshrun.Collection, error) {
	if _, taken := files.File(name); taken {
		return nil, &reportNameTaken{name: name}
	}
	data, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("import: encode the import reports: %w", err)
	}
	data = append(data, '\n')
	sum := sha256.Sum256(data)
	out := *files
	out.Files = append(slices.Clone(files.Files), sshrun.File{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Data: data})
	slices.SortFunc(out.Files, func(a, b sshrun.File) int { return strings.Compare(a.Name, b.Name) }) // File looks names up by bisection
	out.Bytes += int64(len(data))
	return &out, nil
}

func fileSafeName(name string) string {
	out := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, name)
	if strings.Trim(out, ".") == "" {
		return "result"
	}
	return out
}
