package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// capability is what a route needs inside a program. The table in
// roleCan is the whole authorization policy for program-scoped routes.
type capability int

const (
	capView     capability = iota // read anything of the program
	capEngineer                   // profiles, gate sets, hosts, runs
	capApprove                    // approve, reject, waive, resume rollout stages
	capOwner                      // members and settings; command steps
	// capHalt stops a rollout stage at once: any member of the program may
	// pull the brake (both sides' approvers must agree to resume), in the
	// browser and through the API alike (a token needs the approve scope,
	// as for every decision).
	capHalt
)

var capabilityNames = map[capability]string{capView: "view", capEngineer: "engineer", capApprove: "approve", capOwner: "owner", capHalt: "halt"}

// decisionNeeds is the capability that recording a decision of kind needs.
func decisionNeeds(kind acceptance.DecisionKind) capability {
	if kind == acceptance.DecisionHalt {
		return capHalt
	}
	return capApprove
}

func roleCan(role store.Role, c capability) bool {
	switch c {
	case capView, capHalt:
		return role != ""
	case capEngineer:
		return role == store.RoleEngineer || role == store.RoleOwner
	case capApprove:
		return role == store.RoleApprover || role == store.RoleOwner
	case capOwner:
		return role == store.RoleOwner
	}
	return false
}

// programCtx is the program of the request as the caller may see it.
type programCtx struct {
	store.ProgramAccess
}

// can applies the policy. A site admin who is not a member may view and
// manage members (to set a program up) but neither engineers nor approves:
// those acts belong to the two organisations.
func (p *programCtx) can(c capability) bool {
	if p.Role != "" {
		return roleCan(p.Role, c)
	}
	return p.IsAdmin && (c == capView || c == capOwner)
}

type programKey struct{}

func programFrom(ctx context.Context) *programCtx {
	p, _ := ctx.Value(programKey{}).(*programCtx)
	return p
}

// inProgram loads {programID} through the caller's membership. A program
// the caller may not see answers 404, exactly like one that does not exist.
func (s *Server) inProgram(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := viewerFrom(r.Context())
		id, err := strconv.ParseInt(chi.URLParam(r, "programID"), 10, 64)
		if v == nil || err != nil || id <= 0 {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		access, err := s.store.ProgramFor(r.Context(), v.ID, id)
		if errors.Is(err, store.ErrNotFound) {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		pc := &programCtx{ProgramAccess: access}
		pc.CanManage = pc.can(capOwner)
		ctx := context.WithValue(r.Context(), programKey{}, pc)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// need refuses (403) a member whose role lacks the capability. Routes are
// declared with it in the route table, so the policy is visible there.
func (s *Server) need(c capability) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := programFrom(r.Context())
			if p == nil || !p.can(c) {
				s.renderError(w, r, http.StatusForbidden)
				return
			}
			if c != capView && isAPI(r) && !apiScopeAllows(r, c) {
				s.renderError(w, r, http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// idParam parses a numeric URL parameter; a bad one is "not found".
func idParam(r *http.Request, name string) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, name), 10, 64)
	return id, err == nil && id > 0
}
