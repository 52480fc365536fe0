package acceptance

import (
	"slices"
	"time"
)

// Defaults filled by Normalize. A saved version is always normalized, so
// what it means does not depend on the defaults of the build that reads it.
const (
	DefaultRepetitions         = 3
	DefaultIOEngine            = IOEngineLibaio
	DefaultRWMixRead           = 50 // fio's own default
	DefaultAPI                 = APIChat
	DefaultArrival             = ArrivalConstant
	DefaultDist                = DistFixed
	DefaultRequestTimeout      = Duration(10 * time.Minute)
	DefaultConfidence          = 0.95
	DefaultCorrection          = CorrectionHolm
	DefaultStopLossConsecutive = 3
)

// Clone returns a deep copy: changing the copy's steps never changes p.
func (p ProfileSpec) Clone() ProfileSpec {
	out := p
	if p.Steps != nil {
		out.Steps = make([]StepSpec, len(p.Steps))
		for i, s := range p.Steps {
			out.Steps[i] = s.Clone()
		}
	}
	if p.Telemetry != nil {
		t := *p.Telemetry
		t.Exporters = nil
		for _, e := range p.Telemetry.Exporters {
			if e.Mapping != nil {
				m := *e.Mapping
				for _, list := range []*[]ExporterSeries{&m.Util, &m.MemUsed, &m.MemBW, &m.Power} {
					if *list != nil {
						*list = append([]ExporterSeries(nil), *list...)
					}
				}
				e.Mapping = &m
			}
			t.Exporters = append(t.Exporters, e)
		}
		out.Telemetry = &t
	}
	if p.Roles != nil {
		out.Roles = make([]RoleSpec, len(p.Roles))
		for i, r := range p.Roles {
			r.Steps = slices.Clone(r.Steps)
			out.Roles[i] = r
		}
	}
	return out
}

// Clone returns a deep copy of the step.
func (s StepSpec) Clone() StepSpec {
	out := s
	if s.Fio != nil {
		f := *s.Fio
		out.Fio = &f
	}
	if s.Inference != nil {
		in := *s.Inference
		if in.Prefix != nil {
			pr := *in.Prefix
			pr.Sweep = slices.Clone(pr.Sweep)
			in.Prefix = &pr
		}
		if in.Load.Sweep != nil {
			in.Load.Sweep = append([]float64(nil), in.Load.Sweep...)
		}
		out.Inference = &in
	}
	if s.Command != nil {
		c := *s.Command
		if c.Args != nil {
			c.Args = append([]string(nil), c.Args...)
		}
		out.Command = &c
	}
	if s.Pause != nil {
		pa := *s.Pause
		out.Pause = &pa
	}
	if s.Fault != nil {
		fa := *s.Fault
		out.Fault = &fa
	}
	return out
}

// Clone returns a deep copy of the gate set.
func (g GateSetSpec) Clone() GateSetSpec {
	out := g
	if g.Criteria != nil {
		out.Criteria = make([]Criterion, len(g.Criteria))
		for i, c := range g.Criteria {
			if c.StopLoss != nil {
				v := *c.StopLoss
				c.StopLoss = &v
			}
			out.Criteria[i] = c
		}
	}
	return out
}

// Normalized returns a deep copy of p with every default filled in and empty
// lists made nil, so that two specs that mean the same encode the same.
// It never changes p, and Normalized of a normalized spec is itself.
func (p ProfileSpec) Normalized() ProfileSpec {
	out := p.Clone()
	if out.SchemaVersion == 0 {
		out.SchemaVersion = ProfileSchemaVersion
	}
	if out.Repetitions == 0 {
		out.Repetitions = DefaultRepetitions
	}
	if len(out.Steps) == 0 {
		out.Steps = nil
	}
	for i := range out.Steps {
		normalizeStep(&out.Steps[i])
	}
	if len(out.Roles) == 0 {
		out.Roles = nil
	}
	// A telemetry block without exporters says nothing (a form posts one).
	if out.Telemetry != nil && len(out.Telemetry.Exporters) == 0 {
		out.Telemetry = nil
	}
	return out
}

// Normalize fills p's defaults in place (see Normalized).
func (p *ProfileSpec) Normalize() { *p = p.Normalized() }

func normalizeStep(s *StepSpec) {
	if f := s.Fio; f != nil {
		if f.IOEngine == "" {
			f.IOEngine = DefaultIOEngine
		}
		if f.IODepth == 0 {
			f.IODepth = 1
		}
		if f.NumJobs == 0 {
			f.NumJobs = 1
		}
		if f.RWMixRead == 0 && RWIsMixed(f.RW) {
			f.RWMixRead = DefaultRWMixRead
		}
	}
	if in := s.Inference; in != nil {
		if in.API == "" {
			in.API = DefaultAPI
		}
		normalizeTokens(&in.PromptTokens)
		normalizeTokens(&in.OutputTokens)
		l := &in.Load
		if l.Mode == "" {
			// Only fill the mode when the rest says which one is meant.
			if l.Rate > 0 && l.Concurrency == 0 {
				l.Mode = LoadRate
			} else if l.Rate == 0 {
				l.Mode = LoadConcurrency
			}
		}
		if l.Mode == LoadRate && l.Arrival == "" {
			l.Arrival = DefaultArrival
		}
		if len(l.Sweep) == 0 {
			l.Sweep = nil
		}
		if in.Prefix != nil && len(in.Prefix.Sweep) == 0 {
			in.Prefix.Sweep = nil
		}
		if in.RequestTimeout == 0 {
			in.RequestTimeout = DefaultRequestTimeout
		}
	}
	if c := s.Command; c != nil && len(c.Args) == 0 {
		c.Args = nil
	}
}

func normalizeTokens(t *TokenDist) {
	if t.Dist == "" && (t.Mean != 0 || t.Min != 0 || t.Max != 0 || t.StdDev != 0) {
		t.Dist = DefaultDist
	}
	if t.Dist == DistUniform && t.Mean == 0 && t.Min > 0 && t.Max >= t.Min {
		t.Mean = t.Min + (t.Max-t.Min)/2
	}
}

// Normalized returns a deep copy of g with every default filled in.
func (g GateSetSpec) Normalized() GateSetSpec {
	out := g.Clone()
	if out.SchemaVersion == 0 {
		out.SchemaVersion = GateSchemaVersion
	}
	if out.Correction == "" {
		out.Correction = DefaultCorrection
	}
	if out.StopLossConsecutive == 0 {
		out.StopLossConsecutive = DefaultStopLossConsecutive
	}
	if len(out.Criteria) == 0 {
		out.Criteria = nil
	}
	for i := range out.Criteria {
		c := &out.Criteria[i]
		if c.Mode == "" {
			c.Mode = Absolute
		}
		if c.Severity == "" {
			c.Severity = Blocking
		}
		if c.Confidence == 0 {
			c.Confidence = DefaultConfidence
		}
		if c.Unit == "" {
			switch c.Mode {
			case Relative, Isolation, Drift:
				c.Unit = "%"
			case Absolute:
				if m, ok := LookupMetric(c.Metric); ok {
					c.Unit = string(m.Unit)
				}
			}
		}
	}
	return out
}

// Normalize fills g's defaults in place (see Normalized).
func (g *GateSetSpec) Normalize() { *g = g.Normalized() }
