package attest

import (
	"bytes"
	"fmt"
	"strings"
)

// verifyMarkdown writes VERIFY.md: how a third party checks the bundle with
// standard tools. The fenced `sh` blocks are run verbatim by the tests, in
// the extracted bundle directory; the `sh-cosign` block with KEY, NAME and
// WHO set.
func verifyMarkdown(runID, title, signerID string, attestations []BundleAttestation, hasDecisions bool) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if title == "" {
		title = "Accord run " + runID
	}
	w("# Verifying %s\n\n", mdEscape(title))
	w("Run %s, signed by the Accord installation key `%s`.\n\n", mdEscape(runID), signerID)
	w("Everything here can be checked offline with standard tools (coreutils, OpenSSH's\n")
	w("ssh-keygen, OpenSSL), or with `accord verify` on this bundle. Run the commands in the\n")
	w("directory this file is in (`cd` into the unpacked bundle first), with bash; each must\n")
	w("succeed (exit status 0). This runs every `sh` block below in order and stops at the\n")
	w("first that fails:\n\n")
	w("```console\n")
	w("%s\n", RunAllCommand)
	w("```\n\n")
	w("**Which key to trust.** The files in `keys/` came with the bundle: a bundle re-signed\n")
	w("by someone else brings their keys too. Compare `keys/allowed_signers` and\n")
	w("`keys/signer.pem` with what the signing installation publishes under\n")
	w("`/.well-known/accord/` (`allowed_signers`, `keys.pem`, `keys.json`) or gave you out of\n")
	w("band. The published `allowed_signers` (it leaves out revoked keys) can replace\n")
	w("`keys/allowed_signers` in the commands below. openssl reads one key: check that\n")
	w("`keys/signer.pem` is among the published `keys.pem` and that `keys.json` lists its id\n")
	w("as active (`keys.pem` holds every key the installation ever had, revoked ones too).\n\n")

	w("## 1. The files are the ones that were signed\n\n")
	w("`MANIFEST.sha256` lists the SHA-256 of every file of the bundle except, in this\n")
	w("top directory only, itself, its signature `MANIFEST.sha256.sig` and co-signatures\n")
	w("(`MANIFEST.sha256.NAME.sig` with `MANIFEST.sha256.NAME.allowed_signers`). Files with\n")
	w("those names anywhere else (such as the probe's own `artifacts/MANIFEST.sha256`) are\n")
	w("listed like any other. The second command compares the paths of all files with the\n")
	w("listed ones and prints any file that is not listed or is missing (no output, exit\n")
	w("status 0, means none).\n\n")
	w("```sh\n")
	w("sha256sum --strict -c MANIFEST.sha256\n")
	w("find . ! -type d | sed 's|^\\./||' \\\n")
	w("  | grep -v -x -E '%s' \\\n", unlistedPathsERE)
	w("  | LC_ALL=C sort | diff - <(cut -c67- MANIFEST.sha256 | LC_ALL=C sort)\n")
	w("```\n\n")

	w("## 2. The manifest is signed by the installation\n\n")
	w("```sh\n")
	w("ssh-keygen -Y verify -f keys/allowed_signers -I %s -n %s -s %s < %s\n", Principal, Namespace, FileManifestSig, FileManifest)
	w("```\n\n")
	w("Co-signatures by the other side's engineers are `MANIFEST.sha256.NAME.sig`, each with\n")
	w("its signer's line in `MANIFEST.sha256.NAME.allowed_signers`. Check that each line is\n")
	w("the engineer's real key, then:\n\n")
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
	w("The statements' subjects are the files under `artifacts/` by SHA-256 (compare with\n")
	w("`MANIFEST.sha256`). Decode a statement with\n")
	w("`grep -o '\"payload\": *\"[^\"]*\"' attestations/benchmark.dsse.json | cut -d '\"' -f 4 | base64 -d`.\n\n")
	w("- `test-result`: the in-toto test-result predicate (%s). Accord's verdicts map\n", TestResultPredicate)
	w("  PASS → PASSED, FAIL → FAILED, INCONCLUSIVE and INCOMPARABLE → WARNED.\n")
	w("- `benchmark`: Accord's benchmark predicate (%s): profile and gate set\n", BenchmarkPredicateType)
	w("  versions and digests, the SHA-256 of `facts.json`, the metrics summary, every verdict\n")
	w("  with its explanation, the engine version and the run's start and end.\n\n")
	w("This bundle's attestations:\n\n")
	for _, a := range attestations {
		w("- `%s`: %s, statement SHA-256 %s\n", a.File, a.PredicateType, a.PayloadSHA256)
	}
	w("\n")

	w("## 4. The decision log\n\n")
	if hasDecisions {
		w("`decisions.json` is the program's decision log when the run was signed: each record\n")
		w("is hash-chained to the previous one and signed (DSSE), and the head is signed as a\n")
		w("checkpoint. `accord verify decisions.json --keys keys/keys.json` checks the whole chain.\n\n")
	} else {
		w("The program had no rollout decisions when this run was signed, so the bundle carries\n")
		w("no `decisions.json`; the installation exports the log at any time\n")
		w("(`/programs/ID/decisions/export`), and `accord verify` checks it.\n\n")
	}

	w("## 5. Co-signing\n\n")
	w("To add your signature to this bundle, with your SSH key `$KEY` (e.g. ~/.ssh/id_ed25519),\n")
	w("a short name `$NAME` for the file, and your identity `$WHO` (e.g. your e-mail):\n\n")
	w("```sh-cosign\n")
	w("ssh-keygen -Y sign -f \"$KEY\" -n %s < %s > \"%s$NAME.sig\"\n", Namespace, FileManifest, cosigPrefix)
	w("printf '%%s namespaces=\"%s\" %%s\\n' \"$WHO\" \"$(cut -d ' ' -f 1,2 \"$KEY.pub\")\" > \"%s$NAME.allowed_signers\"\n", Namespace, cosigPrefix)
	w("```\n\n")
	w("then send both files back, or pack the directory again (`tar czf`) and upload it.\n")
	return b.Bytes()
}

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
// bundle's folder, and run every check of its VERIFY.md.
func CheckCommands(bundleFile, runID string) []string {
	return []string{
		"tar xzf " + bundleFile,
		"cd " + BundleDir(runID),
		RunAllCommand,
	}
}
