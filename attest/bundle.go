package attest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Bundle layout. Every path is under one top directory, accord-run-RUNID/.
const (
	BundleFormat = "accord-report-bundle/v1"

	FileBundleJSON     = "bundle.json"
	FileVerifyMD       = "VERIFY.md"
	FileReportHTML     = "report.html"
	FileSummary        = "summary.json"
	FileFacts          = "facts.json"
	FileEvaluation     = "evaluation.json"
	FileDecisions      = "decisions.json"
	FileProfile        = "profile.json"
	FileGateSet        = "gate-set.json"
	FileKeysJSON       = "keys/keys.json"
	FileKeysPEM        = "keys/keys.pem"
	FileSignerPEM      = "keys/signer.pem"
	FileAllowedSigners = "keys/allowed_signers"
	FileManifest       = "MANIFEST.sha256"
	FileManifestSig    = "MANIFEST.sha256.sig"

	dirArtifacts    = "artifacts/"
	dirAttestations = "attestations/"
	attestationExt  = ".dsse.json"
	cosigPrefix     = FileManifest + "."
	cosigSigExt     = ".sig"
	cosigSignersExt = ".allowed_signers"
)

// BundleInput is everything a report bundle holds.
type BundleInput struct {
	RunID   string
	Title   string
	Created time.Time
	// ReportHTML is the human report, rendered by the caller.
	ReportHTML []byte
	Summary    json.RawMessage
	// Facts must be the exact bytes whose digest the benchmark statement
	// attests (RunEvidence.HostFacts).
	Facts      json.RawMessage
	Evaluation json.RawMessage
	// Decisions is the program's decision log (DecisionLog.Marshal) as of
	// signing: every bundle carries it, an empty log (a checkpoint at seq 0)
	// when the program has no decisions yet.
	Decisions json.RawMessage
	// LogHeadURL is where the installation publishes the program's signed
	// log head, for VERIFY.md (optional).
	LogHeadURL string
	// Profile and GateSet are the run's profile and gate set documents as
	// canonical JSON, whose SHA-256 the benchmark statement names: each
	// when the run has it (a run without a gate set has only the profile).
	Profile   json.RawMessage
	GateSet   json.RawMessage
	Artifacts []Artifact
	// Attestations are the run's signed statements (SignRun).
	Attestations []Attestation
	// Keys are the installation's published keys; the signer's key is
	// added when missing.
	Keys []PublicKey
}

// Artifact is one run artifact: Data, or Open with Size.
type Artifact struct {
	Name string
	Size int64
	// SHA256, when set, is checked against the bytes written.
	SHA256 string
	Data   []byte
	Open   func(ctx context.Context) (io.ReadCloser, error)
}

// BundleInfo describes bundle.json.
type BundleInfo struct {
	Format       string              `json:"format"`
	RunID        string              `json:"runId"`
	Title        string              `json:"title"`
	Created      time.Time           `json:"created"`
	Signer       string              `json:"signer"`
	Attestations []BundleAttestation `json:"attestations"`
	Artifacts    []ArtifactDigest    `json:"artifacts"`
}

// BundleAttestation binds an attestation file to its statement. The file
// is listed in the manifest as well (a bundle is frozen when signed; the
// other side co-signs the manifest), so sha256sum -c alone refuses a
// swapped or dropped attestation.
type BundleAttestation struct {
	File          string `json:"file"`
	PredicateType string `json:"predicateType"`
	PayloadSHA256 string `json:"payloadSha256"`
}

// WrittenBundle is what WriteBundle reports back.
type WrittenBundle struct {
	Info      BundleInfo
	Manifest  []byte
	Signature []byte
}

// TamperError says which file of a bundle failed verification and why.
type TamperError struct {
	File   string
	Reason string
	Err    error
}

func (e *TamperError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("bundle: %s: %s: %v", e.File, e.Reason, e.Err)
	}
	return fmt.Sprintf("bundle: %s: %s", e.File, e.Reason)
}

func (e *TamperError) Unwrap() error { return e.Err }

func tamper(file, reason string, err error) *TamperError {
	return &TamperError{File: file, Reason: reason, Err: err}
}

// BundleDir is the top directory of a run's bundle.
func BundleDir(runID string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, runID)
	return "accord-run-" + safe
}

