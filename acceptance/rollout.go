package acceptance

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The rollout state machine: a plan of ordered stages (pilot, 10 % of
// traffic, everywhere, ...). The current stage is approved only when its
// gates pass and an approver of the vendor and one of the customer have both
// signed it off; a halt (manual or stop-loss) stops it at once. The machine
// is pure: the caller supplies the gates' outcome and the time, stores the
// accepted decisions (signed, hash-chained, in attest), and can rebuild the
// state with ReplayRollout.

// OrgKind is the side an organisation takes in a joint test program.
type OrgKind string

const (
	OrgVendor   OrgKind = "vendor"
	OrgCustomer OrgKind = "customer"
	// OrgSystem is Accord itself, recording a stop-loss found by a run's
	// evaluation; it may do nothing else.
	OrgSystem OrgKind = "system"
)

// StageState is where a stage stands.
type StageState string

const (
	StagePending          StageState = "pending"           // a later stage, not reached yet
	StageAwaitingApproval StageState = "awaiting-approval" // the current stage, collecting sign-offs
	StageApproved         StageState = "approved"          // both sides signed off; the next stage is current
	StageRejected         StageState = "rejected"          // an approver refused it; the rollout ends
	StageHalted           StageState = "halted"            // stopped by a halt or stop-loss; both sides must resume it
)

// DecisionKind is what a decision does.
type DecisionKind string

const (
	DecisionApprove           DecisionKind = "approve"
	DecisionReject            DecisionKind = "reject"
	DecisionWaive             DecisionKind = "waive"
	DecisionHalt              DecisionKind = "halt"
	DecisionStopLoss          DecisionKind = "stop-loss-triggered"
	DecisionResume            DecisionKind = "resume"
	DecisionRollbackRequested DecisionKind = "rollback-requested"
)

// DecisionKinds lists every decision kind.
var DecisionKinds = []DecisionKind{DecisionApprove, DecisionReject, DecisionWaive, DecisionHalt, DecisionStopLoss, DecisionResume, DecisionRollbackRequested}

// RolloutPlan is the ordered list of stages.
type RolloutPlan struct {
	Stages []RolloutStage `json:"stages"`
}

// RolloutStage is one stage of a plan.
type RolloutStage struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// MaxRolloutStages bounds a plan.
const MaxRolloutStages = 20

// Validate checks the plan: 1..20 stages with unique, safe names.
func (p RolloutPlan) Validate() error {
	c := &specChecker{}
	switch {
	case len(p.Stages) == 0:
		c.add("stages", "a rollout plan needs at least one stage")
	case len(p.Stages) > MaxRolloutStages:
		c.add("stages", "must have at most %d stages", MaxRolloutStages)
	}
	seen := map[string]int{}
	for i, s := range p.Stages {
		sp := specIndex("stages", i)
		c.safeName(specField(sp, "name"), s.Name, "stage")
		if j, dup := seen[s.Name]; dup && s.Name != "" {
			c.add(specField(sp, "name"), "%q is already the name of stages[%d]; stage names must be unique", s.Name, j)
		}
		seen[s.Name] = i
		c.maxLen(specField(sp, "description"), s.Description, MaxHelpLen)
	}
	if errs := c.result(); errs != nil {
		return errs
	}
	return nil
}

// Actor is who makes a decision.
type Actor struct {
	UserID  string  `json:"user_id"`
	Name    string  `json:"name,omitempty"`
	OrgID   string  `json:"org_id,omitempty"`
	OrgKind OrgKind `json:"org_kind"`
	// Approver says the user holds the approver role in the program.
	Approver bool `json:"approver"`
}

func (a Actor) label() string {
	if a.Name != "" {
		return a.Name
	}
	return a.UserID
}

// Decision is one request to change a rollout's state.
type Decision struct {
	Kind DecisionKind `json:"kind"`
	// Stage names the stage the decision is about. It must be the current
	// stage, so that a decision taken on a stale page is refused rather than
	// applied to the wrong stage. Optional for rollback-requested.
	Stage string `json:"stage,omitempty"`
	Actor Actor  `json:"actor"`
	// GatesPass is the caller's reading of the stage's gates when the
	// decision is taken (approve needs true; waive needs false).
	GatesPass bool `json:"gates_pass"`
	// Evidence names what the gates were judged on, for the record
	// ("run 42, gate set 7 v3: FAIL on read-clat-p99").
	Evidence string `json:"evidence,omitempty"`
	// Reason is the written reason: required for waive, reject, halt,
	// stop-loss-triggered, resume and rollback-requested.
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Signoff is one side's approval (or waiver) of a stage, or one side's
// consent to resume it.
type Signoff struct {
	Kind   DecisionKind `json:"kind"`
	Actor  Actor        `json:"actor"`
	Reason string       `json:"reason,omitempty"`
	At     time.Time    `json:"at"`
}

// StageStatus is the state of one stage.
type StageStatus struct {
	Name  string     `json:"name"`
	State StageState `json:"state"`
	// Attempt counts from 1 and grows by one each time the stage is resumed
	// after a halt; sign-offs belong to the current attempt.
	Attempt   int       `json:"attempt"`
	Approvals []Signoff `json:"approvals,omitempty"`
	Resumes   []Signoff `json:"resumes,omitempty"`
	// Halt is the decision that halted the stage, while it is halted.
	Halt *Decision `json:"halt,omitempty"`
	// Rejection is the decision that rejected the stage.
	Rejection *Decision `json:"rejection,omitempty"`
}

// Waived reports whether any approval of the stage was a waiver.
func (s StageStatus) Waived() bool {
	for _, a := range s.Approvals {
		if a.Kind == DecisionWaive {
			return true
		}
	}
	return false
}

// MissingSides lists the sides whose sign-off the stage still needs: to be
// approved while it awaits approval, to be resumed while it is halted.
func (s StageStatus) MissingSides() []OrgKind {
	var have []Signoff
	switch s.State {
	case StageAwaitingApproval:
		have = s.Approvals
	case StageHalted:
		have = s.Resumes
	default:
		return nil
	}
	var out []OrgKind
	for _, side := range []OrgKind{OrgVendor, OrgCustomer} {
		if signoffBySide(have, side) == nil {
			out = append(out, side)
		}
	}
	return out
}

// RolloutStatus summarises a rollout.
type RolloutStatus string

const (
	RolloutInProgress        RolloutStatus = "in-progress"
	RolloutHalted            RolloutStatus = "halted"
	RolloutComplete          RolloutStatus = "complete"
	RolloutRejected          RolloutStatus = "rejected"
	RolloutRollbackRequested RolloutStatus = "rollback-requested"
)

// RolloutState is the whole state of a rollout.
type RolloutState struct {
	Stages []StageStatus `json:"stages"`
	// Current is the index of the stage decisions apply to; it equals
	// len(Stages) once every stage is approved.
	Current int `json:"current"`
	// Rollback is the decision that requested a rollback; the rollout takes
	// no further decisions after it.
	Rollback *Decision `json:"rollback,omitempty"`
	// History lists every accepted decision, in order.
	History []Decision `json:"history,omitempty"`
}

// Status summarises the state.
func (s RolloutState) Status() RolloutStatus {
	switch {
	case s.Rollback != nil:
		return RolloutRollbackRequested
	case s.Current >= len(s.Stages):
		return RolloutComplete
	case s.Stages[s.Current].State == StageRejected:
		return RolloutRejected
	case s.Stages[s.Current].State == StageHalted:
		return RolloutHalted
	}
	return RolloutInProgress
}

// CurrentStage returns the stage decisions apply to; false once complete.
func (s RolloutState) CurrentStage() (StageStatus, bool) {
	if s.Current < 0 || s.Current >= len(s.Stages) {
		return StageStatus{}, false
	}
	return s.Stages[s.Current], true
}

// NewRollout starts a rollout: the first stage awaits approval, the others
// are pending.
func NewRollout(plan RolloutPlan) (RolloutState, error) {
	if err := plan.Validate(); err != nil {
		return RolloutState{}, fmt.Errorf("rollout plan: %w", err)
	}
	st := RolloutState{Stages: make([]StageStatus, len(plan.Stages))}
	for i, s := range plan.Stages {
		st.Stages[i] = StageStatus{Name: s.Name, State: StagePending, Attempt: 1}
	}
	st.Stages[0].State = StageAwaitingApproval
	return st, nil
}

// ErrTransitionRefused is wrapped by every error of Apply: the decision is
// not allowed in the current state, and the state is unchanged.
var ErrTransitionRefused = errors.New("decision refused")

// TransitionError says why a decision was refused, in words for the person
// who tried it.
type TransitionError struct {
	Kind    DecisionKind
	Message string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s refused: %s", e.Kind, e.Message)
}

func (e *TransitionError) Unwrap() error { return ErrTransitionRefused }

func refuse(d Decision, format string, args ...any) error {
	return &TransitionError{Kind: d.Kind, Message: fmt.Sprintf(format, args...)}
}

// MaxReasonLen bounds a written reason.
const MaxReasonLen = 4000

// Apply returns the state after the decision, or an error saying why the
// decision is refused. s is never changed.
func Apply(s RolloutState, d Decision) (RolloutState, error) {
	if err := checkDecision(d); err != nil {
		return s, err
	}
	if len(s.Stages) == 0 {
		return s, refuse(d, "the rollout has no stages")
	}
	if s.Rollback != nil {
		return s, refuse(d, "a rollback was requested by %s; the rollout takes no further decisions", s.Rollback.Actor.label())
	}
	next := s.clone()
	next.History = append(next.History, d)

	if d.Kind == DecisionRollbackRequested {
		if d.Stage != "" && next.stageIndex(d.Stage) < 0 {
			return s, refuse(d, "the rollout has no stage %q", d.Stage)
		}
		rb := d
		next.Rollback = &rb
		if st, ok := next.current(); ok && st.State == StageAwaitingApproval {
			st.State = StageHalted
			st.Halt = &rb
			st.Approvals, st.Resumes = nil, nil
		}
		return next, nil
	}

	st, ok := next.current()
	if !ok {
		return s, refuse(d, "every stage is approved; the rollout is complete (request a rollback if it must be undone)")
	}
	if d.Stage != st.Name {
		if d.Stage == "" {
			return s, refuse(d, "the decision must name the stage; the current stage is %q", st.Name)
		}
		return s, refuse(d, "the decision is about stage %q, but the current stage is %q (reload the page)", d.Stage, st.Name)
	}
	if st.State == StageRejected {
		return s, refuse(d, "stage %q was rejected by %s; the rollout has ended", st.Name, st.Rejection.Actor.label())
	}

	switch d.Kind {
	case DecisionApprove, DecisionWaive:
		if st.State == StageHalted {
			return s, refuse(d, "stage %q is halted (%s); both sides must resume it first", st.Name, st.Halt.Kind)
		}
		if d.Kind == DecisionApprove && !d.GatesPass {
			return s, refuse(d, "the gates of stage %q do not pass; approve them with a waiver and a written reason, or reject the stage", st.Name)
		}
		if d.Kind == DecisionWaive && d.GatesPass {
			return s, refuse(d, "the gates of stage %q pass; approve it instead of waiving", st.Name)
		}
		if err := checkNewSignoff(d, st.Approvals, "approved", st.Name); err != nil {
			return s, err
		}
		st.Approvals = append(st.Approvals, Signoff{Kind: d.Kind, Actor: d.Actor, Reason: d.Reason, At: d.At})
		if len(st.MissingSides()) == 0 {
			st.State = StageApproved
			next.Current++
			if n, ok := next.current(); ok {
				n.State = StageAwaitingApproval
			}
		}
	case DecisionReject:
		rj := d
		st.State = StageRejected
		st.Rejection = &rj
		st.Halt = nil
	case DecisionHalt, DecisionStopLoss:
		if st.State == StageHalted {
			return s, refuse(d, "stage %q is already halted (%s by %s)", st.Name, st.Halt.Kind, st.Halt.Actor.label())
		}
		h := d
		st.State = StageHalted
		st.Halt = &h
		// Whatever was signed before the halt no longer counts.
		st.Approvals, st.Resumes = nil, nil
	case DecisionResume:
		if st.State != StageHalted {
			return s, refuse(d, "stage %q is not halted", st.Name)
		}
		if err := checkNewSignoff(d, st.Resumes, "agreed to resume", st.Name); err != nil {
			return s, err
		}
		st.Resumes = append(st.Resumes, Signoff{Kind: d.Kind, Actor: d.Actor, Reason: d.Reason, At: d.At})
		if len(st.MissingSides()) == 0 {
			st.State = StageAwaitingApproval
			st.Attempt++
			st.Halt = nil
			st.Resumes, st.Approvals = nil, nil
		}
	}
	return next, nil
}

// checkDecision checks what does not depend on the state: the kind, the
// actor's side and role, and the written reason.
func checkDecision(d Decision) error {
	known := false
	for _, k := range DecisionKinds {
		known = known || d.Kind == k
	}
	if !known {
		return refuse(d, "%q is not a decision kind", d.Kind)
	}
	if strings.TrimSpace(d.Actor.UserID) == "" {
		return refuse(d, "the decision has no actor")
	}
	switch d.Actor.OrgKind {
	case OrgVendor, OrgCustomer:
	case OrgSystem:
		if d.Kind != DecisionStopLoss {
			return refuse(d, "only a person of the vendor or the customer may %s", d.Kind)
		}
	default:
		return refuse(d, "the actor's organisation is neither the vendor nor the customer (%q)", d.Actor.OrgKind)
	}
	switch d.Kind {
	case DecisionApprove, DecisionWaive, DecisionReject, DecisionResume, DecisionRollbackRequested:
		if !d.Actor.Approver && d.Actor.OrgKind != OrgSystem {
			return refuse(d, "%s is not an approver of this program", d.Actor.label())
		}
	}
	if d.Kind != DecisionApprove {
		if strings.TrimSpace(d.Reason) == "" {
			return refuse(d, "a %s needs a written reason", d.Kind)
		}
		return CheckReasonText(d)
	}
	return nil
}

// CheckReasonText refuses a reason (or an approval's optional comment)
// longer than MaxReasonLen characters or that is not plain text. Apply
// checks the reasons it requires; a caller recording a new approval checks
// its comment with it (replaying old records does not, so that no record
// signed before the check existed stops replaying).
func CheckReasonText(d Decision) error {
	switch {
	case utf8.RuneCountInString(d.Reason) > MaxReasonLen:
		return refuse(d, "the reason must be at most %d characters", MaxReasonLen)
	case !utf8.ValidString(d.Reason) || strings.IndexByte(d.Reason, 0) >= 0:
		return refuse(d, "the reason must be plain text")
	}
	return nil
}

// GatesStanding is how a stage's gates stand, as the caller read them
// (the machine itself takes only whether they pass).
type GatesStanding int

const (
	// GatesMet: every profile of the stage has a qualifying run judged PASS.
	GatesMet GatesStanding = iota
	// GatesNotMet: every profile has a qualifying run, and one of them is
	// not judged PASS.
	GatesNotMet
	// GatesAwaitRun: a profile has no qualifying run yet (none judged by
	// the stage's gate set, or the one chosen is unusable).
	GatesAwaitRun
)

// StageLabel names a stage's state for the people deciding on it. While
// the machine's current stage is awaiting-approval but its gates do not
// pass, no approval is possible (only a waiver): the label says what the
// stage waits for instead, a qualifying run or gates that are not met.
// Deployers keep reading the machine's own state (DeployGate.StageState).
func StageLabel(state StageState, gates GatesStanding) string {
	if state != StageAwaitingApproval {
		return string(state)
	}
	switch gates {
	case GatesAwaitRun:
		return "awaiting a qualifying run"
	case GatesNotMet:
		return "gates not met"
	}
	return "awaiting approval"
}

// checkNewSignoff refuses a second sign-off by the same person or the same
// side: two approvals from one side are not the two sides.
func checkNewSignoff(d Decision, have []Signoff, what, stage string) error {
	for _, h := range have {
		if h.Actor.UserID == d.Actor.UserID {
			return refuse(d, "%s has already %s stage %q", d.Actor.label(), what, stage)
		}
	}
	if prev := signoffBySide(have, d.Actor.OrgKind); prev != nil {
		other := OrgCustomer
		if d.Actor.OrgKind == OrgCustomer {
			other = OrgVendor
		}
		return refuse(d, "the %s side has already %s stage %q (%s); the %s side must do so too", d.Actor.OrgKind, what, stage, prev.Actor.label(), other)
	}
	return nil
}

func signoffBySide(have []Signoff, side OrgKind) *Signoff {
	for i := range have {
		if have[i].Actor.OrgKind == side {
			return &have[i]
		}
	}
	return nil
}

func (s *RolloutState) current() (*StageStatus, bool) {
	if s.Current < 0 || s.Current >= len(s.Stages) {
		return nil, false
	}
	return &s.Stages[s.Current], true
}

func (s RolloutState) stageIndex(name string) int {
	for i, st := range s.Stages {
		if st.Name == name {
			return i
		}
	}
	return -1
}

// clone deep-copies the state, so that Apply never changes its input.
func (s RolloutState) clone() RolloutState {
	out := s
	out.Stages = make([]StageStatus, len(s.Stages))
	for i, st := range s.Stages {
		st.Approvals = append([]Signoff(nil), st.Approvals...)
		st.Resumes = append([]Signoff(nil), st.Resumes...)
		if st.Halt != nil {
			h := *st.Halt
			st.Halt = &h
		}
		if st.Rejection != nil {
			r := *st.Rejection
			st.Rejection = &r
		}
		out.Stages[i] = st
	}
	if s.Rollback != nil {
		r := *s.Rollback
		out.Rollback = &r
	}
	out.History = append([]Decision(nil), s.History...)
	return out
}

// ReplayRollout rebuilds a rollout's state from its plan and its accepted
// decisions, in order; a decision that would be refused is an error.
func ReplayRollout(plan RolloutPlan, decisions []Decision) (RolloutState, error) {
	st, err := NewRollout(plan)
	if err != nil {
		return RolloutState{}, err
	}
	for i, d := range decisions {
		st, err = Apply(st, d)
		if err != nil {
			return RolloutState{}, fmt.Errorf("replay decision %d: %w", i+1, err)
		}
	}
	return st, nil
}
