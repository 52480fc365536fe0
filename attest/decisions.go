package attest

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/attest/internal/strictjson"
)

// Decision log identifiers.
const (
	DecisionPayloadType   = "application/vnd.accord.decision+json"
	CheckpointPayloadType = "application/vnd.accord.decision-checkpoint+json"
	DecisionLogFormat     = "accord-decision-log/v1"
)

// Decision kinds the server records (others are allowed).
const (
	DecisionApprove  = "approve"
	DecisionReject   = "reject"
	DecisionStopLoss = "stop-loss"
	DecisionHalt     = "halt"
	DecisionResume   = "resume"
)

// GenesisHash is the prev_hash of a chain's first record.
var GenesisHash = strings.Repeat("0", 64)

// Decision is one record of a decision log. Its hash is the SHA-256 of its
// canonical JSON (Canonical), prev_hash included, so each record commits to
// the whole history before it. The signature is not part of the hash: a
// record can be re-signed (after a key revocation) without breaking the chain.
type Decision struct {
	// Chain identifies the log (e.g. the test program); records of another
	// chain cannot be spliced in.
	Chain        string           `json:"chain"`
	Seq          int64            `json:"seq"`
	Kind         string           `json:"kind"`
	Actor        string           `json:"actor"`
	Organisation string           `json:"organisation"`
	Time         time.Time        `json:"time"`
	Stage        string           `json:"stage"`
	Evidence     DecisionEvidence `json:"evidence"`
	Reason       string           `json:"reason"`
	PrevHash     string           `json:"prev_hash"`
}

// DecisionEvidence is what a decision rests on.
type DecisionEvidence struct {
	// RunIDs are decimal run ids as strings.
	RunIDs []string `json:"run_ids"`
	// Verdicts maps a run id (or "run/criterion") to its verdict.
	Verdicts map[string]string `json:"verdicts"`
	// Digests maps a name (a bundle manifest, an artifact) to "sha256:HEX".
	Digests map[string]string `json:"digests"`
	// Figures maps a name to a measured figure with its unit, e.g. a
	// production watch's "watch/7/breach_to_halt": "41.2 s". Left out of
	// the canonical form when empty, so records without figures hash as
	// they always did.
	Figures map[string]string `json:"figures,omitempty"`
}

// normalized is the form that is hashed: UTC time at microsecond precision
// (what PostgreSQL keeps) and empty rather than nil collections, so a record
// read back from the database hashes the same.
func (d Decision) normalized() Decision {
	d.Time = d.Time.UTC().Truncate(time.Microsecond)
	if d.Evidence.RunIDs == nil {
		d.Evidence.RunIDs = []string{}
	}
	if d.Evidence.Verdicts == nil {
		d.Evidence.Verdicts = map[string]string{}
	}
	if d.Evidence.Digests == nil {
		d.Evidence.Digests = map[string]string{}
	}
	return d
}

// Canonical returns the record's canonical JSON (what is hashed and signed).
func (d Decision) Canonical() ([]byte, error) { return Canonical(d.normalized()) }

// Hash returns the record's hex SHA-256.
func (d Decision) Hash() (string, error) {
	c, err := d.Canonical()
	if err != nil {
		return "", err
	}
	return sha256Hex(c), nil
}

// SignedDecision is a record with its hash and signed envelope.
type SignedDecision struct {
	Record   Decision
	Hash     string
	Envelope *dsse.Envelope
}

// NextDecision fills in chain, seq and prev_hash of in to follow head (nil
// for a chain's first record; in.Chain names the chain then).
func NextDecision(head *SignedDecision, in Decision) (Decision, error) {
	if in.Kind == "" || in.Actor == "" || in.Time.IsZero() {
		return Decision{}, errors.New("attest: decision: kind, actor and time are required")
	}
	if head == nil {
		in.Seq = 1
		in.PrevHash = GenesisHash
	} else {
		in.Chain = head.Record.Chain
		in.Seq = head.Record.Seq + 1
		in.PrevHash = head.Hash
	}
	return in.normalized(), nil
}