// WriteBundle writes a signed report bundle (.tar.gz) to w. Artifacts are
// streamed; the manifest and its signature come last.
func WriteBundle(ctx context.Context, w io.Writer, s *Signer, in BundleInput) (*WrittenBundle, error) {
	if in.RunID == "" {
		return nil, errors.New("attest: bundle: empty run id")
	}
	if len(in.Attestations) == 0 {
		return nil, errors.New("attest: bundle: no attestations")
	}
	created := in.Created.UTC()
	if created.IsZero() {
		created = time.Now().UTC()
	}
	keys := slices.Clone(in.Keys)
	if !slices.ContainsFunc(keys, func(k PublicKey) bool { return k.ID == s.KeyID() }) {
		keys = append(keys, s.PublicKey())
	}
	for _, k := range keys {
		if k.ID == s.KeyID() && k.Status == KeyRevoked {
			return nil, fmt.Errorf("attest: bundle: signing key %s is revoked", k.ID)
		}
	}

	info := BundleInfo{Format: BundleFormat, RunID: in.RunID, Title: in.Title, Created: created, Signer: s.KeyID()}
	seen := map[string]bool{}
	for _, a := range in.Artifacts {
		if err := checkArtifactName(a.Name); err != nil {
			return nil, err
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("attest: bundle: artifact %q twice", a.Name)
		}
		seen[a.Name] = true
	}
	attNames := map[string]bool{}
	for _, a := range in.Attestations {
		if err := checkArtifactName(a.Name); err != nil || strings.Contains(a.Name, "/") {
			return nil, fmt.Errorf("attest: bundle: attestation name %q", a.Name)
		}
		if attNames[a.Name] {
			return nil, fmt.Errorf("attest: bundle: attestation %q twice", a.Name)
		}
		attNames[a.Name] = true
		payload, err := a.Envelope.DecodePayload()
		if err != nil {
			return nil, fmt.Errorf("attest: bundle: attestation %s: %w", a.Name, err)
		}
		st, err := ParseStatement(payload)
		if err != nil {
			return nil, fmt.Errorf("attest: bundle: attestation %s: %w", a.Name, err)
		}
		info.Attestations = append(info.Attestations, BundleAttestation{
			File:          dirAttestations + a.Name + attestationExt,
			PredicateType: st.PredicateType,
			PayloadSHA256: sha256Hex(payload),
		})
	}
	if err := checkAttestationsAgainstFacts(in); err != nil {
		return nil, err
	}
	if len(in.Decisions) == 0 {
		return nil, errors.New("attest: bundle: no decision log (an empty program's log is a checkpoint at seq 0)")
	}
	logSummary, err := summarizeLog(in.Decisions)
	if err != nil {
		return nil, fmt.Errorf("attest: bundle: %w", err)
	}
	if in.GateSet != nil && in.Profile == nil {
		return nil, errors.New("attest: bundle: a gate set document without the profile's")
	}

	bw := newBundleWriter(w, BundleDir(in.RunID), created)
	type file struct {
		name string
		data []byte
	}
	doc := verifyDoc{RunID: in.RunID, Title: in.Title, SignerID: s.KeyID(), Created: created, Attestations: info.Attestations,
		Log: logSummary, LogHeadURL: in.LogHeadURL, Profile: in.Profile != nil, GateSet: in.GateSet != nil}
	small := []file{
		{FileVerifyMD, verifyMarkdown(doc)},
		{FileReportHTML, in.ReportHTML},
		{FileSummary, jsonOrNull(in.Summary)},
		{FileFacts, jsonOrNull(in.Facts)},
		{FileEvaluation, jsonOrNull(in.Evaluation)},
		{FileDecisions, in.Decisions},
	}
	if in.Profile != nil {
		small = append(small, file{FileProfile, in.Profile})
	}
	if in.GateSet != nil {
		small = append(small, file{FileGateSet, in.GateSet})
	}
	for _, f := range small {
		if err := bw.add(f.name, f.data, true); err != nil {
			return nil, err
		}
	}

	artifacts := slices.Clone(in.Artifacts)
	slices.SortFunc(artifacts, func(a, b Artifact) int { return strings.Compare(a.Name, b.Name) })
	for _, a := range artifacts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum, size, err := bw.addArtifact(ctx, a)
		if err != nil {
			return nil, err
		}
		info.Artifacts = append(info.Artifacts, ArtifactDigest{Name: a.Name, SHA256: sum, Size: size})
	}
	if err := checkSubjects(in.Attestations, info.Artifacts); err != nil {
		return nil, err
	}

	keysJSON, err := MarshalKeysJSON(keys)
	if err != nil {
		return nil, err
	}
	keysPEM, err := MarshalPEM(keys)
	if err != nil {
		return nil, err
	}
	signerPEM, err := s.PublicKey().PEM()
	if err != nil {
		return nil, err
	}
	var infoBuf bytes.Buffer
	enc := json.NewEncoder(&infoBuf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(info); err != nil {
		return nil, fmt.Errorf("attest: bundle: %w", err)
	}
	infoJSON := bytes.TrimSuffix(infoBuf.Bytes(), []byte("\n"))
	keyFiles := []file{
		{FileKeysJSON, keysJSON},
		{FileKeysPEM, keysPEM},
		{FileSignerPEM, signerPEM},
		{FileAllowedSigners, MarshalAllowedSigners(keys)},
		{FileBundleJSON, append(infoJSON, '\n')},
	}
	for _, k := range keys { // each key's own PEM, as keys.json names it
		p, err := k.PEM()
		if err != nil {
			return nil, err
		}
		keyFiles = append(keyFiles, file{k.PEMFile(), p})
	}
	for _, f := range keyFiles {
		if err := bw.add(f.name, f.data, true); err != nil {
			return nil, err
		}
	}

	for _, a := range in.Attestations {
		data, err := a.Envelope.Marshal()
		if err != nil {
			return nil, err
		}
		if err := bw.add(dirAttestations+a.Name+attestationExt, data, true); err != nil {
			return nil, err
		}
	}

	manifest := bw.manifest()
	sig, err := s.SignSSH(bytes.NewReader(manifest))
	if err != nil {
		return nil, fmt.Errorf("attest: bundle: sign manifest: %w", err)
	}
	armored := sig.Armor()
	if err := bw.add(FileManifest, manifest, false); err != nil {
		return nil, err
	}
	if err := bw.add(FileManifestSig, armored, false); err != nil {
		return nil, err
	}
	if err := bw.close(); err != nil {
		return nil, err
	}
	return &WrittenBundle{Info: info, Manifest: manifest, Signature: armored}, nil
}

