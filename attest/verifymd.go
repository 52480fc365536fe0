package attest

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// verifyDoc is what VERIFY.md says about one bundle.
type verifyDoc struct {
	RunID, Title string
	SignerID     string
	// Created is when the bundle was signed (bundle.json): the time
	// ssh-keygen checks the key's validity window at.
	Created      time.Time
	Attestations []BundleAttestation
	// Log summarises decisions.json.
	Log LogSummary
	// LogHeadURL is where the installation publishes the program's signed
	// log head (empty: not known when signed).
	LogHeadURL string
	// Profile and GateSet say whether profile.json and gate-set.json are in
	// the bundle (a run without a gate set has the profile alone).
	Profile, GateSet bool
}

// LogSummary is what a decision log holds, read from its checkpoint.
type LogSummary struct {
	Chain          string
	Records        int
	Seq            int64
	Head           string
	CheckpointTime time.Time
}

// summarizeLog reads a decision log export for VERIFY.md (not verified
// here: accord verify and the tests do that).
func summarizeLog(data []byte) (LogSummary, error) {
	log, err := ParseDecisionLog(data)
	if err != nil {
		return LogSummary{}, err
	}
	cp, err := ParseCheckpoint(log.Checkpoint)
	if err != nil {
		return LogSummary{}, fmt.Errorf("attest: decision log: %w", err)
	}
	return LogSummary{Chain: log.Chain, Records: len(log.Records), Seq: cp.Seq, Head: cp.Head, CheckpointTime: cp.Time}, nil
}