// SignDecision hashes and signs a record.
func SignDecision(s *Signer, d Decision) (SignedDecision, error) {
	d = d.normalized()
	payload, err := d.Canonical()
	if err != nil {
		return SignedDecision{}, err
	}
	env, err := s.SignDSSE(DecisionPayloadType, payload)
	if err != nil {
		return SignedDecision{}, fmt.Errorf("attest: sign decision %d: %w", d.Seq, err)
	}
	return SignedDecision{Record: d, Hash: sha256Hex(payload), Envelope: env}, nil
}

// Checkpoint is a signed statement of a chain's head.
type Checkpoint struct {
	Chain string    `json:"chain"`
	Seq   int64     `json:"seq"`
	Head  string    `json:"head"`
	Time  time.Time `json:"time"`
}

// SignCheckpoint signs the head of a chain (head nil: an empty chain).
func SignCheckpoint(s *Signer, chain string, head *SignedDecision, now time.Time) (*dsse.Envelope, error) {
	cp := Checkpoint{Chain: chain, Seq: 0, Head: GenesisHash, Time: now.UTC().Truncate(time.Microsecond)}
	if head != nil {
		cp.Chain, cp.Seq, cp.Head = head.Record.Chain, head.Record.Seq, head.Hash
	}
	payload, err := Canonical(cp)
	if err != nil {
		return nil, err
	}
	return s.SignDSSE(CheckpointPayloadType, payload)
}

// ParseCheckpoint reads a checkpoint envelope's payload without verifying
// its signature (Verify does; this is for showing a stored head).
func ParseCheckpoint(env *dsse.Envelope) (Checkpoint, error) {
	var cp Checkpoint
	if env == nil || env.PayloadType != CheckpointPayloadType {
		return cp, errors.New("attest: not a checkpoint envelope")
	}
	payload, err := env.DecodePayload()
	if err != nil {
		return cp, fmt.Errorf("attest: checkpoint: %w", err)
	}
	if err := strictjson.Decode(payload, &cp); err != nil {
		return cp, fmt.Errorf("attest: checkpoint: %w", err)
	}
	return cp, nil
}

// ChainError names the first bad record of a decision log.
type ChainError struct {
	// Index is the record's position in the log (0-based); Seq the seq
	// expected there.
	Index  int
	Seq    int64
	Reason string
	Err    error
}

