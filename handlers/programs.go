package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

func (s *Server) listPrograms(w http.ResponseWriter, r *http.Request) {
	s.renderProgramList(w, r, http.StatusOK, web.NewProgramForm{})
}

func (s *Server) renderProgramList(w http.ResponseWriter, r *http.Request, status int, form web.NewProgramForm) {
	v := viewerFrom(r.Context())
	programs, err := s.store.ProgramsFor(r.Context(), v.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var orgs []store.Organization
	if v.IsAdmin {
		if orgs, err = s.store.ListOrganizations(r.Context()); err != nil {
			s.serverError(w, r, err)
			return
		}
	}
	p := s.page(r, "Programs", "programs")
	s.render(w, r, status, web.ProgramList(p, programs, orgs, form))
}

// createProgram is for site admins: a program joins a vendor and a customer.
func (s *Server) createProgram(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	form := web.NewProgramForm{
		Name:        strings.TrimSpace(r.PostFormValue("name")),
		Description: strings.TrimSpace(r.PostFormValue("description")),
		Errors:      map[string]string{},
	}
	form.VendorOrg, _ = strconv.ParseInt(r.PostFormValue("vendor_org"), 10, 64)
	form.CustomerOrg, _ = strconv.ParseInt(r.PostFormValue("customer_org"), 10, 64)
	if form.Name == "" || len(form.Name) > 200 {
		form.Errors["name"] = "Give the program a name of at most 200 characters."
	}
	if form.VendorOrg == 0 {
		form.Errors["vendor_org"] = "Choose the vendor organisation."
	}
	if form.CustomerOrg == 0 {
		form.Errors["customer_org"] = "Choose the customer organisation."
	}
	if len(form.Errors) > 0 {
		s.renderProgramList(w, r, http.StatusUnprocessableEntity, form)
		return
	}
	var id int64
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		var err error
		id, err = tx.CreateProgram(r.Context(), form.Name, form.Description, form.VendorOrg, form.CustomerOrg, &v.ID)
		if err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "program_created", ProgramID: &id, Target: form.Name, ClientAddr: clientAddr(r)})
	})
	if errors.Is(err, store.ErrNotFound) {
		form.Errors["vendor_org"] = "Choose a vendor organisation and a customer organisation."
		s.renderProgramList(w, r, http.StatusUnprocessableEntity, form)
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Program created. Add its members next.")
	redirect(w, r, web.ProgramLink(id, "/members"))
}

func (s *Server) showProgram(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	members, err := s.store.ListMembers(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	summary, err := s.store.ProgramCounts(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	groups := []web.MembersByOrg{
		{OrgName: pr.VendorName, OrgKind: "vendor"},
		{OrgName: pr.CustomerName, OrgKind: "customer"},
	}
	for _, m := range members {
		i := 0
		if m.OrgKind == "customer" {
			i = 1
		}
		groups[i].Members = append(groups[i].Members, m)
	}
	status, err := s.programStatus(r.Context(), pr, viewerFrom(r.Context()))
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"}, web.Crumb{Label: pr.Name})
	s.render(w, r, http.StatusOK, web.ProgramOverview(p, pr.ProgramAccess, groups, web.ProgramSummary{
		Hosts: summary.Hosts, Profiles: summary.Profiles, GateSets: summary.GateSets, Runs: summary.Runs,
	}, status))
}

func (s *Server) showMembers(w http.ResponseWriter, r *http.Request) {
	s.renderMembers(w, r, http.StatusOK, "")
}

func (s *Server) renderMembers(w http.ResponseWriter, r *http.Request, status int, errText string) {
	pr := programFrom(r.Context())
	members, err := s.store.ListMembers(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var candidates []store.User
	canManage := pr.can(capOwner)
	if canManage {
		users, err := s.store.ListUsers(r.Context())
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		for _, u := range users {
			if u.OrganizationID != nil && (*u.OrganizationID == pr.VendorOrgID || *u.OrganizationID == pr.CustomerOrgID) && !u.Disabled {
				candidates = append(candidates, u)
			}
		}
	}
	p := s.page(r, "Members · "+pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"}, web.Crumb{Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, web.Crumb{Label: "Members"})
	s.render(w, r, status, web.MembersPage(p, pr.ProgramAccess, members, candidates, canManage, errText))
}

// setMember adds a member or changes a role (owners and site admins).
func (s *Server) setMember(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	userID, _ := strconv.ParseInt(r.PostFormValue("user_id"), 10, 64)
	role := r.PostFormValue("role")
	if userID <= 0 || !store.ValidRole(role) {
		s.renderMembers(w, r, http.StatusUnprocessableEntity, "Choose a person and one of the roles.")
		return
	}
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		prev, err := tx.SetMember(r.Context(), pr.ID, userID, store.Role(role))
		if err != nil {
			return err
		}
		action := "member_added"
		if prev != "" {
			action = "role_changed"
		}
		return tx.Audit(r.Context(), store.AuditEntry{
			ActorUserID: &v.ID, ActorLabel: v.Email, Action: action, ProgramID: &pr.ID,
			Target: "user " + strconv.FormatInt(userID, 10), ClientAddr: clientAddr(r),
			Details: map[string]any{"role": role, "previous_role": string(prev)},
		})
	})
	if errors.Is(err, store.ErrWrongOrganization) {
		s.renderMembers(w, r, http.StatusUnprocessableEntity, "That person belongs to neither of the program's organisations.")
		return
	}
	if errors.Is(err, store.ErrLastOwner) {
		s.renderMembers(w, r, http.StatusUnprocessableEntity, "That person is the program's last owner: make someone else an owner first.")
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Membership saved.")
	redirect(w, r, web.ProgramLink(pr.ID, "/members"))
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	userID, ok := idParam(r, "userID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		if err := tx.RemoveMember(r.Context(), pr.ID, userID); err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "member_removed", ProgramID: &pr.ID,
			Target: "user " + strconv.FormatInt(userID, 10), ClientAddr: clientAddr(r)})
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderMembers(w, r, http.StatusUnprocessableEntity, "That person is not a member, or is the program's last owner.")
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Member removed.")
	redirect(w, r, web.ProgramLink(pr.ID, "/members"))
}

func (s *Server) showProgramAudit(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	entries, err := s.store.ListAudit(r.Context(), store.AuditFilter{ProgramID: &pr.ID})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Audit log · "+pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"}, web.Crumb{Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, web.Crumb{Label: "Audit log"})
	s.render(w, r, http.StatusOK, web.AuditPage(p, &pr.ProgramAccess, entries))
}
