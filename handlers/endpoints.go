package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// Inference endpoints as a program knows them: the ones its profiles point
// at and the ones its lab hosts name in a label, offered on the profile
// form (a starter template's placeholder is replaced by the newest), and
// tested from a lab host before a run goes there.

// knownEndpoints lists the program's inference endpoints, the most
// recently saved profile's first, each once.
func (s *Server) knownEndpoints(ctx context.Context, programID int64) ([]web.KnownEndpoint, error) {
	specs, err := s.store.ListSpecs(ctx, store.KindProfile, programID)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(specs, func(a, b store.Spec) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	var out []web.KnownEndpoint
	seen := map[string]bool{}
	add := func(url, from string) {
		if url != "" && !seen[url] && acceptance.CheckEndpointURL(url) == nil {
			seen[url] = true
			out = append(out, web.KnownEndpoint{URL: url, From: from})
		}
	}
	for _, sp := range specs {
		v, err := s.store.GetSpecVersion(ctx, store.KindProfile, programID, sp.ID, 0)
		if err != nil {
			return nil, err
		}
		var p acceptance.ProfileSpec
		if err := json.Unmarshal(v.Spec, &p); err != nil {
			return nil, fmt.Errorf("known endpoints: profile %d: %w", sp.ID, err)
		}
		for _, st := range p.Steps {
			if st.Inference != nil && st.Inference.Endpoint != acceptance.EmulatorEndpoint {
				add(st.Inference.Endpoint, "used by "+sp.Name)
			}
		}
	}
	hosts, err := s.store.ListHosts(ctx, programID)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts {
		keys := make([]string, 0, len(h.Labels))
		for k := range h.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if k == "endpoint" || strings.HasSuffix(k, "_endpoint") || strings.HasSuffix(k, "-endpoint") {
				add(h.Labels[k], fmt.Sprintf("label %s of lab host %s", k, h.Name))
			}
		}
	}
	return out, nil
}

// testHosts are the pinned hosts an endpoint can be tested from.
func (s *Server) testHosts(ctx context.Context, programID int64) ([]web.RunChoice, error) {
	hosts, err := s.store.ListHosts(ctx, programID)
	if err != nil {
		return nil, err
	}
	var out []web.RunChoice
	for _, h := range hosts {
		if h.Pinned() {
			out = append(out, web.RunChoice{ID: h.ID, Label: h.Name})
		}
	}
	return out, nil
}

// localizeTemplate points a starter template's inference steps at the
// program's newest known endpoint instead of the template's placeholder
// (127.0.0.1:8000), saying so.
func localizeTemplate(p *acceptance.ProfileSpec, known []web.KnownEndpoint) string {
	if len(known) == 0 {
		return ""
	}
	changed, metrics := false, ""
	for i := range p.Steps {
		if in := p.Steps[i].Inference; in != nil && in.Endpoint == acceptance.EmulatorEndpoint {
			in.Endpoint, changed = known[0].URL, true
			if in.MetricsURL == acceptance.EmulatorMetricsURL {
				if m, ok := serverMetricsURL(known[0].URL); ok {
					in.MetricsURL, metrics = m, m
				}
			}
		}
	}
	if !changed {
		return ""
	}
	notice := fmt.Sprintf("The template's endpoint is replaced by %s (%s); the endpoint field offers the program's other known endpoints, and Test endpoint tries one from a lab host.", known[0].URL, known[0].From)
	if metrics != "" {
		notice += " Its metrics_url is that server's " + metrics + " (where vLLM and SGLang serve their counters)."
	}
	return notice
}

// serverMetricsURL is the Prometheus endpoint of the server an API base
// URL belongs to: /metrics at its root, as vLLM and SGLang serve it.
func serverMetricsURL(endpoint string) (string, bool) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", false
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}).String(), true
}

// formStep is a step's place in the profile form ("steps[2]").
var formStep = regexp.MustCompile(`^steps\[\d{1,3}\]$`)

// endpointTestTimeout bounds one endpoint test: the request itself (15 s)
// within the page's own time limit.
const endpointTestTimeout = 15 * time.Second

// testEndpoint has the probe on a lab host send one small request to an
// inference endpoint and shows what came back (the profile form's "Test
// endpoint", through htmx). The fields are those of one step of the form
// (_step names it, _test_host.STEP the host), or url, model, api and host.
func (s *Server) testEndpoint(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	in := web.EndpointTest{URL: r.PostFormValue("url"), Model: r.PostFormValue("model"), API: r.PostFormValue("api")}
	hostField := "host"
	if step := r.PostFormValue("_step"); step != "" {
		if !formStep.MatchString(step) {
			s.renderError(w, r, http.StatusBadRequest)
			return
		}
		in.URL, in.Model, in.API = r.PostFormValue(step+".inference.endpoint"), r.PostFormValue(step+".inference.model"), r.PostFormValue(step+".inference.api")
		hostField = "_test_host." + step
	}
	in.URL, in.Model, in.API = strings.TrimSpace(in.URL), strings.TrimSpace(in.Model), cmp.Or(strings.TrimSpace(in.API), "chat")
	hostID, _ := strconv.ParseInt(r.PostFormValue(hostField), 10, 64)
	answer := func(res web.EndpointTest) { s.render(w, r, http.StatusOK, web.EndpointTestResult(res)) }
	if err := acceptance.CheckEndpointURL(in.URL); err != nil {
		in.Problem = "The endpoint " + err.Error() + "."
		answer(in)
		return
	}
	if in.Model == "" || len(in.Model) > 200 || strings.ContainsAny(in.Model, "\r\n") {
		in.Problem = "Give the model the endpoint serves (one line)."
		answer(in)
		return
	}
	if in.API != "chat" && in.API != "completions" {
		in.Problem = "The API is chat or completions."
		answer(in)
		return
	}
	host, err := s.store.GetHost(r.Context(), pr.ID, hostID)
	if errors.Is(err, store.ErrNotFound) {
		in.Problem = "Choose a lab host of this program to send the request from."
		answer(in)
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	in.Host = host.Name
	target, err := labhost.Target(host, s.sealer)
	if err != nil {
		in.Problem = hostProblem(err)
		answer(in)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), endpointTestTimeout+10*time.Second)
	defer cancel()
	res, err := s.runner.CheckEndpoint(ctx, target, in.URL, in.Model, in.API, endpointTestTimeout)
	if auditErr := s.store.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "endpoint_tested", ProgramID: &pr.ID,
		Target: "host " + host.Name, ClientAddr: clientAddr(r), Details: map[string]any{"url": in.URL, "model": in.Model, "ok": err == nil && res.OK}}); auditErr != nil {
		s.serverError(w, r, auditErr)
		return
	}
	if err != nil {
		s.log.Warn("endpoint test", "request_id", requestID(r.Context()), "host", host.Name, "err", err)
		in.Problem = hostProblem(err)
		answer(in)
		return
	}
	in.Result = &res
	answer(in)
}

// hostProblem says why the host could not be used, in words fit for the
// page (a permanent failure's own text; else that it could not be reached).
func hostProblem(err error) string {
	var perm *runners.PermanentError
	if errors.As(err, &perm) {
		return "The lab host refused: " + perm.Error() + "."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "The lab host did not answer in time (the probe may still be uploading on a first use: try again)."
	}
	return "The lab host could not be reached; the server's log has the details."
}
