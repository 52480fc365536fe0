package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

func (s *Server) hostCrumbs(pr *programCtx, last string) []web.Crumb {
	c := []web.Crumb{{Label: "Programs", Href: "/programs"}, {Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, {Label: "Lab hosts", Href: web.ProgramLink(pr.ID, "/hosts")}}
	if last != "" {
		c = append(c, web.Crumb{Label: last})
	}
	return c
}

func (s *Server) listHosts(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	hosts, err := s.store.ListHosts(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Lab hosts · "+pr.Name, "programs", s.hostCrumbs(pr, "")...)
	s.render(w, r, http.StatusOK, web.HostList(p, pr.ProgramAccess, hosts, pr.can(capEngineer)))
}

func (s *Server) showNewHost(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	p := s.page(r, "Register a host", "programs", s.hostCrumbs(pr, "Register")...)
	s.render(w, r, http.StatusOK, web.HostNewPage(p, pr.ProgramAccess, web.HostForm{Port: "22", Username: "root", AuthMethod: "key", CanSetPlaces: pr.can(capOwner)}))
}

var (
	hostNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	userRE     = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)
	labelKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,39}$`)
)

// validAddress accepts an IP address or a DNS name, nothing a shell or
// ssh option could read as something else.
func validAddress(a string) bool {
	if net.ParseIP(a) != nil {
		return true
	}
	if len(a) == 0 || len(a) > 253 || strings.HasPrefix(a, "-") {
		return false
	}
	for _, part := range strings.Split(a, ".") {
		if part == "" || len(part) > 63 {
			return false
		}
		for _, c := range part {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// parseHostForm validates the register-host form.
func (s *Server) parseHostForm(r *http.Request) (web.HostForm, store.NewHost) {
	f := web.HostForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Address: strings.TrimSpace(r.PostFormValue("address")),
		Port: strings.TrimSpace(r.PostFormValue("port")), Username: strings.TrimSpace(r.PostFormValue("username")),
		Labels: r.PostFormValue("labels"), Jumps: r.PostFormValue("jumps"), AuthMethod: r.PostFormValue("auth_method"),
		AgentSocket: strings.TrimSpace(r.PostFormValue("agent_socket")), AllowDestructive: r.PostFormValue("allow_destructive") == "1",
		WritePlaces: r.PostFormValue("write_places"), CanSetPlaces: programFrom(r.Context()).can(capOwner), Errors: map[string]string{},
	}
	h := store.NewHost{Name: f.Name, Address: f.Address, Username: f.Username, AuthMethod: f.AuthMethod, AgentSocket: f.AgentSocket,
		AllowDestructive: f.AllowDestructive, Labels: map[string]string{}}
	if places, problem := parseWritePlaces(f.WritePlaces, f.AllowDestructive); problem != "" {
		f.Errors["write_places"] = problem
	} else {
		h.WritePlaces = places
	}
	// Where tests may write is the program owners' to say (a place lets
	// any engineer's profile overwrite what is there).
	if (len(h.WritePlaces) > 0 || h.AllowDestructive) && !f.CanSetPlaces {
		f.Errors["write_places"] = "Only the program's owners declare where tests may write and allow destructive steps: register the host without them, and ask an owner to set them on its page."
	}
	if !hostNameRE.MatchString(f.Name) {
		f.Errors["name"] = "Use letters, digits, dot, dash and underscore (at most 100)."
	}
	if !validAddress(f.Address) {
		f.Errors["address"] = "Give a host name or an IP address."
	}
	port, err := strconv.Atoi(f.Port)
	if err != nil || port < 1 || port > 65535 {
		f.Errors["port"] = "A port is a number from 1 to 65535."
	}
	h.Port = port
	if !userRE.MatchString(f.Username) {
		f.Errors["username"] = "Give a Unix user name such as root or accord."
	}
	for i, line := range strings.Split(f.Labels, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !labelKeyRE.MatchString(k) || v == "" || len(v) > 200 {
			f.Errors["labels"] = fmt.Sprintf("Line %d: write key=value with a lower-case key.", i+1)
			break
		}
		h.Labels[k] = v
	}
	for i, line := range strings.Split(f.Jumps, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		hop, err := parseJump(line)
		if err != nil {
			f.Errors["jumps"] = fmt.Sprintf("Line %d: %v.", i+1, err)
			break
		}
		h.JumpChain = append(h.JumpChain, hop)
	}
	switch f.AuthMethod {
	case "key":
	case "agent":
		switch allowed := s.runner.Options.AgentSockets; {
		case len(allowed) == 0:
			f.Errors["auth_method"] = "This installation does not use ssh-agent sockets (its operator sets ACCORD_SSH_AGENT_SOCKETS): use the key Accord generates."
		case !slices.Contains(allowed, f.AgentSocket):
			f.Errors["agent_socket"] = "Choose one of the sockets this installation allows: " + strings.Join(allowed, ", ") + "."
		}
	default:
		f.Errors["auth_method"] = "Choose how Accord authenticates."
	}
	return f, h
}

// parseWritePlaces reads the where-tests-may-write field; a device listed
// needs destructive steps allowed (only they write devices).
func parseWritePlaces(text string, allowDestructive bool) ([]string, string) {
	places, err := acceptance.ParseWritePlaces(text)
	if err != nil {
		return nil, "Give one absolute path a line. Refused: " + err.Error() + "."
	}
	for _, p := range places {
		if acceptance.IsDevicePath(p) && !allowDestructive {
			return nil, fmt.Sprintf("%s is a device: only destructive steps write devices, so allow them too (or remove it).", p)
		}
	}
	return places, ""
}

// setHostWritePlaces changes where tests may write on the host (owners
// only: the route needs capOwner).
func (s *Server) setHostWritePlaces(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f := web.HostForm{WritePlaces: r.PostFormValue("write_places"), AllowDestructive: r.PostFormValue("allow_destructive") == "1", Errors: map[string]string{}}
	places, problem := parseWritePlaces(f.WritePlaces, f.AllowDestructive)
	if problem != "" {
		f.Errors["write_places"] = problem
		s.renderHostWith(w, r, http.StatusUnprocessableEntity, h, nil, &f)
		return
	}
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		if err := tx.SetHostWritePlaces(r.Context(), pr.ID, h.ID, places, f.AllowDestructive); err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "host_write_places_set", ProgramID: &pr.ID,
			Target: h.Name, ClientAddr: clientAddr(r), Details: map[string]any{"write_places": places, "allow_destructive": f.AllowDestructive}})
	})
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Saved where tests may write on "+h.Name+".")
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/hosts/%d", h.ID)))
}

func parseJump(s string) (store.JumpHop, error) {
	user, rest, ok := strings.Cut(s, "@")
	if !ok || !userRE.MatchString(user) {
		return store.JumpHop{}, errors.New("write user@host or user@host:port")
	}
	addr, portText := rest, "22"
	if h, p, err := net.SplitHostPort(rest); err == nil {
		addr, portText = h, p
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || !validAddress(addr) {
		return store.JumpHop{}, errors.New("write user@host or user@host:port")
	}
	return store.JumpHop{Address: addr, Port: port, Username: user}, nil
}

func (s *Server) createHost(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f, h := s.parseHostForm(r)
	if len(f.Errors) > 0 {
		p := s.page(r, "Register a host", "programs", s.hostCrumbs(pr, "Register")...)
		s.render(w, r, http.StatusUnprocessableEntity, web.HostNewPage(p, pr.ProgramAccess, f))
		return
	}
	h.CreatedBy = v.ID
	var key sshrun.KeyPair
	if h.AuthMethod == "key" {
		var err error
		if key, err = sshrun.GenerateKey(fmt.Sprintf("accord@%s", h.Name)); err != nil {
			s.serverError(w, r, err)
			return
		}
		h.PublicKey = key.AuthorizedKey
	}
	var id int64
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		var err error
		if id, err = tx.CreateHost(r.Context(), pr.ID, h); err != nil {
			return err
		}
		if h.AuthMethod == "key" {
			// Sealed under the server's secret, bound to this host row.
			sealed, err := s.sealer.Seal(key.PrivatePEM, labhost.SealLabel(id))
			if err != nil {
				return err
			}
			if err := tx.SetHostSealedKey(r.Context(), id, sealed); err != nil {
				return err
			}
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "host_registered", ProgramID: &pr.ID,
			Target: h.Name, ClientAddr: clientAddr(r), Details: map[string]any{"address": h.Address, "port": h.Port}})
	})
	if errors.Is(err, store.ErrConflict) {
		f.Errors["name"] = "A host of that name exists in this program."
		p := s.page(r, "Register a host", "programs", s.hostCrumbs(pr, "Register")...)
		s.render(w, r, http.StatusUnprocessableEntity, web.HostNewPage(p, pr.ProgramAccess, f))
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Host registered. Add Accord's key to the host, then scan and confirm its host key.")
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/hosts/%d", id)))
}

// loadHost loads {hostID} within the program.
func (s *Server) loadHost(w http.ResponseWriter, r *http.Request) (store.Host, bool) {
	pr := programFrom(r.Context())
	id, ok := idParam(r, "hostID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return store.Host{}, false
	}
	h, err := s.store.GetHost(r.Context(), pr.ID, id)
	if err != nil {
		s.notFoundOr(w, r, err)
		return h, false
	}
	return h, true
}

func (s *Server) showHost(w http.ResponseWriter, r *http.Request) {
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	s.renderHost(w, r, http.StatusOK, h, nil)
}

func (s *Server) renderHost(w http.ResponseWriter, r *http.Request, status int, h store.Host, scans []web.HostScan) {
	s.renderHostWith(w, r, status, h, scans, nil)
}

// renderHostWith shows the host page with the write-places form's state.
func (s *Server) renderHostWith(w http.ResponseWriter, r *http.Request, status int, h store.Host, scans []web.HostScan, places *web.HostForm) {
	pr := programFrom(r.Context())
	d := web.HostPageData{Host: h, Scans: scans, CanEdit: pr.can(capEngineer), CanSetPlaces: pr.can(capOwner), PlacesForm: places}
	if since, err := strconv.ParseInt(r.URL.Query().Get("checking"), 10, 64); err == nil && !checkDone(h, since) {
		d.CheckSince = strconv.FormatInt(since, 10)
	}
	history, err := s.store.HostFactsHistory(r.Context(), h.ID, 50)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if len(history) > 0 {
		d.Facts = web.SummarizeFacts(history[0])
		d.Drift = factsDrift(history)
	}
	if d.Runs, err = s.store.ListRuns(r.Context(), pr.ID, store.RunFilter{HostID: &h.ID, Limit: 20}); err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, h.Name+" · "+pr.Name, "programs", s.hostCrumbs(pr, h.Name)...)
	s.render(w, r, status, web.HostPage(p, pr.ProgramAccess, d))
}

// scanHost learns the host keys of the host and its jump hosts without
// authenticating to the host itself, and shows their fingerprints to
// confirm. Hops are reached through the earlier hops with the keys just
// scanned; the engineer confirms all of them at once.
func (s *Server) scanHost(w http.ResponseWriter, r *http.Request) {
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	// Jump hosts are logged into to reach the next hop; the target itself
	// is only asked for its key.
	auth := sshrun.Auth{AgentSock: h.AgentSocket}
	if h.AuthMethod == "key" && len(h.JumpChain) > 0 {
		key, err := s.sealer.Open(h.SealedPrivateKey, labhost.SealLabel(h.ID))
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		auth = sshrun.Auth{PrivateKey: key}
	}
	var scans []web.HostScan
	var hops []sshrun.Target
	all := append(append([]store.JumpHop(nil), h.JumpChain...), store.JumpHop{Address: h.Address, Port: h.Port, Username: h.Username})
	for i, hop := range all {
		label := "target"
		if i < len(h.JumpChain) {
			label = fmt.Sprintf("jump %d", i+1)
		}
		t := sshrun.Target{Addr: hop.Address, Port: hop.Port, User: hop.Username, Auth: auth, Jumps: hops}
		scan := web.HostScan{Hop: label, Address: t.HostPort()}
		res, err := sshrun.ScanVia(r.Context(), t, s.runner.Options)
		if err != nil {
			// The detail (refused, timed out, not SSH) would map what
			// listens where on the server's networks: logged, not shown.
			s.log.Info("host scan failed", "request_id", requestID(r.Context()), "host_id", h.ID, "hop", label, "err", err)
			scan.Error = scanErrorText(err)
			scans = append(scans, scan)
			break
		}
		scan.Fingerprint, scan.Key = res.Fingerprint, res.AuthorizedKey
		scans = append(scans, scan)
		t.HostKey = res.Key
		t.Jumps = nil
		hops = append(hops, t)
	}
	s.renderHost(w, r, http.StatusOK, h, scans)
}

// scanErrorText says why a scan failed without telling whether anything
// listens at the address: every connection failure (refused, timed out,
// reset, not SSH) is "could not connect", as a webhook's delivery says.
// What happens past an SSH handshake with a jump host (its key, our key)
// is said: the jump host showed itself as an SSH server already.
func scanErrorText(err error) string {
	switch {
	case errors.Is(err, sshrun.ErrHostKeyChanged):
		return "a jump host presented another key than the one just scanned: scan again"
	case errors.Is(err, sshrun.ErrAuthFailed):
		return "a jump host refused Accord's key: add it to the jump host's authorized_keys"
	case errors.Is(err, sshrun.ErrBadTarget):
		return "Accord's key or ssh-agent for this host cannot be used"
	}
	return "could not connect"
}

// pinHost pins the keys the engineer confirmed.
func (s *Server) pinHost(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	n := len(h.JumpChain) + 1
	keys := make([]string, n)
	fps := make([]string, n)
	for i := range n {
		k, err := sshrun.ParseHostKey(r.PostFormValue(fmt.Sprintf("key%d", i)))
		if err != nil {
			s.setFlash(w, "error", "Scan the host again: a key was missing or not readable.")
			redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/hosts/%d", h.ID)))
			return
		}
		keys[i], fps[i] = sshrun.AuthorizedKey(k), sshrun.Fingerprint(k)
	}
	jumps := append([]store.JumpHop(nil), h.JumpChain...)
	for i := range jumps {
		jumps[i].HostKey, jumps[i].HostKeySHA256 = keys[i], fps[i]
	}
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		if err := tx.PinHostKeys(r.Context(), pr.ID, h.ID, keys[n-1], fps[n-1], jumps); err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "host_key_pinned", ProgramID: &pr.ID,
			Target: h.Name, ClientAddr: clientAddr(r), Details: map[string]any{"fingerprints": fps}})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Host key pinned: "+fps[n-1]+". Any other key will now fail every connection.")
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/hosts/%d", h.ID)))
}

// checkHost queues a check (River job): connect, run the probe's facts,
// measure the round trip.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	if !h.Pinned() {
		s.setFlash(w, "error", "Confirm the host key first: scan it and compare the fingerprint.")
		redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/hosts/%d", h.ID)))
		return
	}
	if _, err := s.river.Insert(r.Context(), jobs.CheckHostArgs{ProgramID: pr.ID, HostID: h.ID}, nil); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "info", "Check queued: the page refreshes with the result when it is done.")
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/hosts/%d?checking=%d", h.ID, time.Now().UnixMilli())))
}

// checkWaitLimit is how long a host page waits for a queued check before
// it refreshes anyway (to show the check still queued, or failed).
const checkWaitLimit = 2 * time.Minute

// checkDone reports whether the host was checked after since (Unix ms).
func checkDone(h store.Host, since int64) bool {
	return h.LastCheckAt != nil && h.LastCheckAt.UnixMilli() >= since
}

// showHostCheckStatus answers the host page's poll while a check is
// queued: nothing yet (204), or, once the check is done or the wait is
// over, a refresh of the page (htmx's HX-Refresh) and the end of polling
// (htmx stops polling on 286).
func (s *Server) showHostCheckStatus(w http.ResponseWriter, r *http.Request) {
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	since, err := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	if err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if checkDone(h, since) || time.Since(time.UnixMilli(since)) > checkWaitLimit {
		w.Header().Set("HX-Refresh", "true")
		w.WriteHeader(htmxStopPolling)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// htmxStopPolling is the status with which htmx stops an hx-trigger="every …" poll.
const htmxStopPolling = 286

// driftComparable is what the drift table compares: the facts that make
// runs comparable (kernel, GPU driver, NVMe firmware, ...) and the
// multipath setup, which changes how I/O reaches the array: native
// multipath on or off and each subsystem's I/O policy.
func driftComparable(f *facts.Facts) map[string]string {
	m := f.Comparable()
	if v := f.NVMe.Multipath.Value; v != "" {
		m["nvme.multipath"] = v
	}
	for _, sub := range f.NVMe.Subsystems {
		if v := sub.IOPolicy.Value; v != "" && sub.Name != "" {
			m["nvme."+sub.Name+".iopolicy"] = v
		}
	}
	return m
}

// factsDrift lists the comparable facts that changed between consecutive
// captures (newest first in, oldest change last out), with the runs on
// either side.
func factsDrift(history []store.HostFacts) []web.FactsChange {
	var out []web.FactsChange
	for i := 0; i+1 < len(history); i++ {
		newer, older := history[i], history[i+1]
		if newer.Digest == older.Digest {
			continue
		}
		var fn, fo facts.Facts
		errNewer, errOlder := json.Unmarshal(newer.Facts, &fn), json.Unmarshal(older.Facts, &fo)
		if errNewer != nil || errOlder != nil {
			out = append(out, unreadableDrift(older, newer, errOlder != nil, errNewer != nil))
			continue
		}
		a, b := driftComparable(&fo), driftComparable(&fn)
		keys := map[string]bool{}
		for k := range a {
			keys[k] = true
		}
		for k := range b {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if a[k] == b[k] {
				continue
			}
			out = append(out, driftRow(older, newer, k, a[k], b[k]))
		}
	}
	return out
}

// driftRow is one row of the drift table: a fact's values in two
// consecutive captures, with their times and runs.
func driftRow(older, newer store.HostFacts, key, was, now string) web.FactsChange {
	c := web.FactsChange{Key: key, Old: was, New: now, Before: older.TakenAt.UTC().Format("2006-01-02 15:04"), After: newer.TakenAt.UTC().Format("2006-01-02 15:04")}
	if older.RunID != nil {
		c.RunBefore = *older.RunID
	}
	if newer.RunID != nil {
		c.RunAfter = *newer.RunID
	}
	return c
}

// factsUnreadable marks a capture in the drift table whose stored facts
// do not decode: the step stays in the table, so that a change between
// the two captures is not hidden.
const factsUnreadable = "unreadable"

// unreadableDrift is the drift table's row for a step between captures
// one of which (or both) does not decode.
func unreadableDrift(older, newer store.HostFacts, olderBad, newerBad bool) web.FactsChange {
	side := func(bad bool) string {
		if bad {
			return factsUnreadable
		}
		return "not compared"
	}
	return driftRow(older, newer, "facts", side(olderBad), side(newerBad))
}