func (e *ChainError) Error() string {
	msg := fmt.Sprintf("decision log: record %d (position %d): %s", e.Seq, e.Index, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ChainError) Unwrap() error { return e.Err }

// ChainReport says what a verified chain holds.
type ChainReport struct {
	Chain           string
	Records         int
	Seq             int64
	Head            string
	CheckpointTime  time.Time
	CheckpointKeyID string
	// KeyIDs are the keys that signed records and checkpoints, in order of
	// first use.
	KeyIDs []string
	// EarlierCheckpoints counts the superseded checkpoints checked.
	EarlierCheckpoints int
	// Warnings name signatures by keys revoked after they signed.
	Warnings []string
	// hashes[i] is record seq i+1's hash, for comparing with a published head.
	hashes []string
}

// VerifyChain checks a decision log: each record's signature by a trusted
// key, that the signed payload is the record (no field changed), seq
// continuity (nothing deleted or reordered), the hash links, and that the
// signed checkpoint names the last record (nothing cut off the end). It
// returns a *ChainError naming the first bad record.
func VerifyChain(records []Decision, envelopes []*dsse.Envelope, checkpoint *dsse.Envelope, keys *KeySet) error {
	_, err := verifyChain(records, envelopes, checkpoint, nil, keys)
	return err
}

func verifyChain(records []Decision, envelopes []*dsse.Envelope, checkpoint *dsse.Envelope, earlier []*dsse.Envelope, keys *KeySet) (*ChainReport, error) {
	report := &ChainReport{}
	lookup := func(id string) (crypto.PublicKey, bool) {
		k, ok := keys.Lookup(id)
		return k.Key, ok
	}
	// checkKeys applies each signing key's validity window to the time the
	// record or checkpoint states; a key revoked after it signed is a
	// warning, once per key.
	warned := map[string]bool{}
	checkKeys := func(ids []string, at time.Time, what string) error {
		for _, id := range ids {
			k, _ := keys.Lookup(id)
			if err := k.CheckSignedAt(at); err != nil {
				return err
			}
			if k.Status == KeyRevoked && !warned[id] {
				warned[id] = true
				report.Warnings = append(report.Warnings, fmt.Sprintf("decision log: key %s, which signed %s (dated %s), was revoked at %s (%s), after it signed",
					id, what, stamp(at), stamp(k.RevokedAt), k.RevokedReason))
			}
			if !slices.Contains(report.KeyIDs, id) {
				report.KeyIDs = append(report.KeyIDs, id)
			}
		}
		return nil
	}
	prevHash := GenesisHash
	var prevSeq int64
	chain := ""
	hashes := []string{GenesisHash} // hashes[seq] is record seq's hash
	for i, rec := range records {
		expected := prevSeq + 1
		bad := func(reason string, err error) (*ChainReport, error) {
			return nil, &ChainError{Index: i, Seq: expected, Reason: reason, Err: err}
		}
		if i >= len(envelopes) || envelopes[i] == nil {
			return bad("no signed envelope", nil)
		}
		env := envelopes[i]
		if env.PayloadType != DecisionPayloadType {
			return bad(fmt.Sprintf("envelope payload type %q", env.PayloadType), nil)
		}
		ids, payload, err := env.Verify(lookup)
		if err != nil {
			return bad("bad signature", err)
		}
		canon, err := rec.Canonical()
		if err != nil {
			return bad("unencodable record", err)
		}
		if !bytes.Equal(canon, payload) {
			return bad("changed: "+diffRecord(canon, payload), nil)
		}
		// The record is what was signed, so its time is the signed one.
		if err := checkKeys(ids, rec.Time, fmt.Sprintf("record %d", rec.Seq)); err != nil {
			return bad("signing key not valid at the record's time", err)
		}
		switch {
		case rec.Seq > expected && slices.ContainsFunc(records[i+1:], func(r Decision) bool { return r.Seq == expected }):
			return bad(fmt.Sprintf("out of order: seq %d found where seq %d belongs (records reordered)", rec.Seq, expected), nil)
		case rec.Seq > expected:
			return bad(fmt.Sprintf("missing: the log goes from seq %d to seq %d (record deleted)", prevSeq, rec.Seq), nil)
		case rec.Seq < expected:
			return bad(fmt.Sprintf("out of order: seq %d found where seq %d belongs (records reordered)", rec.Seq, expected), nil)
		}
		if rec.PrevHash != prevHash {
			return bad(fmt.Sprintf("prev_hash %s does not match the previous record's hash %s", rec.PrevHash, prevHash), nil)
		}
		if i == 0 {
			chain = rec.Chain
		} else if rec.Chain != chain {
			return bad(fmt.Sprintf("belongs to chain %q, the log is chain %q", rec.Chain, chain), nil)
		}
		prevHash = sha256Hex(canon)
		prevSeq = rec.Seq
		hashes = append(hashes, prevHash)
	}
	if len(envelopes) > len(records) {
		return nil, &ChainError{Index: len(records), Seq: prevSeq + 1, Reason: "envelope without record"}
	}

	cpErr := func(reason string, err error) (*ChainReport, error) {
		return nil, &ChainError{Index: len(records), Seq: prevSeq + 1, Reason: "checkpoint: " + reason, Err: err}
	}
	if checkpoint == nil {
		return cpErr("missing: a cut-off end of the log could not be detected", nil)
	}
	if checkpoint.PayloadType != CheckpointPayloadType {
		return cpErr(fmt.Sprintf("payload type %q", checkpoint.PayloadType), nil)
	}
	ids, payload, err := checkpoint.Verify(lookup)
	if err != nil {
		return cpErr("bad signature", err)
	}
	var cp Checkpoint
	if err := strictjson.Decode(payload, &cp); err != nil {
		return cpErr("unreadable", err)
	}
	if err := checkKeys(ids, cp.Time, "the checkpoint"); err != nil {
		return cpErr("signing key not valid at the checkpoint's time", err)
	}
	switch {
	case cp.Seq > prevSeq:
		return cpErr(fmt.Sprintf("signed head is seq %d, the log ends at seq %d (records cut off the end)", cp.Seq, prevSeq), nil)
	case cp.Seq < prevSeq:
		return nil, &ChainError{Index: int(cp.Seq), Seq: cp.Seq + 1,
			Reason: fmt.Sprintf("not covered by the checkpoint, which ends at seq %d", cp.Seq)}
	case cp.Head != prevHash:
		return cpErr(fmt.Sprintf("head %s, the last record's hash is %s", cp.Head, prevHash), nil)
	case len(records) > 0 && cp.Chain != chain:
		return cpErr(fmt.Sprintf("is for chain %q, the log is chain %q", cp.Chain, chain), nil)
	}
	report.Chain = cp.Chain
	report.Records = len(records)
	report.Seq = cp.Seq
	report.Head = cp.Head
	report.CheckpointTime = cp.Time
	report.CheckpointKeyID = ids[0]

	// Earlier checkpoints: each signed by a key valid at its time, over the
	// record the log holds at its seq, in order, none after the latest.
	last := Checkpoint{Chain: cp.Chain}
	for i, env := range earlier {
		bad := func(reason string, err error) (*ChainReport, error) {
			return nil, &ChainError{Index: len(records), Seq: prevSeq + 1, Reason: fmt.Sprintf("earlier checkpoint %d: %s", i+1, reason), Err: err}
		}
		if env == nil || env.PayloadType != CheckpointPayloadType {
			return bad("not a checkpoint envelope", nil)
		}
		ids, payload, err := env.Verify(lookup)
		if err != nil {
			return bad("bad signature", err)
		}
		var e Checkpoint
		if err := strictjson.Decode(payload, &e); err != nil {
			return bad("unreadable", err)
		}
		if err := checkKeys(ids, e.Time, fmt.Sprintf("checkpoint %d", i+1)); err != nil {
			return bad("signing key not valid at its time", err)
		}
		switch {
		case e.Chain != cp.Chain:
			return bad(fmt.Sprintf("is for chain %q, the log is chain %q", e.Chain, cp.Chain), nil)
		case e.Seq < 0 || e.Seq > prevSeq:
			return bad(fmt.Sprintf("names seq %d, the log ends at seq %d", e.Seq, prevSeq), nil)
		case e.Head != hashes[e.Seq]:
			return bad(fmt.Sprintf("head %s at seq %d, the log's record there hashes to %s (history rewritten)", e.Head, e.Seq, hashes[e.Seq]), nil)
		case e.Seq < last.Seq || e.Time.Before(last.Time) || e.Time.After(cp.Time):
			return bad("out of order", nil)
		}
		last = e
	}
	report.EarlierCheckpoints = len(earlier)
	report.hashes = hashes[1:]
	return report, nil
}

// diffRecord names the top-level fields (and evidence fields) in which a
// record differs from its signed payload.
func diffRecord(record, signed []byte) string {
	var a, b map[string]any
	if json.Unmarshal(record, &a) != nil || json.Unmarshal(signed, &b) != nil {
		return "the record is not what was signed"
	}
	var fields []string
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(a, b))) {
		if k == "evidence" {
			ea, _ := a[k].(map[string]any)
			eb, _ := b[k].(map[string]any)
			for _, ek := range slices.Sorted(maps.Keys(mergeKeys(ea, eb))) {
				if !reflect.DeepEqual(ea[ek], eb[ek]) {
					fields = append(fields, "evidence."+ek)
				}
			}
			continue
		}
		if !reflect.DeepEqual(a[k], b[k]) {
			fields = append(fields, k)
		}
	}
	if len(fields) == 0 {
		return "the record is not what was signed"
	}
	return "field " + strings.Join(fields, ", ") + " differs from the signed record"
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// DecisionLog is the exported form of a chain (one JSON document), which
// `accord verify` checks and report bundles carry as decisions.json.
type DecisionLog struct {
	Format     string             `json:"format"`
	Chain      string             `json:"chain"`
	Records    []DecisionLogEntry `json:"records"`
	Checkpoint *dsse.Envelope     `json:"checkpoint"`
	// EarlierCheckpoints are the checkpoints Checkpoint superseded, oldest
	// first: one per earlier decision, and one each time the installation
	// signed its head again with a new key (after a revocation).
	EarlierCheckpoints []*dsse.Envelope `json:"earlier_checkpoints,omitempty"`
}

