package acceptance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func rolesProfile() ProfileSpec {
	pause := func(name, group string) StepSpec {
		return StepSpec{Name: name, Kind: StepPause, Group: group, Pause: &PauseStep{Duration: Duration(time.Second)}}
	}
	return ProfileSpec{
		Name: "roles", Purpose: PurposeCustom, Storage: Storage{Transport: TransportLocalNVMe},
		Steps: []StepSpec{pause("quiet", ""), {Name: "victim", Kind: StepCommand, Group: "noisy", Command: &CommandStep{Program: "true", Format: FormatText}},
			pause("aggressor", "noisy"), pause("cool", "")},
		Roles: []RoleSpec{{Name: "victim", Steps: []string{"quiet", "victim", "cool"}}, {Name: "aggressor", Steps: []string{"aggressor", "cool"}, MinHosts: 2, MaxHosts: 4}},
	}.Normalized()
}

func TestRolesAndGroupsValidate(t *testing.T) {
	t.Parallel()
	require.Empty(t, ValidateProfile(rolesProfile()))
	p := rolesProfile()
	require.True(t, p.MultiHost())
	require.Equal(t, []Phase{{Steps: []int{0}}, {Steps: []int{1, 2}, Group: "noisy"}, {Steps: []int{3}}}, p.Phases())
	require.Equal(t, "victim (1 or more hosts), aggressor (2–4 hosts)", p.RoleList())
	require.Equal(t, []string{"victim", "aggressor"}, p.StepRoles("cool"))

	cases := []struct {
		name string
		edit func(p *ProfileSpec)
		path string
		text string
	}{
		{"a step no role runs", func(p *ProfileSpec) {
			p.Roles[1].Steps = []string{"aggressor"}
			p.Roles[0].Steps = []string{"quiet", "victim"}
		}, "steps[3].name", "run by no role"},
		{"a role naming no step", func(p *ProfileSpec) { p.Roles[0].Steps = append(p.Roles[0].Steps, "nosuch") }, "roles[0].steps[3]", "names no step"},
		{"a role with no steps", func(p *ProfileSpec) { p.Roles = append(p.Roles, RoleSpec{Name: "idle"}) }, "roles[2].steps", "at least one step"},
		{"two roles of one name", func(p *ProfileSpec) { p.Roles[1].Name = "victim" }, "roles[1].name", "already the name"},
		{"a bad role name", func(p *ProfileSpec) { p.Roles[1].Name = "a b" }, "roles[1].name", "letters, digits"},
		{"max below min", func(p *ProfileSpec) { p.Roles[1].MaxHosts = 1 }, "roles[1].max_hosts", "at least min_hosts (2)"},
		{"too many hosts", func(p *ProfileSpec) { p.Roles[1].MinHosts = 64 }, "roles", "more than a run's 64"},
		{"a step listed twice", func(p *ProfileSpec) { p.Roles[1].Steps = append(p.Roles[1].Steps, "cool") }, "roles[1].steps[2]", "listed twice"},
		{"a group apart", func(p *ProfileSpec) { p.Steps[2].Group, p.Steps[3].Group = "", "noisy" }, "steps[3].group", "next to each other"},
		{"a group of one", func(p *ProfileSpec) { p.Steps[2].Group = "" }, "steps[1].group", "needs at least two"},
		{"a drop-caches in a group", func(p *ProfileSpec) {
			p.Steps[2] = StepSpec{Name: "aggressor", Kind: StepDropCaches, Group: "noisy"}
		}, "steps[2].group", "cannot run in a parallel group"},
	}
	for _, tc := range cases {
		p := rolesProfile()
		tc.edit(&p)
		errs := ValidateProfile(p)
		require.NotEmpty(t, firstContaining(errs.Messages(tc.path), tc.text), "%s: %v", tc.name, errs)
	}

	// A fault during a step runs on that step's hosts only.
	p = rolesProfile()
	p.Steps = append(p.Steps[:1], append([]StepSpec{{Name: "slow", Kind: StepFault, Fault: &FaultStep{Action: FaultRateLimit, Interface: "eth0", RateMbit: 100,
		Duration: Duration(time.Second), During: "victim"}}}, p.Steps[1:]...)...)
	p.Roles[1].Steps = append(p.Roles[1].Steps, "slow")
	errs := ValidateProfile(p)
	require.NotEmpty(t, firstContaining(errs.Messages("steps[1].fault.during"), "role aggressor runs this fault but not step"), "%v", errs)
	p.Roles[1].Steps = p.Roles[1].Steps[:len(p.Roles[1].Steps)-1]
	p.Roles[0].Steps = append(p.Roles[0].Steps, "slow")
	require.Empty(t, ValidateProfile(p))
	require.Len(t, p.Phases(), 3, "a fault during a step is no phase of its own")
}

func firstContaining(msgs []string, text string) string {
	for _, m := range msgs {
		if strings.Contains(m, text) {
			return m
		}
	}
	return ""
}

// A profile with roles is normalized, encoded and read back the same;
// one without is unchanged by the roles field (its digest stays).
func TestRolesRoundTrip(t *testing.T) {
	t.Parallel()
	p := rolesProfile()
	y, err := ExportProfileYAML(p)
	require.NoError(t, err)
	back, err := ImportProfileYAML(y)
	require.NoError(t, err)
	require.Equal(t, p, back)
	c := p.Clone()
	c.Roles[0].Steps[0] = "changed"
	require.Equal(t, "quiet", p.Roles[0].Steps[0], "Clone copies the roles")
}
