package handlers

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
)

// listAction parses a form action such as "remove:steps:2".
func listAction(action string) (verb, list string, index int) {
	parts := strings.Split(action, ":")
	if len(parts) < 2 {
		return action, "", -1
	}
	index = -1
	if len(parts) == 3 {
		if n, err := strconv.Atoi(parts[2]); err == nil {
			index = n
		}
	}
	return parts[0], parts[1], index
}

// moveInSlice applies remove/up to a slice, ignoring bad indexes.
func moveInSlice[E any](items []E, verb string, i int) []E {
	if i < 0 || i >= len(items) {
		return items
	}
	switch verb {
	case "remove":
		return append(items[:i:i], items[i+1:]...)
	case "up":
		if i > 0 {
			items[i-1], items[i] = items[i], items[i-1]
		}
	}
	return items
}

// editProfile adds, removes or moves steps.
func editProfile(p *acceptance.ProfileSpec, action string, form url.Values) {
	verb, list, i := listAction(action)
	if list != "steps" {
		return
	}
	if verb == "add" {
		kind := acceptance.StepKind(form.Get("_add_kind"))
		p.Steps = append(p.Steps, newStep(kind, len(p.Steps)+1))
		return
	}
	p.Steps = moveInSlice(p.Steps, verb, i)
}

// newStep is a new step of a kind with sensible starting values.
func newStep(kind acceptance.StepKind, n int) acceptance.StepSpec {
	s := acceptance.StepSpec{Name: fmt.Sprintf("step-%d", n), Kind: kind}
	switch kind {
	case acceptance.StepFio:
		s.Fio = &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 32, NumJobs: 4, Size: 1 << 30,
			Runtime: acceptance.Duration(60e9), IOEngine: "libaio", Direct: true, Target: "/var/tmp/accord-fio.dat"}
	case acceptance.StepInference:
		s.Inference = &acceptance.InferenceStep{Endpoint: acceptance.EmulatorEndpoint, Model: acceptance.EmulatorModel, API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 512}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 64},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 8}, Duration: acceptance.Duration(60e9)}
	case acceptance.StepCommand:
		s.Command = &acceptance.CommandStep{Program: "/usr/bin/true", Format: "text"}
	case acceptance.StepPause:
		s.Pause = &acceptance.PauseStep{Duration: acceptance.Duration(10e9)}
	case acceptance.StepFault:
		s.Fault = &acceptance.FaultStep{Action: "netem", Interface: "eth0", Delay: acceptance.Duration(5e6), Duration: acceptance.Duration(30e9)}
	case acceptance.StepGPUPath:
		s.GPUPath = &acceptance.GPUPathStep{Target: "/var/tmp/accord-fio.dat", BlockSize: 1 << 20, Size: 1 << 30}
	}
	return s
}

// editGateSet adds, removes or moves criteria.
func editGateSet(g *acceptance.GateSetSpec, action string, form url.Values) {
	verb, list, i := listAction(action)
	if list != "criteria" {
		return
	}
	if verb == "add" {
		g.Criteria = append(g.Criteria, acceptance.Criterion{
			Name: fmt.Sprintf("criterion-%d", len(g.Criteria)+1), Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP99,
			Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "ms", Severity: acceptance.Blocking,
		})
		return
	}
	g.Criteria = moveInSlice(g.Criteria, verb, i)
}
