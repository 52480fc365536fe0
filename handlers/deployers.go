package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/service/rollout"
)

// The deployers ask Accord whether a rollout stage may proceed: an Argo
// Rollouts AnalysisTemplate's `web` metric provider GETs the stage's gate
// (JSON; its successCondition reads the state), and Flagger's
// confirm-rollout, confirm-promotion and rollback webhooks POST their
// payload and read the status (200 yes, anything else no). Both carry a
// token with the deploy scope alone: Argo Rollouts in a header, Flagger,
// whose webhooks send no headers, in the payload's metadata.

// flaggerPayload is the body of a Flagger webhook call.
type flaggerPayload struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Phase     string            `json:"phase"`
	Checksum  string            `json:"checksum"`
	Metadata  map[string]string `json:"metadata"`
}

// flaggerCall is a webhook's payload as read, or why it could not be.
type flaggerCall struct {
	payload flaggerPayload
	err     error
}

type flaggerCallKey struct{}

// maxFlaggerPayload bounds a webhook's body (Flagger's carry a few fields).
const maxFlaggerPayload = 64 << 10

// withDeployToken authenticates a deployer by a token with the deploy
// scope: `Authorization: Bearer TOKEN`, or, in a Flagger webhook's
// payload, metadata.token. A POST's payload is read here and kept for the
// handler, which refuses one that is not a payload (400) once the caller
// is known to see the program.
func (s *Server) withDeployToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, fromHeader := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFlaggerPayload))
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: "a Flagger webhook payload is at most 64 KiB", RequestID: requestID(r.Context())})
				return
			}
			var p flaggerPayload
			if err == nil {
				err = json.Unmarshal(body, &p)
			}
			if err == nil && !fromHeader {
				token = p.Metadata["token"]
			}
			r = r.WithContext(context.WithValue(r.Context(), flaggerCallKey{}, flaggerCall{payload: p, err: err}))
		}
		if strings.TrimSpace(token) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="accord"`)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "a token with the deploy scope is required: Authorization: Bearer TOKEN, or the Flagger webhook's metadata token", RequestID: requestID(r.Context())})
			return
		}
		v, ok := s.apiTokenViewer(w, r, token)
		if !ok {
			return
		}
		if !slices.Contains(v.Scopes, auth.ScopeDeploy) {
			writeJSON(w, http.StatusForbidden, apiError{Error: "this token lacks the deploy scope", RequestID: requestID(r.Context())})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyViewer, v)))
	})
}

// stageGate reads the stage of the URL as a deployer is told it; false
// when it answered (404 for a stage the plan does not have).
func (s *Server) stageGate(w http.ResponseWriter, r *http.Request) (acceptance.DeployGate, bool) {
	p := programFrom(r.Context())
	ro, err := rollout.Load(r.Context(), s.store, p.ID)
	if err != nil {
		s.serverError(w, r, err)
		return acceptance.DeployGate{}, false
	}
	name := chi.URLParam(r, "stage")
	if _, ok := ro.Stage(name); !ok {
		writeJSON(w, http.StatusNotFound, apiError{Error: "the program's rollout plan has no stage of that name", RequestID: requestID(r.Context())})
		return acceptance.DeployGate{}, false
	}
	g, ok := acceptance.DeployGateOf(ro.State, name, ro.ReplayErr)
	if !ok {
		s.serverError(w, r, errors.New("deploy gate: the replayed rollout lacks a stage of its plan"))
		return acceptance.DeployGate{}, false
	}
	return g, true
}

func toAPIStageGate(programID int64, g acceptance.DeployGate, at time.Time) apiclient.StageGate {
	out := apiclient.StageGate{Program: programID, Stage: g.Stage, State: string(g.State), Approved: g.State == acceptance.DeployApproved,
		Halted: g.State == acceptance.DeployHalted, StageState: string(g.StageState), Current: g.Current, ApprovedBy: []string{}, Reason: g.Reason, CheckedAt: at.UTC()}
	for _, side := range g.ApprovedBy {
		out.ApprovedBy = append(out.ApprovedBy, string(side))
	}
	return out
}

// showStageGate answers Argo Rollouts' web metric provider: always 200
// with the stage's state (a non-2xx status is a measurement error to Argo
// Rollouts, not an answer).
func (s *Server) showStageGate(w http.ResponseWriter, r *http.Request) {
	g, ok := s.stageGate(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, toAPIStageGate(programFrom(r.Context()).ID, g, time.Now()))
}

// answerFlagger answers one of Flagger's webhooks: 200 for yes, 409 for
// no (Flagger holds the canary on any other status than 2xx), with the
// stage's state in the body, which Flagger shows in its events.
func (s *Server) answerFlagger(hook acceptance.FlaggerHook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call, _ := r.Context().Value(flaggerCallKey{}).(flaggerCall)
		if call.err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "the body is not a Flagger webhook payload (JSON with name, namespace, phase, metadata)", RequestID: requestID(r.Context())})
			return
		}
		g, ok := s.stageGate(w, r)
		if !ok {
			return
		}
		p := call.payload
		yes := g.Yes(hook)
		s.log.Info("flagger webhook answered", "request_id", requestID(r.Context()), "program", programFrom(r.Context()).ID, "stage", g.Stage,
			"hook", string(hook), "yes", yes, "canary", truncateText(p.Namespace+"/"+p.Name, 200), "phase", truncateText(p.Phase, 40))
		status := http.StatusOK
		if !yes {
			status = http.StatusConflict
		}
		writeJSON(w, status, apiclient.FlaggerAnswer{Hook: string(hook), Yes: yes, Gate: toAPIStageGate(programFrom(r.Context()).ID, g, time.Now())})
	}
}
