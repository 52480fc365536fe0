package attest

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/attest/internal/strictjson"
	"github.com/accordlab/accord/attest/sshsig"
)

// Limits of one signature file, and of a decision log verified on its
// own; a bundle's other budgets are Limits.
const (
	maxMetadataFile  = 64 << 20
	maxSignatureFile = 64 << 10
)

// Report says what VerifyBundle checked and with which keys.
type Report struct {
	RunID   string
	Title   string
	Created time.Time
	// SelfTrusted is set when no trusted keys were given and the bundle's
	// own keys/keys.json was used: that proves integrity, not origin.
	SelfTrusted  bool
	Manifest     SignatureCheck
	CoSignatures []SignatureCheck
	// Files lists every file checked against the manifest.
	Files        []FileCheck
	Attestations []AttestationCheck
	// Decisions is set when decisions.json holds a decision log.
	Decisions *ChainReport
	// Warnings are what verified but needs a reader's attention: a key
	// revoked after it signed, what offline checks cannot tell.
	Warnings []string
	// Documents are the profile and gate set documents the bundle holds
	// (profile.json, and gate-set.json when the run had a gate set), each
	// hashing to the digest the benchmark statement names.
	Documents []string
}

// SignatureCheck is one verified SSH signature over MANIFEST.sha256.
type SignatureCheck struct {
	File      string
	KeyID     string
	Algorithm string
	Principal string
	// Trusted says whether the key is among the trusted keys. Co-signatures
	// by keys the verifier does not know are reported, not refused.
	Trusted       bool
	Status        KeyStatus
	RetiredAt     time.Time
	RevokedAt     time.Time
	RevokedReason string
	// SignedAt is when the bundle says it was signed (bundle.json's
	// created; zero for co-signatures, which carry no time).
	SignedAt time.Time
	// Signer is who a co-signature's allowed_signers file says signed (the
	// member and organisation Accord accepted it from); unsigned text.
	Signer string
}

// FileCheck is one file whose digest matched the manifest.
type FileCheck struct {
	Name   string
	SHA256 string
	Size   int64
}

// AttestationCheck is one verified DSSE envelope.
type AttestationCheck struct {
	File          string
	PredicateType string
	KeyIDs        []string
	Subjects      int
}

// ArtifactSink receives each artifact's bytes while a bundle is imported.
// The bytes are not verified yet: if ImportBundle then fails, the caller
// must discard what the sink stored.
type ArtifactSink func(ctx context.Context, name string, size int64, r io.Reader) error

// Imported is a verified external bundle, ready for storage.
type Imported struct {
	Report     *Report
	Info       BundleInfo
	ReportHTML []byte
	Summary    json.RawMessage
	Facts      json.RawMessage
	Evaluation json.RawMessage
	Decisions  json.RawMessage
	Artifacts  []ArtifactDigest
	Statements []Statement
}

// VerifyBundle checks a report bundle offline: the manifest's signature and
// by which key, every file against the manifest (none missing, none extra),
// every attestation's signature and subjects, co-signatures, and the
// decision log if the bundle has one. Any tampering fails with a
// *TamperError naming the file. A signature by a revoked key fails with an
// error wrapping ErrRevokedKey, after the rest has been checked; the report
// is returned with it. With trusted nil, the bundle's own keys are used and
// Report.SelfTrusted is set.
func VerifyBundle(ctx context.Context, r io.Reader, trusted *KeySet) (*Report, error) {
	imp, err := readBundle(ctx, r, trusted, nil, false, DefaultLimits)
	if imp == nil {
		return nil, err
	}
	return imp.Report, err
}

// ImportBundle verifies an external bundle against the keys the user pinned
// (ParseTrustedKeys of an allowed_signers line or a PEM key) and returns its
// contents for storage. Artifacts go to sink as they are read (sink may be
// nil); on error the caller discards them.
func ImportBundle(ctx context.Context, r io.Reader, pinned *KeySet, sink ArtifactSink) (*Imported, error) {
	if pinned.Len() == 0 {
		return nil, errors.New("attest: import: no pinned key")
	}
	imp, err := readBundle(ctx, r, pinned, sink, true, DefaultLimits)
	if err != nil {
		return nil, err
	}
	return imp, nil
}

