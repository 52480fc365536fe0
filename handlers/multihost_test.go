package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// multiHostProfile: two readers and one writer beside them.
func (pb *programBundle) multiHostProfile(t *testing.T) int64 {
	t.Helper()
	fio := func(name, rw string) acceptance.StepSpec {
		return acceptance.StepSpec{Name: name, Kind: acceptance.StepFio, Group: "load", Fio: &acceptance.FioStep{RW: rw, BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
			Size: 8 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: "/mnt/accord/" + name + ".dat"}}
	}
	p := acceptance.ProfileSpec{Name: "shared array", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportNVMeoFTCP},
		Steps: []acceptance.StepSpec{fio("read", "randread"), fio("write", "randwrite")},
		Roles: []acceptance.RoleSpec{{Name: "readers", Steps: []string{"read"}, MinHosts: 2, MaxHosts: 3}, {Name: "writer", Steps: []string{"write"}, MaxHosts: 1}},
	}.Normalized()
	_, nv, _, err := prepareSpec(profileOps, p)
	require.NoError(t, err)
	_, pv, err := pb.store.CreateSpec(context.Background(), store.KindProfile, pb.programID, nv)
	require.NoError(t, err)
	return pv.ID
}

func (pb *programBundle) pinnedHost(t *testing.T, name string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: name, Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key", WritePlaces: []string{"/mnt/accord"}})
	require.NoError(t, err)
	require.NoError(t, pb.store.PinHostKeys(ctx, pb.programID, id, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly", "SHA256:fake", nil))
	return id
}

// A multi-host run request names hosts by role; every way of getting it
// wrong is a 422 naming the field, and a good one starts one run with
// every host in order.
func TestMultiHostRunRequestIsValidated(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	pv := pb.multiHostProfile(t)
	single := pb.profileVersionID(t)
	a, b, c, d := pb.pinnedHost(t, "lab-a"), pb.pinnedHost(t, "lab-b"), pb.pinnedHost(t, "lab-c"), pb.pinnedHost(t, "lab-d")
	unpinned, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-new", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	post := func(req map[string]any) (int, map[string]any) {
		t.Helper()
		raw, _ := json.Marshal(req)
		r, _ := http.NewRequest(http.MethodPost, pb.ts.URL+fmt.Sprintf("/api/v1/programs/%d/runs", pb.programID), bytes.NewReader(raw))
		r.Header.Set("Authorization", "Bearer "+pb.engToken)
		r.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out
	}
	field := func(out map[string]any, name string) string {
		fields, _ := out["fields"].(map[string]any)
		s, _ := fields[name].(string)
		return s
	}
	cases := []struct {
		name  string
		req   map[string]any
		field string
		text  string
	}{
		{"one host for a multi-host profile", map[string]any{"profile_version_id": pv, "host_id": a}, "host", "runs on several hosts by role"},
		{"a role without hosts", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, b}}}, "roles.writer", "Choose a host for role writer"},
		{"too few", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a}, "writer": []int64{c}}}, "roles.readers", "at least 2 hosts"},
		{"too many", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, b}, "writer": []int64{c, d}}}, "roles.writer", "at most 1 hosts"},
		{"a host twice", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, b}, "writer": []int64{a}}}, "roles.writer", "chosen twice"},
		{"an unknown role", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, b}, "writer": []int64{c}, "spare": []int64{d}}}, "roles.spare", `no role "spare"`},
		{"a host of no program of ours", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, 999999}, "writer": []int64{c}}}, "roles.readers", "not a lab host of this program"},
		{"an unpinned host", map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, unpinned}, "writer": []int64{c}}}, "roles.readers", "Confirm the key of host lab-new"},
		{"roles for a one-host profile", map[string]any{"profile_version_id": single, "roles": map[string]any{"readers": []int64{a}}}, "roles", "runs on one host"},
	}
	for _, tc := range cases {
		status, out := post(tc.req)
		require.Equal(t, http.StatusUnprocessableEntity, status, tc.name)
		require.Contains(t, field(out, tc.field), tc.text, "%s: %v", tc.name, out)
	}
	var n int
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&n))
	require.Zero(t, n, "no refused request started a run")

	status, out := post(map[string]any{"profile_version_id": pv, "roles": map[string]any{"writer": []int64{d}, "readers": []int64{b, a}}})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	runID := int64(out["id"].(float64))
	hosts, err := pb.store.RunHosts(ctx, runID)
	require.NoError(t, err)
	var got []string
	for _, h := range hosts {
		got = append(got, h.Role+":"+h.HostName)
	}
	require.Equal(t, []string{"readers:lab-b", "readers:lab-a", "writer:lab-d"}, got, "roles in the profile's order, hosts as named")
	run, err := pb.store.GetRun(ctx, pb.programID, runID)
	require.NoError(t, err)
	require.Equal(t, b, *run.HostID, "the run's host is its first")
	require.Equal(t, 3, run.HostCount)

	// The API shows every host of the run.
	r, _ := http.NewRequest(http.MethodGet, pb.ts.URL+fmt.Sprintf("/api/v1/programs/%d/runs/%d", pb.programID, runID), nil)
	r.Header.Set("Authorization", "Bearer "+pb.engToken)
	res, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	defer res.Body.Close()
	var shown struct {
		Hosts []struct {
			Role, Host, State string
		} `json:"hosts"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&shown))
	require.Len(t, shown.Hosts, 3)
	require.Equal(t, "writer", shown.Hosts[2].Role)
	require.Equal(t, store.RunHostQueued, shown.Hosts[2].State)
}

// The new-run form asks for each role's hosts once a multi-host profile is
// chosen, and starts the run from the boxes ticked.
func TestNewRunFormAsksForHostsByRole(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	pv := pb.multiHostProfile(t)
	a, b, c := pb.pinnedHost(t, "lab-a"), pb.pinnedHost(t, "lab-b"), pb.pinnedHost(t, "lab-c")

	_, body := pb.get(t, pb.engineer, pb.url(fmt.Sprintf("/runs/new?profile_version=%d", pv)))
	page := htmltest.Parse(t, body)
	roles := htmltest.ByID(page, "run-roles")
	require.NotNil(t, roles, body)
	require.Contains(t, htmltest.Text(roles), "readers")
	require.Contains(t, htmltest.Text(roles), "2–3 hosts")
	require.Nil(t, htmltest.ByID(page, "host"), "no single-host choice for a multi-host profile")

	// Too few readers: re-rendered with the boxes as they were.
	form := url.Values{"profile_version": {fmt.Sprint(pv)}, "role.readers": {fmt.Sprint(a)}, "role.writer": {fmt.Sprint(c)}}
	status, body := postFormBody(t, pb, form)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	again := htmltest.Parse(t, body)
	require.Contains(t, htmltest.Text(htmltest.ByID(again, "role-readers")), "at least 2 hosts")
	checked := htmltest.All(again, func(n *html.Node) bool { return htmltest.Attr(n, "name") == "role.writer" && hasAttr(n, "checked") })
	require.Len(t, checked, 1, "the writer's box stays ticked")

	form["role.readers"] = []string{fmt.Sprint(a), fmt.Sprint(b)}
	res := pb.postForm(t, pb.engineer, pb.url("/runs"), form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "/runs/")
}

// A run whose fio steps write outside a host's places is refused when it
// is requested, naming the host's places: through the API for a role's
// host (roles.NAME), and in the browser's form, for a role's host and for
// a one-host run (host). No run starts.
func TestRunRequestsWritingOutsideAHostsPlacesAreRefused(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	pv := pb.multiHostProfile(t)
	a, b := pb.pinnedHost(t, "lab-a"), pb.pinnedHost(t, "lab-b")
	other, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-other", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key",
		WritePlaces: []string{"/srv/other", "/dev/nvme1n1"}, AllowDestructive: true})
	require.NoError(t, err)
	require.NoError(t, pb.store.PinHostKeys(ctx, pb.programID, other, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly", "SHA256:fake", nil))
	writer := "step write writes (rw randwrite) to /mnt/accord/write.dat, which is not a place where lab-other lets tests write (/srv/other, /dev/nvme1n1 (device, destructive steps only))"

	// The API: the writer role's host.
	raw, err := json.Marshal(map[string]any{"profile_version_id": pv, "roles": map[string]any{"readers": []int64{a, b}, "writer": []int64{other}}})
	require.NoError(t, err)
	r, err := http.NewRequest(http.MethodPost, pb.ts.URL+fmt.Sprintf("/api/v1/programs/%d/runs", pb.programID), bytes.NewReader(raw))
	require.NoError(t, err)
	r.Header.Set("Authorization", "Bearer "+pb.engToken)
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	var out struct {
		Fields map[string]string `json:"fields"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	res.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Equal(t, "Refused: "+writer+". Declare the places on the host's page.", out.Fields["roles.writer"])
	require.NotContains(t, out.Fields, "roles.readers", "reads are judged on the host, where the probe sees the files")

	// The browser's form: the same, under the role's boxes.
	status, body := postFormBody(t, pb, url.Values{"profile_version": {fmt.Sprint(pv)}, "role.readers": {fmt.Sprint(a), fmt.Sprint(b)}, "role.writer": {fmt.Sprint(other)}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	page := htmltest.Parse(t, body)
	require.Contains(t, htmltest.Text(htmltest.ByID(page, "role-writer")), writer)

	// A one-host run: under the host's choice.
	write := acceptance.ProfileSpec{Name: "overwrite", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Steps: []acceptance.StepSpec{{Name: "w", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "write", BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
			Size: 8 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: "/home/lab/notes.txt"}}}}.Normalized()
	_, nv, _, err := prepareSpec(profileOps, write)
	require.NoError(t, err)
	_, wv, err := pb.store.CreateSpec(ctx, store.KindProfile, pb.programID, nv)
	require.NoError(t, err)
	status, body = postFormBody(t, pb, url.Values{"profile_version": {fmt.Sprint(wv.ID)}, "host": {fmt.Sprint(other)}, "confirm_readiness": {"1"}, "confirm_warnings": {"1"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	page = htmltest.Parse(t, body)
	errText := htmltest.All(page, func(n *html.Node) bool { return htmltest.Attr(n, "class") == "error-text" })
	var texts []string
	for _, n := range errText {
		texts = append(texts, htmltest.Text(n))
	}
	require.Contains(t, texts, "Refused: step w writes (rw write) to /home/lab/notes.txt, which is not a place where lab-other lets tests write (/srv/other, /dev/nvme1n1 (device, destructive steps only)). Declare the places on the host's page.")

	var n int
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&n))
	require.Zero(t, n, "no refused request started a run")
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func postFormBody(t *testing.T, pb *programBundle, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, pb.ts.URL+pb.url("/runs"), strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", pb.ts.URL)
	res, err := pb.engineer.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}
