package acceptance

import (
	"fmt"
	"slices"
	"strings"
)

// A profile with roles runs across several lab hosts: a run names hosts
// for every role, each host of a role runs that role's steps, and every
// host goes through the profile's phases together (Phases): the probes
// wait at a barrier before each phase (and before each load level of an
// inference step alone in its phase) until the server releases all of
// them at once. A host with nothing to do in a phase waits for the next.

// RoleSpec is one part of a multi-host run, played by one or more hosts.
type RoleSpec struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Steps are the names of the profile's steps every host of the role
	// runs; a step may belong to several roles.
	Steps []string `json:"steps" yaml:"steps,flow"`
	// MinHosts and MaxHosts bound how many hosts a run may give the role
	// (MinHosts defaults to 1; MaxHosts 0 means up to MaxRunHosts).
	MinHosts int `json:"min_hosts,omitempty" yaml:"min_hosts,omitempty"`
	MaxHosts int `json:"max_hosts,omitempty" yaml:"max_hosts,omitempty"`
}

// MaxRunHosts bounds the hosts of one run (every role together).
const MaxRunHosts = 64

// MaxRoles bounds the roles of a profile.
const MaxRoles = 16

// MultiHost reports whether the profile runs across hosts by role.
func (p ProfileSpec) MultiHost() bool { return len(p.Roles) > 0 }

// Role returns the role of that name.
func (p ProfileSpec) Role(name string) (RoleSpec, bool) {
	for _, r := range p.Roles {
		if r.Name == name {
			return r, true
		}
	}
	return RoleSpec{}, false
}

// RunsStep reports whether the role's hosts run the step.
func (r RoleSpec) RunsStep(step string) bool { return slices.Contains(r.Steps, step) }

// HostLimits returns the role's bounds on its hosts, defaults applied.
func (r RoleSpec) HostLimits() (lo, hi int) {
	lo, hi = max(r.MinHosts, 1), r.MaxHosts
	if hi == 0 {
		hi = MaxRunHosts
	}
	return lo, hi
}

// ForRole is the profile as one host of the role runs it: the role's
// steps only (the whole profile when it has no such role).
func (p ProfileSpec) ForRole(role string) ProfileSpec {
	r, ok := p.Role(role)
	if !ok {
		return p
	}
	out := p.Clone()
	out.Steps = nil
	for _, s := range p.Steps {
		if r.RunsStep(s.Name) {
			out.Steps = append(out.Steps, s.Clone())
		}
	}
	return out
}

// StepRoles returns the roles that run the step (nil for a one-host profile).
func (p ProfileSpec) StepRoles(step string) []string {
	var out []string
	for _, r := range p.Roles {
		if r.RunsStep(step) {
			out = append(out, r.Name)
		}
	}
	return out
}

// Phase is a stretch of a repetition that every host of a run starts
// together: one step, or a parallel group of steps.
type Phase struct {
	// Steps are indexes into the profile's steps, in profile order.
	Steps []int
	// Group is the parallel group's name ("" for a step on its own).
	Group string
}

// Phases splits the profile's steps into phases, in order. A fault that
// runs during a later step belongs to no phase: it starts with that step.
func (p ProfileSpec) Phases() []Phase {
	var out []Phase
	for i, s := range p.Steps {
		if s.Kind == StepFault && s.Fault != nil && s.Fault.During != "" {
			continue
		}
		if s.Group != "" && len(out) > 0 && out[len(out)-1].Group == s.Group {
			last := &out[len(out)-1]
			last.Steps = append(last.Steps, i)
			continue
		}
		out = append(out, Phase{Steps: []int{i}, Group: s.Group})
	}
	return out
}

// groupKinds are the steps a parallel group may hold: the ones that run
// for a while on their own (a fault overlaps a step with during instead).
func groupKind(k StepKind) bool {
	return IsLoadStep(k) || k == StepPause || k == StepGPUPath
}