func (br *bundleReader) verify(trusted *KeySet) (*Imported, error) {
	report := &Report{}
	imp := &Imported{Report: report}
	// A signature by a key outside its validity window is reported after
	// everything else is checked, with the report.
	var keyErr error
	noteKeyErr := func(file string, err error) {
		if keyErr == nil {
			keyErr = fmt.Errorf("bundle: %s: %w", file, err)
		}
	}
	noteRevoked := func(file string, k PublicKey) {
		noteKeyErr(file, fmt.Errorf("key %s was revoked at %s (%s), and a co-signature carries no time: %w", k.ID, stamp(k.RevokedAt), k.RevokedReason, ErrRevokedKey))
	}
	// checkSignedAt applies a trusted key's window to the bundle's time.
	checkSignedAt := func(file string, k PublicKey, at time.Time) {
		if err := k.CheckSignedAt(at); err != nil {
			noteKeyErr(file, err)
			return
		}
		if k.Status == KeyRevoked {
			report.Warnings = append(report.Warnings, fmt.Sprintf("%s: key %s was revoked at %s (%s), after this bundle was signed (%s); "+
				"offline checks cannot tell whether whoever held the key dated it back: ask the installation whether it made this bundle",
				file, k.ID, stamp(k.RevokedAt), k.RevokedReason, stamp(at)))
		}
	}

	// The manifest and its signature.
	manifest, ok, err := br.file(FileManifest)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, tamper(FileManifest, "missing", nil)
	}
	br.manifest = manifest
	listed, err := parseManifest(br.manifest)
	if err != nil {
		return nil, tamper(FileManifest, "malformed", err)
	}
	if trusted == nil {
		keysJSON, ok, err := br.file(FileKeysJSON)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, tamper(FileKeysJSON, "missing (needed when no trusted keys are given)", nil)
		}
		if trusted, err = ParseKeysJSON(keysJSON); err != nil {
			return nil, tamper(FileKeysJSON, "unreadable", err)
		}
		report.SelfTrusted = true
	}
	sigText, ok, err := br.file(FileManifestSig)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, tamper(FileManifestSig, "missing", nil)
	}
	sig, err := sshsig.Unarmor(sigText)
	if err != nil {
		return nil, tamper(FileManifestSig, "unreadable signature", err)
	}
	if err := sshsig.Verify(sig, bytes.NewReader(br.manifest), Namespace); err != nil {
		return nil, tamper(FileManifest, "its signature "+FileManifestSig+" does not verify: the manifest or the signature was changed", err)
	}
	signerID := KeyID(sig.PublicKey)
	signer, known := trusted.Lookup(signerID)
	if !known {
		reason := fmt.Sprintf("signed by key %s, which is not a trusted key", signerID)
		keysJSON, err := br.kept(FileKeysJSON)
		if err != nil {
			return nil, err
		}
		if bundleKeys, err := ParseKeysJSON(keysJSON); err == nil {
			if _, ok := bundleKeys.Lookup(signerID); ok {
				reason += " (the key comes from the bundle's own " + FileKeysJSON + " and " + FileAllowedSigners + ": were they replaced?)"
			}
		}
		return nil, tamper(FileManifestSig, reason, nil)
	}
	report.Manifest = signatureCheck(FileManifestSig, signer, true)

	// Every file against the manifest, in name order.
	names := make([]string, 0, len(listed)+len(br.files))
	for n := range listed {
		names = append(names, n)
	}
	for n := range br.files {
		if _, ok := listed[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		want, isListed := listed[n]
		if att, isAtt := br.atts[n]; isAtt && isListed {
			// Bundles list their attestations too, so that sha256sum -c
			// alone catches a swapped or dropped statement (older bundles
			// bind them only through bundle.json, checked below).
			if att.sha256 != want {
				return nil, tamper(n, fmt.Sprintf("SHA-256 %s, the manifest says %s (changed file)", att.sha256, want), nil)
			}
			report.Files = append(report.Files, FileCheck{Name: n, SHA256: want, Size: att.size})
			continue
		}
		got, isPresent := br.files[n]
		switch {
		case !isPresent && br.seen[n]:
			return nil, tamper(n, "listed in "+FileManifest+" but it is a signature or attestation file", nil)
		case !isPresent:
			return nil, tamper(n, "missing (listed in "+FileManifest+")", nil)
		case !isListed:
			return nil, tamper(n, "not listed in "+FileManifest+" (added file)", nil)
		case got.sha256 != want:
			return nil, tamper(n, fmt.Sprintf("SHA-256 %s, the manifest says %s (changed file)", got.sha256, want), nil)
		}
		report.Files = append(report.Files, FileCheck{Name: n, SHA256: got.sha256, Size: got.size})
	}

	// bundle.json and the keys the bundle carries.
	infoJSON, ok, err := br.file(FileBundleJSON)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, tamper(FileBundleJSON, "missing", nil)
	}
	var info BundleInfo
	if err := strictjson.Decode(infoJSON, &info); err != nil {
		return nil, tamper(FileBundleJSON, "unreadable", err)
	}
	if info.Format != BundleFormat {
		return nil, tamper(FileBundleJSON, fmt.Sprintf("format %q, want %q", info.Format, BundleFormat), nil)
	}
	if info.Signer != signerID {
		return nil, tamper(FileBundleJSON, fmt.Sprintf("names signer %s, the manifest is signed by %s", info.Signer, signerID), nil)
	}
	pemText, ok, err := br.file(FileSignerPEM)
	if err != nil {
		return nil, err
	}
	if ok {
		keys, err := parsePEMPublicKeys(pemText)
		if err != nil || len(keys) != 1 || keys[0].ID != signerID {
			return nil, tamper(FileSignerPEM, "is not the key that signed the manifest", err)
		}
	}
	report.RunID, report.Title, report.Created = info.RunID, info.Title, info.Created
	report.Manifest.SignedAt = info.Created
	checkSignedAt(FileManifestSig, signer, info.Created)
	imp.Info = info
	for _, a := range info.Artifacts {
		f, ok := br.files[dirArtifacts+a.Name]
		if !ok || f.sha256 != a.SHA256 {
			return nil, tamper(FileBundleJSON, fmt.Sprintf("lists artifact %q that the bundle does not hold as listed", a.Name), nil)
		}
	}

	// Attestations: exactly those bundle.json lists, each signed by a
	// trusted key, each subject one of the bundle's artifacts.
	lookup := func(id string) (crypto.PublicKey, bool) {
		k, ok := trusted.Lookup(id)
		return k.Key, ok
	}
	listedAtts := map[string]BundleAttestation{}
	for _, a := range info.Attestations {
		listedAtts[a.File] = a
	}
	var attNames []string
	for n := range listedAtts {
		attNames = append(attNames, n)
	}
	for n := range br.atts {
		if _, ok := listedAtts[n]; !ok {
			attNames = append(attNames, n)
		}
	}
	slices.Sort(attNames)
	for _, n := range attNames {
		_, present := br.atts[n]
		listedAtt, isListed := listedAtts[n]
		switch {
		case !isListed:
			return nil, tamper(n, "not listed in "+FileBundleJSON+" (added file)", nil)
		case !present:
			return nil, tamper(n, "missing (listed in "+FileBundleJSON+")", nil)
		}
		// One attestation in memory at a time: read back, checked, dropped.
		data, _, err := br.file(n)
		if err != nil {
			return nil, err
		}
		env, err := dsse.Parse(data)
		if err != nil {
			return nil, tamper(n, "unreadable envelope", err)
		}
		ids, payload, err := env.Verify(lookup)
		if err != nil {
			return nil, tamper(n, "signature does not verify", err)
		}
		for _, id := range ids {
			if k, _ := trusted.Lookup(id); k.ID != signerID {
				checkSignedAt(n, k, info.Created)
			}
		}
		if env.PayloadType != PayloadTypeInToto {
			return nil, tamper(n, fmt.Sprintf("payload type %q, want %q", env.PayloadType, PayloadTypeInToto), nil)
		}
		if got := sha256Hex(payload); got != listedAtt.PayloadSHA256 {
			return nil, tamper(n, fmt.Sprintf("statement SHA-256 %s, %s says %s (replaced statement)", got, FileBundleJSON, listedAtt.PayloadSHA256), nil)
		}
		st, err := ParseStatement(payload)
		if err != nil {
			return nil, tamper(n, "unreadable statement", err)
		}
		for _, sub := range st.Subject {
			f, ok := br.files[dirArtifacts+sub.Name]
			if !ok {
				return nil, tamper(n, fmt.Sprintf("subject %q is not in the bundle", dirArtifacts+sub.Name), nil)
			}
			if f.sha256 != sub.Digest["sha256"] {
				return nil, tamper(n, fmt.Sprintf("subject %q: attested SHA-256 %s, the file is %s", dirArtifacts+sub.Name, sub.Digest["sha256"], f.sha256), nil)
			}
		}
		if st.PredicateType == BenchmarkPredicateType {
			var bm benchmarkCheck
			if err := json.Unmarshal(st.Predicate, &bm); err != nil {
				return nil, tamper(n, "unreadable benchmark predicate", err)
			}
			if f := br.files[FileFacts]; bm.HostFacts != f.sha256 {
				return nil, tamper(n, fmt.Sprintf("attests host facts %s, %s is %s", bm.HostFacts, FileFacts, f.sha256), nil)
			}
			if bm.RunID != info.RunID {
				return nil, tamper(n, fmt.Sprintf("is about run %q, the bundle about run %q", bm.RunID, info.RunID), nil)
			}
			profile, hasProfile, err := br.file(FileProfile)
			if err != nil {
				return nil, err
			}
			gateSet, hasGateSet, err := br.file(FileGateSet)
			if err != nil {
				return nil, err
			}
			if file, err := bm.checkDocuments(profile, gateSet); err != nil {
				return nil, tamper(file, "is not the document "+n+" attests", err)
			}
			// Each document is shipped when the run has it: the profile
			// with any, the gate set when the statement names one.
			switch {
			case hasGateSet && !hasProfile:
				return nil, tamper(FileProfile, "missing: the bundle has "+FileGateSet+" without it", nil)
			case hasProfile && !hasGateSet && bm.GateSet != (Ref{}):
				return nil, tamper(FileGateSet, fmt.Sprintf("missing: %s names gate set %s v%d and the bundle has %s", n, bm.GateSet.Name, bm.GateSet.Version, FileProfile), nil)
			}
			report.Documents = nil
			if hasProfile {
				report.Documents = append(report.Documents, FileProfile)
			}
			if hasGateSet {
				report.Documents = append(report.Documents, FileGateSet)
			}
		}
		report.Attestations = append(report.Attestations, AttestationCheck{File: n, PredicateType: st.PredicateType, KeyIDs: ids, Subjects: len(st.Subject)})
		imp.Statements = append(imp.Statements, st)
	}

	// Co-signatures.
	cosigs, err := br.verifyCoSignatures(trusted, noteRevoked)
	if err != nil {
		return nil, err
	}
	report.CoSignatures = cosigs

	// The decision log, when decisions.json holds one.
	decisions, err := br.kept(FileDecisions)
	if err != nil {
		return nil, err
	}
	if data := decisions; isDecisionLog(data) {
		log, err := ParseDecisionLog(data)
		if err != nil {
			return nil, tamper(FileDecisions, "unreadable decision log", err)
		}
		chain, err := log.Verify(trusted)
		if isKeyWindowErr(err) {
			noteKeyErr(FileDecisions, err)
		} else if err != nil {
			return nil, tamper(FileDecisions, "decision log does not verify", err)
		}
		report.Decisions = chain
		if chain != nil {
			report.Warnings = append(report.Warnings, chain.Warnings...)
		}
	}

	if br.contents {
		var kerr error
		keep := func(name string) []byte {
			b, err := br.kept(name)
			kerr = cmp.Or(kerr, err)
			return b
		}
		imp.ReportHTML, imp.Summary, imp.Facts, imp.Evaluation = keep(FileReportHTML), keep(FileSummary), keep(FileFacts), keep(FileEvaluation)
		imp.Decisions = decisions
		if kerr != nil {
			return nil, kerr
		}
	}
	for _, f := range report.Files {
		if name, ok := strings.CutPrefix(f.Name, dirArtifacts); ok {
			imp.Artifacts = append(imp.Artifacts, ArtifactDigest{Name: name, SHA256: f.SHA256, Size: f.Size})
		}
	}
	return imp, keyErr
}

