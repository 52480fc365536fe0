package runsubmit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// requestedHosts checks the hosts a request names: one pinned host of the
// program for a one-host profile; for a profile with roles, hosts for
// every role within its bounds, each pinned and named once. Problems go
// into errs (field "host", "roles" or "roles.ROLE"); the hosts are
// returned in run order (roles in the profile's order), with the run's
// host rows for a multi-host profile (nil otherwise).
func requestedHosts(ctx context.Context, st *store.Store, req Request, profile acceptance.ProfileSpec, errs map[string]string) ([]store.Host, []store.NewRunHost, error) {
	if !profile.MultiHost() {
		return singleHost(ctx, st, req, profile, errs)
	}
	if req.HostID != 0 {
		errs["host"] = "This profile runs on several hosts by role (" + profile.RoleList() + "): name the hosts of each role (roles), not one host."
	}
	for name := range req.Roles {
		if _, ok := profile.Role(name); !ok {
			errs["roles."+name] = fmt.Sprintf("The profile has no role %q; its roles are %s.", name, profile.RoleList())
		}
	}
	var hosts []store.Host
	var runHosts []store.NewRunHost
	seen := map[int64]string{}
	for _, role := range profile.Roles {
		field := "roles." + role.Name
		ids := req.Roles[role.Name]
		if problem := roleCountProblem(role, len(ids)); problem != "" {
			errs[field] = problem
		}
		for _, id := range ids {
			if other, dup := seen[id]; dup {
				errs[field] = fmt.Sprintf("Host %d is chosen twice (also for role %s): a host plays one part in a run.", id, other)
				continue
			}
			seen[id] = role.Name
			h, ok, err := pinnedHost(ctx, st, req.ProgramID, field, id, errs)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				if problem := writeProblem(profile.ForRole(role.Name), h); problem != "" && errs[field] == "" {
					errs[field] = problem
				}
				hosts = append(hosts, h)
				runHosts = append(runHosts, store.NewRunHost{Role: role.Name, HostID: h.ID})
			}
		}
	}
	if len(seen) > acceptance.MaxRunHosts {
		errs["roles"] = fmt.Sprintf("A run takes at most %d hosts; %d are chosen.", acceptance.MaxRunHosts, len(seen))
	}
	return hosts, runHosts, nil
}

// singleHost checks the host of a one-host profile.
func singleHost(ctx context.Context, st *store.Store, req Request, profile acceptance.ProfileSpec, errs map[string]string) ([]store.Host, []store.NewRunHost, error) {
	if len(req.Roles) > 0 {
		errs["roles"] = "This profile runs on one host: choose it as the host, without roles."
	}
	h, err := st.GetHost(ctx, req.ProgramID, req.HostID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		errs["host"] = "Choose a lab host of this program."
	case err != nil:
		return nil, nil, err
	case !h.Pinned():
		errs["host"] = "Confirm this host's key first (scan it on the host's page)."
	default:
		if problem := writeProblem(profile, h); problem != "" {
			errs["host"] = problem
		}
		return []store.Host{h}, nil, nil
	}
	return nil, nil, nil
}

// roleCountProblem says what is wrong with the number of hosts chosen
// for a role ("" when nothing is).
func roleCountProblem(role acceptance.RoleSpec, n int) string {
	lo, hi := role.HostLimits()
	switch {
	case n < lo && lo == 1:
		return "Choose a host for role " + role.Name + "."
	case n < lo:
		return fmt.Sprintf("Role %s needs at least %d hosts; %d are chosen.", role.Name, lo, n)
	case n > hi:
		return fmt.Sprintf("Role %s takes at most %d hosts; %d are chosen.", role.Name, hi, n)
	}
	return ""
}

// pinnedHost loads a host of the program chosen for field; a host that is
// not the program's or whose key is not confirmed is a problem of field.
func pinnedHost(ctx context.Context, st *store.Store, programID int64, field string, id int64, errs map[string]string) (store.Host, bool, error) {
	h, err := st.GetHost(ctx, programID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		errs[field] = fmt.Sprintf("Host %d is not a lab host of this program.", id)
		return h, false, nil
	case err != nil:
		return h, false, err
	case !h.Pinned():
		errs[field] = "Confirm the key of host " + h.Name + " first (scan it on the host's page)."
		return h, false, nil
	}
	return h, true, nil
}

// writeProblem says why the profile's steps may not write where they
// would on the host (the probe checks again on the host, where it also
// sees which files exist).
func writeProblem(profile acceptance.ProfileSpec, host store.Host) string {
	outside := acceptance.WriteOutside(profile, host.WritePlaces, host.Name)
	for _, s := range profile.Steps {
		if s.Kind == acceptance.StepFio && s.Fio != nil && s.Fio.Destructive && !host.AllowDestructive {
			outside = append(outside, fmt.Sprintf("step %s is destructive, and %s does not allow destructive steps", s.Name, host.Name))
		}
	}
	if len(outside) == 0 {
		return ""
	}
	return "Refused: " + strings.Join(outside, "; ") + ". Declare the places on the host's page."
}