// checkAttestationsAgainstFacts refuses to write a bundle whose benchmark
// statement attests other host facts than facts.json holds.
func checkAttestationsAgainstFacts(in BundleInput) error {
	for _, a := range in.Attestations {
		st, err := statementOf(a.Envelope)
		if err != nil {
			return fmt.Errorf("attest: bundle: attestation %s: %w", a.Name, err)
		}
		if st.PredicateType != BenchmarkPredicateType {
			continue
		}
		var bm benchmarkCheck
		if err := json.Unmarshal(st.Predicate, &bm); err != nil {
			return fmt.Errorf("attest: bundle: attestation %s: %w", a.Name, err)
		}
		if bm.HostFacts != sha256Hex(jsonOrNull(in.Facts)) {
			return fmt.Errorf("attest: bundle: attestation %s attests host facts %s, facts.json is %s",
				a.Name, bm.HostFacts, sha256Hex(jsonOrNull(in.Facts)))
		}
		if bm.RunID != in.RunID {
			return fmt.Errorf("attest: bundle: attestation %s is for run %q, bundle for %q", a.Name, bm.RunID, in.RunID)
		}
		if _, err := bm.checkDocuments(in.Profile, in.GateSet); err != nil {
			return fmt.Errorf("attest: bundle: attestation %s: %w", a.Name, err)
		}
		if in.Profile != nil && in.GateSet == nil && bm.GateSet != (Ref{}) {
			return fmt.Errorf("attest: bundle: attestation %s names gate set %s v%d: its document goes with the profile's", a.Name, bm.GateSet.Name, bm.GateSet.Version)
		}
	}
	return nil
}

// checkSubjects refuses to write a bundle whose statements name artifacts
// it does not hold, or other bytes.
func checkSubjects(atts []Attestation, artifacts []ArtifactDigest) error {
	have := map[string]string{}
	for _, a := range artifacts {
		have[a.Name] = a.SHA256
	}
	for _, a := range atts {
		st, err := statementOf(a.Envelope)
		if err != nil {
			return fmt.Errorf("attest: bundle: attestation %s: %w", a.Name, err)
		}
		for _, sub := range st.Subject {
			got, ok := have[sub.Name]
			if !ok {
				return fmt.Errorf("attest: bundle: attestation %s names artifact %q that the bundle does not hold", a.Name, sub.Name)
			}
			if got != sub.Digest["sha256"] {
				return fmt.Errorf("attest: bundle: attestation %s: artifact %q is %s, attested %s", a.Name, sub.Name, got, sub.Digest["sha256"])
			}
		}
	}
	return nil
}

// benchmarkCheck is the part of the benchmark predicate verification reads.
type benchmarkCheck struct {
	RunID     string `json:"runId"`
	HostFacts string `json:"hostFactsSha256"`
	Profile   Ref    `json:"profile"`
	GateSet   Ref    `json:"gateSet"`
}

// checkDocuments recomputes the profile's and the gate set's digests from
// their documents (nil: not in the bundle) and compares them with the
// statement's; it names the file that differs.
func (bm benchmarkCheck) checkDocuments(profile, gateSet []byte) (string, error) {
	for _, d := range []struct {
		what, file string
		ref        Ref
		doc        []byte
	}{{"profile", FileProfile, bm.Profile, profile}, {"gate set", FileGateSet, bm.GateSet, gateSet}} {
		if d.doc == nil {
			continue
		}
		if got := sha256Hex(d.doc); got != d.ref.SHA256 {
			return d.file, fmt.Errorf("attests %s %s v%d with SHA-256 %s, %s is %s", d.what, d.ref.Name, d.ref.Version, d.ref.SHA256, d.file, got)
		}
	}
	return "", nil
}

