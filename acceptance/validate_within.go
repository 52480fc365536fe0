package acceptance

import (
	"fmt"
	"slices"
	"time"
)

// MaxDriftWindow bounds a drift criterion's window (a week, as the
// longest run the charts keep).
const MaxDriftWindow = 7 * 24 * time.Hour

// validateWithinRun checks what isolation and drift criteria need on their
// own: isolation names the victim under interference (step) and alone
// (reference), drift a window; neither has a stop-loss line (they compare
// stretches of the finished run, which interim windows cannot).
func validateWithinRun(c *specChecker, cp string, cr Criterion, m Metric) {
	if cr.Mode != Isolation && cr.Reference != "" {
		c.add(specField(cp, "reference"), "applies to isolation criteria only (the victim measured alone)")
	}
	if cr.Mode != Drift && cr.Window != 0 {
		c.add(specField(cp, "window"), "applies to drift criteria only")
	}
	if !cr.Mode.WithinRun() {
		return
	}
	if cr.StopLoss != nil {
		c.add(specField(cp, "stop_loss"), "a criterion of mode %s compares stretches of the finished run and has no stop-loss line: use an absolute or relative criterion for one", cr.Mode)
	}
	switch cr.Mode {
	case Isolation:
		if cr.Step == "" {
			c.add(specField(cp, "step"), "is required for isolation: the victim step measured beside the aggressor (in a parallel group)")
		}
		switch {
		case cr.Reference == "":
			c.add(specField(cp, "reference"), "is required for isolation: the same victim measured alone, a step on its own")
		case cr.Reference == cr.Step:
			c.add(specField(cp, "reference"), "must be another step than step: the victim alone, not beside the aggressor")
		default:
			c.safeName(specField(cp, "reference"), cr.Reference, "step")
		}
		if m.Kind == KindRate && RunProduces(m.ID) {
			c.add(specField(cp, "metric"), "%s is measured over the whole run, not by a step, so it cannot be compared between two steps", m.ID)
		}
	case Drift:
		switch d := cr.Window.D(); {
		case d <= 0:
			c.add(specField(cp, "window"), "is required for drift: the length of the first and of the last window compared, like 1h")
		case d%time.Second != 0:
			c.add(specField(cp, "window"), "must be whole seconds (request send times are kept to the second)")
		case d > MaxDriftWindow:
			c.add(specField(cp, "window"), "must be at most %s", Duration(MaxDriftWindow))
		}
		if m.Kind == KindRate || m.Group != GroupInference {
			c.add(specField(cp, "metric"), "drift compares requests sent early and late in a step: it needs a per-request latency of an inference step (such as ttft, tpot or e2el), not %s", m.ID)
		}
	}
}

// validateIsolationSteps checks an isolation criterion against the
// profile: both steps exist, are of the same kind and produce the metric
// at the same load levels, the reference runs alone (a phase of its own,
// no fault during it) and the victim runs in a parallel group beside at
// least one other step.
func validateIsolationSteps(c *specChecker, cp string, cr Criterion, p ProfileSpec) {
	victim, ref := indexOfStep(p, cr.Step), indexOfStep(p, cr.Reference)
	if victim < 0 {
		c.add(specField(cp, "step"), "the profile %q has no step named %q", p.Name, cr.Step)
	}
	if ref < 0 {
		c.add(specField(cp, "reference"), "the profile %q has no step named %q", p.Name, cr.Reference)
	}
	if victim < 0 || ref < 0 {
		return
	}
	vs, rs := p.Steps[victim], p.Steps[ref]
	if vs.Kind != rs.Kind {
		c.add(specField(cp, "reference"), "step %q is a %s step and %q a %s step: the victim alone and beside the aggressor must be the same kind of step", cr.Reference, rs.Kind, cr.Step, vs.Kind)
		return
	}
	if !StepProduces(vs, cr.Metric) {
		c.add(specField(cp, "step"), "step %q (%s) does not produce %s", cr.Step, vs.Kind, cr.Metric)
	}
	if lv, lr := StepLevels(vs), StepLevels(rs); !slices.Equal(lv, lr) {
		c.add(specField(cp, "reference"), "steps %q and %q run different load levels (%v and %v): the victim must be measured at the same load alone and beside the aggressor", cr.Step, cr.Reference, lv, lr)
	}
	phases := p.Phases()
	phaseOf := func(i int) Phase {
		for _, ph := range phases {
			if slices.Contains(ph.Steps, i) {
				return ph
			}
		}
		return Phase{}
	}
	if ph := phaseOf(ref); len(ph.Steps) != 1 {
		c.add(specField(cp, "reference"), "step %q runs in parallel group %q: the victim alone must be a step on its own", cr.Reference, ph.Group)
	} else if f := faultDuring(p, cr.Reference); f != "" {
		c.add(specField(cp, "reference"), "fault %q runs during step %q, so it is not the victim alone", f, cr.Reference)
	}
	if ph := phaseOf(victim); len(ph.Steps) < 2 {
		c.add(specField(cp, "step"), "step %q runs on its own: the victim under interference must be in a parallel group beside the aggressor (group)", cr.Step)
	}
}

// faultDuring names a fault step that overlaps the step, or "".
func faultDuring(p ProfileSpec, step string) string {
	for _, s := range p.Steps {
		if s.Kind == StepFault && s.Fault != nil && s.Fault.During == step {
			return s.Name
		}
	}
	return ""
}

// validateDriftSteps checks a drift criterion against the profile: its
// step (or, without one, some step) is an inference step producing the
// metric, whose request records say when each request was sent.
func validateDriftSteps(c *specChecker, cp string, cr Criterion, p ProfileSpec) {
	if cr.Step != "" {
		j := indexOfStep(p, cr.Step)
		switch {
		case j < 0:
			c.add(specField(cp, "step"), "the profile %q has no step named %q", p.Name, cr.Step)
		case p.Steps[j].Kind != StepInference || !StepProduces(p.Steps[j], cr.Metric):
			c.add(specField(cp, "step"), "step %q (%s) does not send requests whose %s the probe records with their send times: drift needs an inference step", cr.Step, p.Steps[j].Kind, cr.Metric)
		}
		return
	}
	for _, s := range p.Steps {
		if s.Kind == StepInference && StepProduces(s, cr.Metric) {
			return
		}
	}
	c.add(specField(cp, "metric"), "no inference step of the profile %q produces %s", p.Name, cr.Metric)
}

// withinRunText is the part of a rule that says what an isolation or drift
// criterion compares.
func withinRunText(c Criterion) string {
	switch c.Mode {
	case Isolation:
		return fmt.Sprintf(" (step %s beside the aggressor against step %s alone)", c.Step, c.Reference)
	case Drift:
		return fmt.Sprintf(" (last %s against first %s)", c.Window, c.Window)
	}
	return ""
}