// isKeyWindowErr reports whether err is a signature by a key outside its
// validity window (revoked, rotated out, not yet made).
func isKeyWindowErr(err error) bool {
	return errors.Is(err, ErrRevokedKey) || errors.Is(err, ErrRotatedOutKey) || errors.Is(err, ErrKeyNotYetValid)
}

// verifyCoSignatures checks every MANIFEST.sha256.NAME.sig against its
// MANIFEST.sha256.NAME.allowed_signers.
func (br *bundleReader) verifyCoSignatures(trusted *KeySet, noteRevoked func(string, PublicKey)) ([]SignatureCheck, error) {
	var names []string
	for f := range br.sigs {
		if f == FileManifestSig {
			continue
		}
		names = append(names, f)
	}
	slices.Sort(names)
	var out []SignatureCheck
	for _, f := range names {
		if base, ok := strings.CutSuffix(f, cosigSignersExt); ok {
			if !br.sigs[base+cosigSigExt] {
				return nil, tamper(f, "has no "+path.Base(base+cosigSigExt), nil)
			}
			continue
		}
		base := strings.TrimSuffix(f, cosigSigExt)
		signersFile := base + cosigSignersExt
		signersText, ok, err := br.file(signersFile)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, tamper(f, "co-signature without "+signersFile, nil)
		}
		allowed, err := ParseAllowedSigners(signersText)
		if err != nil {
			return nil, tamper(signersFile, "unreadable", err)
		}
		sigText, _, err := br.file(f)
		if err != nil {
			return nil, err
		}
		sig, err := sshsig.Unarmor(sigText)
		if err != nil {
			return nil, tamper(f, "unreadable signature", err)
		}
		id := KeyID(sig.PublicKey)
		idx := slices.IndexFunc(allowed, func(k PublicKey) bool { return k.ID == id })
		if idx < 0 {
			return nil, tamper(f, fmt.Sprintf("signed by key %s, which %s does not list for namespace %s", id, signersFile, Namespace), nil)
		}
		if err := sshsig.Verify(sig, bytes.NewReader(br.manifest), Namespace); err != nil {
			return nil, tamper(f, "co-signature does not verify over "+FileManifest, err)
		}
		k := allowed[idx]
		tk, isTrusted := trusted.Lookup(id)
		if isTrusted {
			k.Status, k.RevokedAt, k.RevokedReason = tk.Status, tk.RevokedAt, tk.RevokedReason
			if tk.Status == KeyRevoked {
				noteRevoked(f, tk)
			}
		} else {
			k.Status = ""
		}
		c := signatureCheck(f, k, isTrusted)
		c.Signer = coSignerComment(signersText)
		out = append(out, c)
	}
	return out, nil
}

