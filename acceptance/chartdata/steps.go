package chartdata

import (
	"cmp"
	"slices"
	"time"
)

// StepRun is one step result of a run folder (a step, at a level, in a
// repetition), placed on the run's clock.
type StepRun struct {
	Step, Level       string
	Repetition, Index int
	// Start is when the step started (zero when unknown).
	Start time.Time
	// Failed: the step failed on the host; its level is not charted.
	Failed bool
	// Offset is Start in seconds from the run's first step start (set by
	// OrderSteps): a record's time on the step's clock plus Offset is its
	// time on the run's clock.
	Offset float64
	// Dir and Format are the caller's: where the step's records are and
	// in what format (chartdata reads no file).
	Dir, Format string
}

// OrderSteps orders step results by start (then repetition and index)
// and sets their offsets from the first start.
func OrderSteps(steps []StepRun) {
	slices.SortStableFunc(steps, func(a, b StepRun) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Repetition, b.Repetition), cmp.Compare(a.Index, b.Index))
	})
	var origin time.Time
	for _, r := range steps {
		if !r.Start.IsZero() && (origin.IsZero() || r.Start.Before(origin)) {
			origin = r.Start
		}
	}
	for i := range steps {
		if !steps[i].Start.IsZero() {
			steps[i].Offset = steps[i].Start.Sub(origin).Seconds()
		}
	}
}
