package handlers

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/web"
)

// An engineer registers a host, installs Accord's key on it, scans and
// pins its host key, and checks it: the facts and the round trip appear.
func TestRegisterScanPinAndCheckAHost(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()

	res := pb.postForm(t, pb.engineer, pb.url("/hosts"), url.Values{"name": {"gpu-node-1"}, "address": {"127.0.0.1"}, "port": {"22"},
		"username": {"root"}, "auth_method": {"key"}, "labels": {"gpu=H100\ntransport=nvmeof-rdma"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	hostURL := res.Header.Get("Location")
	_, page := pb.get(t, pb.engineer, hostURL)
	m := regexp.MustCompile(`<pre id="host-public-key">([^<]+)</pre>`).FindStringSubmatch(page)
	require.NotNil(t, m, "the public key to install is shown")
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(m[1]))
	require.NoError(t, err)
	var sealed []byte
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT sealed_private_key FROM hosts WHERE name = 'gpu-node-1'`).Scan(&sealed))
	require.NotContains(t, string(sealed), "PRIVATE KEY", "the private key is sealed")

	// The lab's administrator installs the key; the host runs sshd.
	sshd := sshtest.StartSSHD(t, sshtest.Options{AuthorizedKeys: []ssh.PublicKey{pub}})
	_, err = pb.pool.Exec(ctx, `UPDATE hosts SET port = $1, username = $2 WHERE name = 'gpu-node-1'`, sshd.Port, sshd.User)
	require.NoError(t, err)

	// A run cannot start before the key is pinned.
	_, page = pb.get(t, pb.engineer, hostURL)
	require.Contains(t, page, "not confirmed")

	res2, page := pb.postPage(t, pb.engineer, hostURL+"/scan", nil)
	require.Equal(t, http.StatusOK, res2.StatusCode)
	require.Contains(t, page, sshrun.Fingerprint(sshd.HostKey), "the scanned fingerprint is shown to confirm")
	key := regexp.MustCompile(`name="key0" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, key)
	res = pb.postForm(t, pb.engineer, hostURL+"/pin", url.Values{"key0": {strings.ReplaceAll(key[1], "&#43;", "+")}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = pb.get(t, pb.engineer, hostURL)
	require.Contains(t, page, `id="host-fingerprint">`+sshrun.Fingerprint(sshd.HostKey))

	// Check host: a River job connects, uploads the probe, takes facts.
	deps := jobs.Deps{Log: pb.log, Store: pb.store, Sealer: pb.sealer, Keyring: pb.keyring, Report: web.RenderReport, Runner: runners.Config{
		Options: sshrun.Options{RemoteBase: t.TempDir()}, Probe: sshrun.ProbeSource{File: sshtest.BuildAccord(t)}}}
	client, err := river.NewClient(riverpgxv5.New(pb.pool), &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers: jobs.Register(deps), FetchPollInterval: 100 * time.Millisecond, TestOnly: true})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	res = pb.postForm(t, pb.engineer, hostURL+"/check", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Eventually(t, func() bool {
		h, err := pb.store.ListHosts(ctx, pb.programID)
		return err == nil && len(h) == 1 && h[0].LastCheckOK != nil && *h[0].LastCheckOK
	}, 90*time.Second, 200*time.Millisecond, "the check succeeds")
	_, page = pb.get(t, pb.viewer, hostURL)
	require.Contains(t, page, `id="host-facts"`)
	require.Contains(t, page, "round trip")
	history, err := pb.store.HostFactsHistory(ctx, mustHostID(t, pb), 5)
	require.NoError(t, err)
	require.Len(t, history, 1)
}

func mustHostID(t *testing.T, pb *programBundle) int64 {
	t.Helper()
	hosts, err := pb.store.ListHosts(context.Background(), pb.programID)
	require.NoError(t, err)
	require.NotEmpty(t, hosts)
	return hosts[0].ID
}

// An engineer cannot point a host at an ssh-agent socket the operator did
// not allow (the server account's agent, say): the form refuses it and
// nothing is saved. (sshrun refuses it at dial time as well.)
func TestAgentSocketsOnlyFromTheOperatorsList(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	req, err := http.NewRequest(http.MethodPost, pb.ts.URL+pb.url("/hosts"), strings.NewReader(url.Values{"name": {"borrowed"}, "address": {"127.0.0.1"}, "port": {"22"},
		"username": {"root"}, "auth_method": {"agent"}, "agent_socket": {"/run/user/0/ssh-agent.sock"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := pb.engineer.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, string(body), "does not use ssh-agent sockets")
	var n int
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT count(*) FROM hosts WHERE name = 'borrowed'`).Scan(&n))
	require.Zero(t, n)
}

// An owner declares where tests may write when registering a host and
// later on its page; a device needs destructive steps allowed, and
// relative, too broad or system places are refused with the reason. An
// engineer registers hosts but declares no place: their form has no such
// field, a declaration they send anyway is refused (422 on registering,
// 403 on the host's form), and the host's page shows them the places
// without the form.
func TestHostWritePlacesAreDeclaredAndChecked(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	form := func(name, places string, destructive bool) url.Values {
		v := url.Values{"name": {name}, "address": {"127.0.0.1"}, "port": {"22"}, "username": {"root"}, "auth_method": {"key"}, "write_places": {places}}
		if destructive {
			v.Set("allow_destructive", "1")
		}
		return v
	}
	for places, want := range map[string]string{
		"mnt/scratch":             "must be an absolute path",
		"/":                       "too broad",
		"/mnt/scratch/../x":       "must be a clean path",
		"/dev/nvme1n1":            "is a device: only destructive steps write devices",
		"/etc":                    "/etc is a system location: tests never write there, whatever a host declares",
		"/etc/passwd":             "/etc/passwd is under /etc, a system location",
		"/proc/1/root/etc/passwd": "/proc/1/root/etc/passwd is under /proc, a system location",
		"/usr/lib":                "is under /usr, a system location",
		"/boot":                   "/boot is a system location",
		"/root/.ssh":              "SSH configuration folder",
	} {
		res, page := pb.postPage(t, pb.owner, pb.url("/hosts"), form("lab-9", places, false))
		require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, places)
		require.Contains(t, html.UnescapeString(page), want, places)
	}

	// An engineer's registration form has no places; sent anyway, they are
	// refused, and so is allowing destructive steps.
	_, page := pb.get(t, pb.engineer, pb.url("/hosts/new"))
	require.NotContains(t, page, `name="write_places"`)
	require.Contains(t, page, `id="write-places-owners"`)
	for _, f := range []url.Values{form("lab-eng", "/mnt/nvme/accord", false), form("lab-eng", "", true)} {
		res, page := pb.postPage(t, pb.engineer, pb.url("/hosts"), f)
		require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
		require.Contains(t, page, "Only the program&#39;s owners declare where tests may write")
	}
	res := pb.postForm(t, pb.engineer, pb.url("/hosts"), form("lab-eng", "", false))
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "an engineer registers a host without places")
	engHostURL := res.Header.Get("Location")

	_, page = pb.get(t, pb.owner, pb.url("/hosts/new"))
	require.Contains(t, page, `name="write_places"`)
	res = pb.postForm(t, pb.owner, pb.url("/hosts"), form("lab-9", "/mnt/nvme/accord\n\n  /dev/nvme1n1  \n", true))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	hostURL := res.Header.Get("Location")
	var places []string
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT write_places FROM hosts WHERE name = 'lab-9'`).Scan(&places))
	require.Equal(t, []string{"/mnt/nvme/accord", "/dev/nvme1n1"}, places)
	_, page = pb.get(t, pb.engineer, hostURL)
	require.Contains(t, page, "<code>/mnt/nvme/accord</code>")
	require.NotContains(t, page, `id="write-places-panel"`, "an engineer sees the places, not the form")
	require.Contains(t, page, "(set by the program's owners)")
	_, page = pb.get(t, pb.owner, hostURL)
	require.Contains(t, page, `id="write-places-panel"`)

	// The host's form: owners only.
	for _, c := range []*http.Client{pb.engineer, pb.viewer} {
		for _, u := range []string{hostURL, engHostURL} {
			res = pb.postForm(t, c, u+"/write-places", url.Values{"write_places": {"/srv/scratch"}, "allow_destructive": {"1"}})
			require.Equal(t, http.StatusForbidden, res.StatusCode)
		}
	}
	res = pb.postForm(t, pb.owner, hostURL+"/write-places", url.Values{"write_places": {"/srv/scratch"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var destructive bool
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT write_places, allow_destructive FROM hosts WHERE name = 'lab-9'`).Scan(&places, &destructive))
	require.Equal(t, []string{"/srv/scratch"}, places)
	require.False(t, destructive)
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT write_places, allow_destructive FROM hosts WHERE name = 'lab-eng'`).Scan(&places, &destructive))
	require.Empty(t, places, "the engineer's declaration changed nothing")
	require.False(t, destructive)
	for places, want := range map[string]string{"relative": "must be an absolute path", "/srv/scratch\n/etc": "/etc is a system location"} {
		res2, page := pb.postPage(t, pb.owner, hostURL+"/write-places", url.Values{"write_places": {places}})
		require.Equal(t, http.StatusUnprocessableEntity, res2.StatusCode)
		require.Contains(t, page, want)
	}
}