func signatureCheck(file string, k PublicKey, trusted bool) SignatureCheck {
	return SignatureCheck{
		File: file, KeyID: k.ID, Algorithm: k.Algorithm, Principal: k.Principal,
		Trusted: trusted, Status: k.Status, RetiredAt: k.RetiredAt, RevokedAt: k.RevokedAt, RevokedReason: k.RevokedReason,
	}
}

// parseManifest reads sha256sum output strictly: "HEX  NAME" or "HEX *NAME"
// lines, each name once.
func parseManifest(data []byte) (map[string]string, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, errors.New("must end with a newline")
	}
	out := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if len(line) < 67 || (line[64:66] != "  " && line[64:66] != " *") {
			return nil, fmt.Errorf("line %d: not a sha256sum line", i+1)
		}
		sum, name := line[:64], line[66:]
		if !isHexDigest(sum) {
			return nil, fmt.Errorf("line %d: bad digest", i+1)
		}
		if err := checkArtifactName(name); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", i+1, name)
		}
		out[name] = sum
	}
	return out, nil
}

// WriteText writes the report for people (accord verify).
func (r *Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Run %s", r.RunID)
	if r.Title != "" {
		fmt.Fprintf(&b, ": %s", r.Title)
	}
	fmt.Fprintf(&b, " (bundle created %s)\n", r.Created.UTC().Format(time.RFC3339))
	if r.SelfTrusted {
		b.WriteString("WARNING: no trusted keys given; checked against the bundle's own keys/keys.json (integrity only, not origin)\n")
	}
	fmt.Fprintf(&b, "Manifest %s signed by %s (%s, %s)\n", FileManifest, r.Manifest.KeyID, r.Manifest.Algorithm, statusText(r.Manifest))
	for _, c := range r.CoSignatures {
		fmt.Fprintf(&b, "Co-signed in %s by %s (as its unsigned allowed_signers file says), key %s (%s)\n", c.File, c.Principal, c.KeyID, statusText(c))
		if c.Signer != "" {
			fmt.Fprintf(&b, "  %s\n", c.Signer)
		}
	}
	fmt.Fprintf(&b, "%d files match the manifest\n", len(r.Files))
	switch len(r.Documents) {
	case 1:
		fmt.Fprintf(&b, "%s hashes to the digest the benchmark statement names (the run had no gate set)\n", r.Documents[0])
	case 2:
		fmt.Fprintf(&b, "%s and %s hash to the digests the benchmark statement names\n", r.Documents[0], r.Documents[1])
	}
	for _, a := range r.Attestations {
		fmt.Fprintf(&b, "Attestation %s: %s, %d subjects, signed by %s\n", a.File, a.PredicateType, a.Subjects, strings.Join(a.KeyIDs, ", "))
	}
	if r.Decisions != nil {
		fmt.Fprintf(&b, "Decision log: %d records, head %s at seq %d, checkpoint %s signed by %s\n",
			r.Decisions.Records, r.Decisions.Head, r.Decisions.Seq, stamp(r.Decisions.CheckpointTime), r.Decisions.CheckpointKeyID)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", warn)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func statusText(c SignatureCheck) string {
	signed := ""
	if !c.SignedAt.IsZero() {
		signed = ", signed " + stamp(c.SignedAt)
	}
	switch {
	case !c.Trusted:
		return "NOT a trusted key"
	case c.Status == KeyRevoked:
		return fmt.Sprintf("trusted%s; REVOKED at %s: %s", signed, stamp(c.RevokedAt), c.RevokedReason)
	case c.Status == KeyRetired && !c.RetiredAt.IsZero():
		return fmt.Sprintf("trusted%s; rotated out at %s", signed, stamp(c.RetiredAt))
	case c.Status == KeyRetired:
		return "trusted" + signed + "; rotated out"
	default:
		return "trusted, " + string(c.Status) + signed
	}
}