// DecisionLogEntry is one record, its hash and its envelope.
type DecisionLogEntry struct {
	Record   Decision       `json:"record"`
	Hash     string         `json:"hash"`
	Envelope *dsse.Envelope `json:"envelope"`
}

// NewDecisionLog assembles an export from signed records (in seq order) and
// the checkpoint signed over the last one.
func NewDecisionLog(chain string, records []SignedDecision, checkpoint *dsse.Envelope) *DecisionLog {
	log := &DecisionLog{Format: DecisionLogFormat, Chain: chain, Records: []DecisionLogEntry{}, Checkpoint: checkpoint}
	for _, r := range records {
		log.Records = append(log.Records, DecisionLogEntry{Record: r.Record, Hash: r.Hash, Envelope: r.Envelope})
	}
	return log
}

// Marshal returns the log as indented JSON.
func (l *DecisionLog) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(l); err != nil {
		return nil, fmt.Errorf("attest: marshal decision log: %w", err)
	}
	return b.Bytes(), nil
}

// ParseDecisionLog reads an exported decision log strictly.
func ParseDecisionLog(data []byte) (*DecisionLog, error) {
	var l DecisionLog
	if err := strictjson.Decode(data, &l); err != nil {
		return nil, fmt.Errorf("attest: decision log: %w", err)
	}
	if l.Format != DecisionLogFormat {
		return nil, fmt.Errorf("attest: decision log: format %q, want %q", l.Format, DecisionLogFormat)
	}
	return &l, nil
}