// verifyMarkdown writes VERIFY.md: how a third party checks the bundle with
// standard tools. The fenced `sh` blocks are run verbatim by the tests, in
// the extracted bundle directory (RunAllCommand runs them in order); the
// `sh-cosign` block with KEY, NAME and WHO set.
func verifyMarkdown(d verifyDoc) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	title := d.Title
	if title == "" {
		title = "Accord run " + d.RunID
	}
	w("# Verifying %s\n\n", mdEscape(title))
	w("Run %s, signed %s by the Accord installation key `%s`.\n\n", mdEscape(d.RunID), stamp(d.Created), d.SignerID)
	w("Everything here can be checked offline with standard tools (coreutils, OpenSSH's\n")
	w("ssh-keygen, OpenSSL), or with `accord verify` on this bundle. Run the commands in the\n")
	w("directory this file is in (`cd` into the unpacked bundle first), with bash; each must\n")
	w("succeed (exit status 0). This runs every `sh` block below in order and stops at the\n")
	w("first that fails:\n\n")
	w("```console\n")
	w("%s\n", RunAllCommand)
	w("```\n\n")

	w("**Which key to trust.** The files in `keys/` came with the bundle: a bundle re-signed\n")
	w("by someone else brings their keys too. Compare them with what the signing\n")
	w("installation publishes under `/.well-known/accord/`, or gave you out of band:\n\n")
	w("- `allowed_signers`: every key it ever had, each with its validity window\n")
	w("  (`valid-after` the second it was made, `valid-before` the second it was rotated\n")
	w("  out or revoked). It can replace `keys/allowed_signers` below: ssh-keygen then\n")
	w("  refuses a signature dated after its key was rotated out or revoked.\n")
	w("- `keys.pem`: the active key only (openssl reads one key); `keys/ID.pem`: each key\n")
	w("  on its own, `keys.json` names every key's file, status and times.\n\n")
	w("This bundle was signed with `%s`, whose own PEM is `%s` (and `%s`).\n\n", d.SignerID, PublicKey{ID: d.SignerID}.PEMFile(), FileSignerPEM)

	w("## 1. The files are the ones that were signed\n\n")
	w("`MANIFEST.sha256` lists the SHA-256 of every file of the bundle except, in this\n")
	w("top directory only, itself, its signature `MANIFEST.sha256.sig` and co-signatures\n")
	w("(`MANIFEST.sha256.NAME.sig` with `MANIFEST.sha256.NAME.allowed_signers`). Files with\n")
	w("those names anywhere else (such as the probe's own `artifacts/MANIFEST.sha256`) are\n")
	w("listed like any other. The first two lines refuse any file or folder whose name holds\n")
	w("a control character (a newline in a name would make it read as two paths below, each\n")
	w("of which could pass); Accord never writes such a name. Then sha256sum checks every\n")
	w("listed file, and the last command compares the paths of all files with the listed\n")
	w("ones and prints any file that is not listed or is missing (no output, exit status 0,\n")
	w("means none).\n\n")
	w("```sh\n")
	w("bad=$(LC_ALL=C find . -name '*[[:cntrl:]]*' -print -quit)\n")
	w("[ -z \"$bad\" ] || { echo 'a file name holds a control character (a newline?): not a bundle as signed'; exit 1; }\n")
	w("sha256sum --strict -c MANIFEST.sha256\n")
	w("find . ! -type d | sed 's|^\\./||' \\\n")
	w("  | grep -v -x -E '%s' \\\n", unlistedPathsERE)
	w("  | LC_ALL=C sort | diff - <(cut -c67- MANIFEST.sha256 | LC_ALL=C sort)\n")
	w("```\n\n")

	w("## 2. The manifest is signed by the installation\n\n")
	w("ssh-keygen checks the signature, and that its key was valid at %s, when the\n", stamp(d.Created))
	w("bundle says it was signed (`created` in `bundle.json`):\n\n")
	w("```sh\n")
	w("ssh-keygen -Y verify -f %s -I %s -n %s -Overify-time=%s -s %s < %s\n", FileAllowedSigners, Principal, Namespace, sshTime(wholeSecond(d.Created)), FileManifestSig, FileManifest)
	w("```\n\n")
	w("Co-signatures by the other side's engineers are `MANIFEST.sha256.NAME.sig`, each with\n")
	w("its signer's line in `MANIFEST.sha256.NAME.allowed_signers` (a comment line above it\n")
	w("names the member and organisation Accord checked it against). These two files are added\n")
	w("after the installation signed: neither the manifest nor any signature of the installation\n")
	w("covers them, so that comment and the name before the key are claims that anyone holding\n")
	w("the bundle can change. Check that each line's key is the engineer's real key (ask them,\n")
	w("or compare it with the fingerprint the run's report page lists for them), then:\n\n")
	w("```sh\n")
	w("for signers in MANIFEST.sha256.*.allowed_signers; do\n")
	w("  [ -e \"$signers\" ] || continue\n")
	w("  [ -e \"${signers%%.allowed_signers}.sig\" ] || { echo \"$signers: no signature beside it\"; exit 1; }\n")
	w("done\n")
	w("for sig in MANIFEST.sha256.*.sig; do\n")
	w("  [ -e \"$sig\" ] || continue\n")
	w("  signers=\"${sig%%.sig}.allowed_signers\"\n")
	w("  who=$(ssh-keygen -Y find-principals -f \"$signers\" -s \"$sig\" | head -n 1)\n")
	w("  ssh-keygen -Y verify -f \"$signers\" -I \"$who\" -n %s -s \"$sig\" < %s\n", Namespace, FileManifest)
	w("done\n")
	w("```\n\n")

	w("## 3. The attestations are signed\n\n")
	w("Each `attestations/*.dsse.json` is a DSSE envelope holding an in-toto Statement v1\n")
	w("(payload type `%s`). The signature is ECDSA P-256, ASN.1 DER, over\n", PayloadTypeInToto)
	w("SHA-256 of the envelope's pre-authentication encoding\n")
	w("`DSSEv1 <len(type)> <type> <len(payload)> <payload>`. This rebuilds it and asks\n")
	w("openssl (the envelope's first signature is the installation's):\n\n")
	w("```sh\n")
	w("tmp=$(mktemp -d)\n")
	w("for E in attestations/*.dsse.json; do\n")
	w("  field() { grep -o \"\\\"$1\\\": *\\\"[^\\\"]*\\\"\" \"$E\" | head -n 1 | cut -d '\"' -f 4; }\n")
	w("  field payload | base64 -d > \"$tmp/payload\"\n")
	w("  field sig | base64 -d > \"$tmp/sig.der\"\n")
	w("  type=$(field payloadType)\n")
	w("  { printf 'DSSEv1 %%d %%s %%d ' \"${#type}\" \"$type\" \"$(wc -c < \"$tmp/payload\")\"; cat \"$tmp/payload\"; } > \"$tmp/pae\"\n")
	w("  echo \"$E: key $(field keyid)\"\n")
	w("  openssl dgst -sha256 -verify %s -signature \"$tmp/sig.der\" \"$tmp/pae\" || exit 1\n", FileSignerPEM)
	w("done\n")
	w("rm -r \"$tmp\"\n")
	w("```\n\n")
	w("openssl checks the bytes, not the time: `keys.json` says when `%s` was\n", FileSignerPEM)
	w("made, rotated out or revoked, and step 2 checked the window.\n\n")
	w("The statements' subjects are the files under `artifacts/` by SHA-256 (compare with\n")
	w("`MANIFEST.sha256`). Decode a statement with\n")
	w("`grep -o '\"payload\": *\"[^\"]*\"' attestations/benchmark.dsse.json | cut -d '\"' -f 4 | base64 -d`.\n\n")
	w("- `test-result`: the in-toto test-result predicate (%s). Accord's verdicts map\n", TestResultPredicate)
	w("  PASS → PASSED, FAIL → FAILED, INCONCLUSIVE and INCOMPARABLE → WARNED.\n")
	w("- `benchmark`: Accord's benchmark predicate (%s): profile and gate set\n", BenchmarkPredicateType)
	w("  versions and digests, the SHA-256 of `facts.json`, the metrics summary, every verdict\n")
	w("  with its explanation, the engine version and the run's start and end.\n\n")
	w("This bundle's attestations:\n\n")
	for _, a := range d.Attestations {
		w("- `%s`: %s, statement SHA-256 %s\n", a.File, a.PredicateType, a.PayloadSHA256)
	}
	w("\n")
	w("**With cosign**, offline (no transparency log: the key is the trust), one envelope and\n")
	w("one of its subjects at a time:\n\n")
	w("```console\n")
	w("cosign verify-blob-attestation --key %s --signature attestations/benchmark.dsse.json \\\n", FileSignerPEM)
	w("  --type %s --insecure-ignore-tlog=true artifacts/%s\n", BenchmarkPredicateType, "FILE")
	w("```\n\n")
	w("with FILE any file the statement names (its subjects are the files under `artifacts/`).\n")
	w("It proves that the envelope is signed by that key, that its statement has that\n")
	w("predicate type, and that the file's SHA-256 is one of the statement's subjects. It does\n")
	w("not prove that the key is the installation's (see \"Which key to trust\"), nor that\n")
	w("the key was valid when it signed, nor anything about the other files or the manifest.\n\n")

	section := 4
	switch {
	case d.Profile && d.GateSet:
		w("## %d. The profile and the gate set\n\n", section)
		section++
		w("`%s` and `%s` are the workload profile and the gate set the run was judged\n", FileProfile, FileGateSet)
		w("by, as canonical JSON (keys sorted, no insignificant white space). Their SHA-256 are\n")
		w("the digests the benchmark statement names; this compares them:\n\n")
	case d.Profile:
		w("## %d. The profile\n\n", section)
		section++
		w("`%s` is the workload profile the run ran, as canonical JSON (keys sorted, no\n", FileProfile)
		w("insignificant white space); the run had no gate set, so nothing judged it and the\n")
		w("bundle has no `%s` and no test-result statement. Its SHA-256 is the digest the\n", FileGateSet)
		w("benchmark statement names; this compares them:\n\n")
	}
	if d.Profile {
		w("```sh\n")
		w("statement=$(grep -o '\"payload\": *\"[^\"]*\"' attestations/benchmark.dsse.json | cut -d '\"' -f 4 | base64 -d)\n")
		w("%s\n", refDigestFunc)
		w("echo \"$(digest profile)  %s\" | sha256sum --strict -c\n", FileProfile)
		if d.GateSet {
			w("echo \"$(digest gateSet)  %s\" | sha256sum --strict -c\n", FileGateSet)
		}
		w("```\n\n")
	}

	w("## %d. The decision log\n\n", section)
	section++
	w("`%s` is the program's decision log (chain `%s`) as it stood when this bundle\n", FileDecisions, mdEscape(d.Log.Chain))
	switch d.Log.Records {
	case 0:
		w("was signed: it held no decisions yet. Its checkpoint, signed %s, says so\n", stamp(d.Log.CheckpointTime))
		w("(seq 0): a log with decisions cannot pass for this one.\n\n")
	case 1:
		w("was signed: 1 decision, seq 1, head `%s`, checkpoint signed %s.\n\n", d.Log.Head, stamp(d.Log.CheckpointTime))
	default:
		w("was signed: %d decisions, seq 1 to %d, head `%s`, checkpoint signed %s.\n\n", d.Log.Records, d.Log.Seq, d.Log.Head, stamp(d.Log.CheckpointTime))
	}
	w("Each record is hash-chained to the previous one and signed (DSSE); the head is signed\n")
	w("as a checkpoint, and the checkpoints it superseded are kept (after a key revocation\n")
	w("the installation signs the head again with its new key). `accord verify %s\n", FileDecisions)
	w("--keys keys/keys.json` checks the whole chain, each signature against its key's window.\n\n")
	w("**Is it the latest?** Offline, nobody can tell: an older genuine export verifies just\n")
	w("as well as the current one. With access to the installation, fetch the program's\n")
	w("signed log head (sequence number, head hash, time)")
	if d.LogHeadURL != "" {
		w(" from\n`%s` ", d.LogHeadURL)
	} else {
		w(",\n`/programs/ID/decisions/head.json` for chain `program:ID`, ")
	}
	w("and run\n`accord verify %s --keys keys.json --head head.json`: it says whether this log\n", FileDecisions)
	w("is behind, and by how many decisions.\n\n")

	w("## %d. What offline verification cannot tell\n\n", section)
	section++
	w("- Whether `keys/` are the installation's keys: compare them with the published ones.\n")
	w("- Whether the signing time is true. The signer states it (`created`, %s); the key\n", stamp(d.Created))
	w("  windows are checked at that time. Whoever holds a key can date a signature back into\n")
	w("  its window, so a signature by a key revoked after that time is only as good as the\n")
	w("  revocation was prompt; `accord verify` warns of it.\n")
	w("- Whether this is the latest decision log or report (see above), and whether a newer\n")
	w("  version of this bundle carries more co-signatures (the report page lists them).\n")
	w("- Whether a co-signer's key belongs to the person named: Accord accepted it only from\n")
	w("  that member, signed in, with a key they registered; offline you see only the key (the\n")
	w("  name and comment beside it are not signed by anyone).\n\n")

	w("## %d. Co-signing\n\n", section)
	w("To add your signature to this bundle, with your SSH key `$KEY` (e.g. ~/.ssh/id_ed25519),\n")
	w("a short name `$NAME` for the file, and your identity `$WHO` (e.g. your e-mail). It writes\n")
	w("`MANIFEST.sha256.$NAME.sig`, a file of its own, and leaves `%s` as it is:\n\n", FileManifestSig)
	w("```sh-cosign\n")
	w("ssh-keygen -Y sign -f \"$KEY\" -n %s < %s > \"%s$NAME.sig\"\n", Namespace, FileManifest, cosigPrefix)
	w("printf '%%s namespaces=\"%s\" %%s\\n' \"$WHO\" \"$(cut -d ' ' -f 1,2 \"$KEY.pub\")\" > \"%s$NAME.allowed_signers\"\n", Namespace, cosigPrefix)
	w("```\n\n")
	w("Accord takes a co-signature only from a signed-in member of the program's other\n")
	w("organisation, made with an SSH key they registered in Accord beforehand: upload the\n")
	w("`.sig` file on the run's report page.\n")
	return b.Bytes()
}