func statementOf(env interface {
	DecodePayload() ([]byte, error)
}) (Statement, error) {
	payload, err := env.DecodePayload()
	if err != nil {
		return Statement{}, err
	}
	return ParseStatement(payload)
}

type bundleWriter struct {
	gz      *gzip.Writer
	tw      *tar.Writer
	top     string
	modTime time.Time
	sums    map[string]string
	err     error
}

func newBundleWriter(w io.Writer, top string, modTime time.Time) *bundleWriter {
	// BestSpeed: raw outputs can be large, and the default level costs
	// several times the CPU for a few percent on JSON and CSV.
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	return &bundleWriter{gz: gz, tw: tar.NewWriter(gz), top: top, modTime: modTime, sums: map[string]string{}}
}

func (bw *bundleWriter) header(name string, size int64) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     bw.top + "/" + name,
		Size:     size,
		Mode:     0o644,
		ModTime:  bw.modTime,
		Format:   tar.FormatPAX,
	}
}

// add writes a file; inManifest says whether MANIFEST.sha256 lists it.
func (bw *bundleWriter) add(name string, data []byte, inManifest bool) error {
	if err := bw.tw.WriteHeader(bw.header(name, int64(len(data)))); err != nil {
		return fmt.Errorf("attest: bundle: %s: %w", name, err)
	}
	if _, err := bw.tw.Write(data); err != nil {
		return fmt.Errorf("attest: bundle: %s: %w", name, err)
	}
	if inManifest {
		bw.sums[name] = sha256Hex(data)
	}
	return nil
}

func (bw *bundleWriter) addArtifact(ctx context.Context, a Artifact) (string, int64, error) {
	name := dirArtifacts + a.Name
	var (
		src  io.Reader
		size = a.Size
	)
	if a.Data != nil {
		src = bytes.NewReader(a.Data)
		size = int64(len(a.Data))
	} else {
		if a.Open == nil {
			return "", 0, fmt.Errorf("attest: bundle: artifact %q: neither Data nor Open", a.Name)
		}
		rc, err := a.Open(ctx)
		if err != nil {
			return "", 0, fmt.Errorf("attest: bundle: open artifact %q: %w", a.Name, err)
		}
		defer rc.Close()
		src = rc
	}
	if err := bw.tw.WriteHeader(bw.header(name, size)); err != nil {
		return "", 0, fmt.Errorf("attest: bundle: %s: %w", name, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(bw.tw, h), io.LimitReader(src, size))
	if err != nil {
		return "", 0, fmt.Errorf("attest: bundle: copy artifact %q: %w", a.Name, err)
	}
	if n != size {
		return "", 0, fmt.Errorf("attest: bundle: artifact %q: %d bytes, declared %d", a.Name, n, size)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if a.SHA256 != "" && a.SHA256 != sum {
		return "", 0, fmt.Errorf("attest: bundle: artifact %q: sha256 %s, expected %s", a.Name, sum, a.SHA256)
	}
	bw.sums[name] = sum
	return sum, n, nil
}

// manifest is the sha256sum -c input: "HEX  PATH" lines sorted by path.
func (bw *bundleWriter) manifest() []byte {
	names := make([]string, 0, len(bw.sums))
	for n := range bw.sums {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", bw.sums[n], n)
	}
	return b.Bytes()
}

func (bw *bundleWriter) close() error {
	if err := bw.tw.Close(); err != nil {
		return fmt.Errorf("attest: bundle: %w", err)
	}
	if err := bw.gz.Close(); err != nil {
		return fmt.Errorf("attest: bundle: %w", err)
	}
	return nil
}

// checkArtifactName allows relative, clean, printable paths that sha256sum
// lists without escaping.
func checkArtifactName(name string) error {
	bad := func(why string) error { return fmt.Errorf("attest: artifact name %q: %s", name, why) }
	switch {
	case name == "":
		return bad("empty")
	case len(name) > 1024:
		return bad("longer than 1024 bytes")
	case !utf8.ValidString(name):
		return bad("not UTF-8")
	case strings.ContainsAny(name, "\\\x7f"):
		return bad("contains a backslash or DEL")
	case path.IsAbs(name) || path.Clean(name) != name:
		return bad("not a clean relative path")
	}
	for _, r := range name {
		if r < 0x20 {
			return bad("contains a control character")
		}
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "." {
			return bad("contains . or ..")
		}
	}
	return nil
}

func jsonOrNull(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("null\n")
	}
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