// validateGroups checks parallel groups: a group's steps are next to each
// other, there are at least two of them, and each is a kind that can run
// beside others.
func validateGroups(c *specChecker, p ProfileSpec) {
	seen := map[string]int{} // group → index of the step that ended its run of steps
	count := map[string]int{}
	first := map[string]int{}
	prev := ""
	for i, s := range p.Steps {
		sp := specIndex("steps", i)
		g := s.Group
		if g == "" {
			prev = ""
			continue
		}
		c.safeName(specField(sp, "group"), g, "group")
		if end, ok := seen[g]; ok && prev != g {
			c.add(specField(sp, "group"), "the steps of group %q must be next to each other (steps[%d] ended it)", g, end)
		}
		if _, ok := first[g]; !ok {
			first[g] = i
		}
		count[g]++
		seen[g] = i
		prev = g
		if s.Kind != "" && !groupKind(s.Kind) {
			c.add(specField(sp, "group"), "a %s step cannot run in a parallel group (fio, inference, command, gpu-path and pause steps can; a fault overlaps a step with during)", s.Kind)
		}
	}
	for g, n := range count {
		if n < 2 {
			c.add(specField(specIndex("steps", first[g]), "group"), "group %q has one step: a parallel group needs at least two (leave group empty for a step on its own)", g)
		}
	}
}

// validateRoles checks a profile's roles against its steps.
func validateRoles(c *specChecker, p ProfileSpec, names map[string]int) {
	if len(p.Roles) == 0 {
		return
	}
	if len(p.Roles) > MaxRoles {
		c.add("roles", "must have at most %d roles", MaxRoles)
	}
	seen := map[string]int{}
	minTotal := 0
	for i, r := range p.Roles {
		rp := specIndex("roles", i)
		c.safeName(specField(rp, "name"), r.Name, "role")
		if j, dup := seen[r.Name]; dup && r.Name != "" {
			c.add(specField(rp, "name"), "%q is already the name of roles[%d]; role names must be unique", r.Name, j)
		} else {
			seen[r.Name] = i
		}
		c.maxLen(specField(rp, "description"), r.Description, MaxDescriptionLen)
		if len(r.Steps) == 0 {
			c.add(specField(rp, "steps"), "a role needs at least one step to run")
		}
		inRole := map[string]bool{}
		for k, name := range r.Steps {
			sp := specIndex(specField(rp, "steps"), k)
			if _, ok := names[name]; !ok {
				c.add(sp, "names no step of this profile (%q)", name)
			}
			if inRole[name] {
				c.add(sp, "%q is listed twice", name)
			}
			inRole[name] = true
		}
		c.intRange(specField(rp, "min_hosts"), r.MinHosts, 0, MaxRunHosts)
		c.intRange(specField(rp, "max_hosts"), r.MaxHosts, 0, MaxRunHosts)
		if r.MaxHosts > 0 && r.MaxHosts < max(r.MinHosts, 1) {
			c.add(specField(rp, "max_hosts"), "must be at least min_hosts (%d)", max(r.MinHosts, 1))
		}
		minTotal += max(r.MinHosts, 1)
	}
	if minTotal > MaxRunHosts {
		c.add("roles", "the roles need %d hosts together, more than a run's %d", minTotal, MaxRunHosts)
	}
	for i, s := range p.Steps {
		if s.Name == "" {
			continue
		}
		roles := p.StepRoles(s.Name)
		if len(roles) == 0 {
			c.add(specField(specIndex("steps", i), "name"), "step %q is run by no role: list it in the steps of a role", s.Name)
			continue
		}
		// A fault during a step runs on the hosts that run that step.
		if s.Kind == StepFault && s.Fault != nil && s.Fault.During != "" {
			target := p.StepRoles(s.Fault.During)
			for _, r := range roles {
				if !slices.Contains(target, r) {
					c.add(specField(specIndex("steps", i), "fault.during"), "role %s runs this fault but not step %q, which it overlaps", r, s.Fault.During)
				}
			}
		}
	}
}

// LimitsText says how many hosts the role takes: "1 host", "2–4 hosts",
// "2 or more hosts".
func (r RoleSpec) LimitsText() string {
	lo, hi := r.HostLimits()
	switch {
	case lo == hi && lo == 1:
		return "1 host"
	case lo == hi:
		return fmt.Sprintf("%d hosts", lo)
	case hi == MaxRunHosts:
		return fmt.Sprintf("%d or more hosts", lo)
	}
	return fmt.Sprintf("%d–%d hosts", lo, hi)
}

// RoleList names the roles for messages: "clients (2–4 hosts), aggressor (1 host)".
func (p ProfileSpec) RoleList() string {
	parts := make([]string, 0, len(p.Roles))
	for _, r := range p.Roles {
		parts = append(parts, r.Name+" ("+r.LimitsText()+")")
	}
	return strings.Join(parts, ", ")
}
