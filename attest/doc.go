// Package attest signs and verifies Accord's evidence: the installation's
// signing keys, in-toto statements in DSSE envelopes, SSH-signed report
// manifests, report bundles, and the hash-chained decision log. Everything
// it writes can be checked offline, with this package or with standard tools
// (sha256sum, ssh-keygen -Y verify, openssl).
//
// How the server uses it:
//
//   - At start: kr, err := OpenKeyring(filepath.Join(dataDir, "signing"),
//     KeyringOptions{KeyFile: cfg.SigningKeyFile}). The first call generates
//     the installation key (PKCS#8 PEM, mode 0400).
//   - /.well-known/accord/keys.json, keys.pem (the active key), keys/ID.pem
//     (each key, PublicKey.PEMFile), allowed_signers (every key with its
//     validity window): MarshalKeysJSON, MarshalPEM, PublicKey.PEM and
//     MarshalAllowedSigners of kr.PublicKeys().
//   - sign_run job: s, _ := kr.Active(); atts, _ := SignRun(s, RunEvidence{...})
//     and store the envelopes (dsse.Envelope.Marshal) with the run.
//   - Bundle download: WriteBundle(ctx, w, s, BundleInput{...}) streams the
//     .tar.gz (artifacts are opened lazily through Artifact.Open).
//   - Co-signature upload: AddCoSignature copies a bundle with the other
//     side's `ssh-keygen -Y sign` signature added.
//   - Import of another installation's bundle: ParseTrustedKeys(pinned
//     allowed_signers line or PEM), then ImportBundle with an ArtifactSink.
//   - A decision: in one transaction, lock the chain head, NextDecision(head,
//     Decision{...}), SignDecision, insert, and SignCheckpoint over the new head.
//     Export with NewDecisionLog(...) (EarlierCheckpoints set).Marshal();
//     publish the head with NewLogHead(checkpoint).
//   - `accord verify FILE [--keys KEYS] [--head HEAD]`: VerifyFileWithHead with
//     keys from ParseTrustedKeys (nil: the bundle's own keys, integrity only).
//   - Key rotation and revocation (admin): kr.Rotate(now), kr.Revoke(id, reason, now),
//     then sign every decision log's head again with the active key. A key's
//     signatures are valid from its making to its rotation or revocation
//     (PublicKey.CheckSignedAt), at the time they state.
package attest