// refDigestFunc is a shell function that prints the SHA-256 of the
// benchmark statement's profile or gateSet reference, its name matched as
// a JSON string (escapes and braces allowed).
const refDigestFunc = `digest() { printf '%s' "$statement" | grep -o "\"$1\""':{"name":"\([^"\\]\|\\.\)*","version":[0-9]*,"sha256":"[0-9a-f]\{64\}"}' | grep -o '[0-9a-f]\{64\}"}$' | cut -c 1-64; }`

// RunAllCommand runs VERIFY.md's sh blocks in order, stopping at the first
// failure. It avoids three backticks in a row so that it can stand in a
// fenced block itself.
const RunAllCommand = "sed -n '/^`\\{3\\}sh$/,/^`\\{3\\}$/{/^`/!p}' " + FileVerifyMD + " | bash -e -o pipefail && echo 'All checks passed.'"

// mdEscape keeps titles from breaking the markdown.
func mdEscape(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "`", "'", "<", "&lt;", ">", "&gt;").Replace(s)
}

// CheckCommands are the commands that check a downloaded bundle file with
// standard tools, one per line as a person types them: unpack, go into the
// bundle's folder, check that its manifest is the one this installation
// signed (manifestSHA256, the SHA-256 of MANIFEST.sha256) and its VERIFY.md
// the one the manifest lists, and run every check of that VERIFY.md. The
// last three are joined by && (a line ending in && goes on to the next), so
// that a bundle whose VERIFY.md was removed or rewritten to check nothing
// never prints that all checks passed.
func CheckCommands(bundleFile, runID, manifestSHA256 string) []string {
	return []string{
		"tar xzf " + bundleFile,
		"cd " + BundleDir(runID),
		"echo '" + manifestSHA256 + "  " + FileManifest + "' | sha256sum --strict -c &&",
		"grep -x '[0-9a-f]\\{64\\}  " + strings.ReplaceAll(FileVerifyMD, ".", "\\.") + "' " + FileManifest + " | sha256sum --strict -c &&",
		RunAllCommand,
	}
}
