package handlers

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/web"
)

// confirmApproval is the step before an approval (or a waiver) is signed:
// the stage's gates with the runs they rest on (each opens), what signing
// means, and the comment (a waiver's required reason) that the signed
// record keeps. The form posts to the stage's approve or waive route.
func (s *Server) confirmApproval(w http.ResponseWriter, r *http.Request) {
	s.renderConfirmApproval(w, r, http.StatusOK, "", "")
}

func (s *Server) renderConfirmApproval(w http.ResponseWriter, r *http.Request, status int, comment, errText string) {
	stage, ok := s.loadStage(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	pr := programFrom(ctx)
	ro, err := rollout.Load(ctx, s.store, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	reading, err := rollout.ReadGates(ctx, s.store, stage)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	side := rolloutSide(pr, viewerFrom(ctx))
	d := web.ApprovalConfirm{StageID: stage.ID, Stage: stage.Name, Position: stage.Position, Side: string(side), Gates: gatesView(reading),
		Waive: !reading.Pass, Comment: comment, Error: errText, MaxLen: acceptance.MaxReasonLen}
	d.Closed = approvalClosed(ro, stage.Name, side)
	if cur, ok := ro.State.CurrentStage(); ok && ro.ReplayErr == nil && cur.Name == stage.Name {
		d.Approvals = signoffViews(cur.Approvals, actorNames(ro.Decisions))
	}
	p := s.page(r, "Approve "+stage.Name+" · "+pr.Name, "programs", s.rolloutCrumbs(pr, "Approve "+stage.Name)...)
	s.render(w, r, status, web.ApprovalConfirmPage(p, pr.ProgramAccess, d))
}

// approvalClosed says why a side cannot approve the stage now ("" when it
// can); the rules decide again when the form is sent.
func approvalClosed(ro rollout.Rollout, stage string, side acceptance.OrgKind) string {
	cur, ok := ro.State.CurrentStage()
	switch {
	case side == "":
		return "Only a member of the program's vendor or customer organisation approves a stage."
	case ro.ReplayErr != nil:
		return "The decision log does not replay on the plan, so no decision can be taken until it is resolved."
	case ro.State.Rollback != nil:
		return "A rollback was requested: the rollout takes no further decisions."
	case !ok:
		return "Every stage is approved: the rollout is complete."
	case cur.Name != stage:
		return fmt.Sprintf("Stage %s is not the current stage: decisions apply to %s now.", stage, cur.Name)
	case cur.State != acceptance.StageAwaitingApproval:
		return fmt.Sprintf("Stage %s is %s: it cannot be approved now.", stage, cur.State)
	case !slices.Contains(cur.MissingSides(), side):
		return fmt.Sprintf("The %s side has already approved stage %s.", side, stage)
	}
	return ""
}