// Verify checks the log's chain (VerifyChain) and that each entry's hash
// field is its record's hash.
func (l *DecisionLog) Verify(keys *KeySet) (*ChainReport, error) {
	records := make([]Decision, len(l.Records))
	envelopes := make([]*dsse.Envelope, len(l.Records))
	for i, e := range l.Records {
		records[i], envelopes[i] = e.Record, e.Envelope
	}
	report, err := verifyChain(records, envelopes, l.Checkpoint, l.EarlierCheckpoints, keys)
	if err != nil {
		return nil, err
	}
	for i, e := range l.Records {
		h, err := e.Record.Hash()
		if err != nil || h != e.Hash {
			return nil, &ChainError{Index: i, Seq: e.Record.Seq, Reason: fmt.Sprintf("hash field %s is not the record's hash %s", e.Hash, h), Err: err}
		}
	}
	if l.Chain != report.Chain {
		return nil, &ChainError{Index: 0, Seq: 1, Reason: fmt.Sprintf("the log says chain %q, its records chain %q", l.Chain, report.Chain)}
	}
	return report, nil
}

func isDecisionLog(data []byte) bool {
	var probe struct {
		Format string `json:"format"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Format == DecisionLogFormat
}

// LogHeadFormat identifies a published decision log head.
const LogHeadFormat = "accord-decision-head/v1"

// LogHead is what an installation publishes of a program's decision log so
// that a verifier online can tell an export is behind: the latest signed
// checkpoint, with its fields spelled out.
type LogHead struct {
	Format     string         `json:"format"`
	Chain      string         `json:"chain"`
	Seq        int64          `json:"seq"`
	Head       string         `json:"head"`
	Time       time.Time      `json:"time"`
	Checkpoint *dsse.Envelope `json:"checkpoint"`
}

// NewLogHead publishes a checkpoint.
func NewLogHead(checkpoint *dsse.Envelope) (*LogHead, error) {
	cp, err := ParseCheckpoint(checkpoint)
	if err != nil {
		return nil, err
	}
	return &LogHead{Format: LogHeadFormat, Chain: cp.Chain, Seq: cp.Seq, Head: cp.Head, Time: cp.Time, Checkpoint: checkpoint}, nil
}

// ParseLogHead reads a published head strictly.
func ParseLogHead(data []byte) (*LogHead, error) {
	var h LogHead
	if err := strictjson.Decode(data, &h); err != nil {
		return nil, fmt.Errorf("attest: log head: %w", err)
	}
	if h.Format != LogHeadFormat {
		return nil, fmt.Errorf("attest: log head: format %q, want %q", h.Format, LogHeadFormat)
	}
	return &h, nil
}

// Freshness is how a decision log compares with the published head.
type Freshness struct {
	LogSeq   int64
	HeadSeq  int64
	HeadTime time.Time
	// Behind counts the decisions the published head has that the log
	// does not (0: the log is current as of HeadTime).
	Behind int64
}

func (f Freshness) String() string {
	if f.Behind > 0 {
		decisions := "decisions"
		if f.Behind == 1 {
			decisions = "decision"
		}
		return fmt.Sprintf("BEHIND: the installation's log is at seq %d (signed %s); this one ends at seq %d, %d %s earlier",
			f.HeadSeq, stamp(f.HeadTime), f.LogSeq, f.Behind, decisions)
	}
	return fmt.Sprintf("current: the installation's published head (signed %s) is this log's seq %d", stamp(f.HeadTime), f.LogSeq)
}

// ErrLogBehind is returned by CompareHead when the log is older than the
// published head.
var ErrLogBehind = errors.New("the decision log is behind the published head")

// CompareHead checks a published head (its signature by a trusted key
// valid at its time, that its fields are what it signed, its chain) against
// the log this report verified, and that both tell the same history: where
// the log reaches the head's seq, its record there must hash to the head. A
// log behind the head is reported with an error wrapping ErrLogBehind.
func (r *ChainReport) CompareHead(h *LogHead, keys *KeySet) (Freshness, error) {
	var f Freshness
	lookup := func(id string) (crypto.PublicKey, bool) {
		k, ok := keys.Lookup(id)
		return k.Key, ok
	}
	if h.Checkpoint == nil {
		return f, errors.New("attest: log head: no checkpoint")
	}
	ids, payload, err := h.Checkpoint.Verify(lookup)
	if err != nil {
		return f, fmt.Errorf("attest: log head: %w", err)
	}
	var cp Checkpoint
	if err := strictjson.Decode(payload, &cp); err != nil {
		return f, fmt.Errorf("attest: log head: %w", err)
	}
	for _, id := range ids {
		k, _ := keys.Lookup(id)
		if err := k.CheckSignedAt(cp.Time); err != nil {
			return f, fmt.Errorf("attest: log head: %w", err)
		}
	}
	if cp.Chain != h.Chain || cp.Seq != h.Seq || cp.Head != h.Head || !cp.Time.Equal(h.Time) {
		return f, errors.New("attest: log head: its fields are not what its checkpoint signed")
	}
	if cp.Chain != r.Chain {
		return f, fmt.Errorf("attest: log head: for chain %q, the log is chain %q", cp.Chain, r.Chain)
	}
	f = Freshness{LogSeq: r.Seq, HeadSeq: cp.Seq, HeadTime: cp.Time}
	hash := GenesisHash
	if cp.Seq > 0 && cp.Seq <= f.LogSeq {
		hash = r.hashes[cp.Seq-1]
	}
	if cp.Seq <= f.LogSeq && hash != cp.Head {
		return f, fmt.Errorf("attest: log head: seq %d is %s at the installation, %s in this log: the histories differ", cp.Seq, cp.Head, hash)
	}
	if cp.Seq > f.LogSeq {
		f.Behind = cp.Seq - f.LogSeq
		return f, fmt.Errorf("%s: %w", f, ErrLogBehind)
	}
	return f, nil
}
