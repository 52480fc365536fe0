package demo

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// The demo's runs go through the checks every run goes through
// (runsubmit.Submit), which refuse a gate set that does not fit the
// profile: the baseline's gate set fits the local-NVMe profile, and the
// first stage's, which judges the candidate, the NVMe-oF one.
func TestDemoRunsGateSetsFitTheirProfiles(t *testing.T) {
	t.Parallel()
	lab := &Lab{slowURL: "http://127.0.0.1:1/v1", fastURL: "http://127.0.0.1:2/v1", fioTarget: "/tmp/demo/fio/kv-blocks.dat"}
	profiles := demoProfiles(lab)
	for _, c := range []struct {
		gateSet string
		profile acceptance.ProfileSpec
	}{
		{"MLPerf Inference Llama-2-70B server latency", profiles[0]},
		{demoStages[0].gateSet, profiles[1]},
	} {
		gates, ok := gateSetTemplate(c.gateSet)
		require.True(t, ok, "the %q template exists", c.gateSet)
		require.Empty(t, acceptance.ValidateGateSetForProfile(gates, c.profile), "%s on %s", c.gateSet, c.profile.Name)
	}
}

func gateSetTemplate(name string) (acceptance.GateSetSpec, bool) {
	for _, t := range acceptance.GateSetTemplates() {
		if t.Spec.Name == name {
			return t.Spec, true
		}
	}
	return acceptance.GateSetSpec{}, false
}
