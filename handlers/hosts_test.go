package handlers

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	xhtml "golang.org/x/net/html"

	"github.com/accordlab/accord/internal/closedport"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/htmltest"
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

// syncBuffer is a buffer safe for the server's logger and a test reading it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Scanning a host's key, and checking a host, told any engineer what
// listens where on the server's networks: "connection refused: is sshd
// running on that port?", "no answer", "did not complete an SSH
// handshake", or the SSH library's error on an HTTP server. Against the
// real server, PostgreSQL, River and sshd: a closed port, a port that
// accepts and stays silent, an HTTP server, a server that sends a banner
// and hangs up, and an address nobody answers at all read "could not
// connect", word for word the same (the socket's error goes to the
// server's log); a real sshd still shows its key.
func TestAttackHostScanAndCheckAsAPortScanner(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	pb := setupProgram(t, setupOpts{logTo: logs})
	ctx := context.Background()

	closedPort := closedport.Port(t)
	listen := func(serve func(net.Conn)) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go serve(c)
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	silent := listen(func(c net.Conn) { time.Sleep(10 * time.Second); c.Close() })
	banner := listen(func(c net.Conn) { _, _ = c.Write([]byte("220 mail.lab.example ESMTP ready\r\n")); c.Close() })
	httpServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(httpServer.Close)
	webPort := httpServer.Listener.Addr().(*net.TCPAddr).Port
	sshd := sshtest.StartSSHD(t, sshtest.Options{})

	// The hosts are pinned to some real key (the lab sshd's) to be checked.
	someKey, someFingerprint := sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey)
	host := func(name, address string, port int) (int64, string) {
		key, err := sshrun.GenerateKey("accord@" + name)
		require.NoError(t, err)
		id, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: name, Address: address, Port: port, Username: "root", AuthMethod: "key", PublicKey: key.AuthorizedKey})
		require.NoError(t, err)
		sealed, err := pb.sealer.Seal(key.PrivatePEM, labhost.SealLabel(id))
		require.NoError(t, err)
		require.NoError(t, pb.store.SetHostSealedKey(ctx, id, sealed))
		return id, pb.url(fmt.Sprintf("/hosts/%d", id))
	}
	scanText := func(hostURL string) string {
		res, body := pb.postPage(t, pb.engineer, hostURL+"/scan", nil)
		require.Equal(t, http.StatusOK, res.StatusCode)
		page := htmltest.Parse(t, body)
		result := htmltest.ByID(page, "scan-result")
		require.NotNil(t, result, body)
		cells := htmltest.All(result, func(n *xhtml.Node) bool { return htmltest.Attr(n, "class") == "error-text" })
		if len(cells) == 0 {
			return "key: " + htmltest.Text(result)
		}
		return htmltest.Text(cells[0])
	}
	targets := []struct {
		name    string
		address string
		port    int
		logged  string
	}{
		{"closed port", "127.0.0.1", closedPort, "connection refused"},
		{"silent listener", "127.0.0.1", silent, "handshake timed out"},
		{"HTTP server", "127.0.0.1", webPort, "ssh:"},
		{"SMTP-like banner", "127.0.0.1", banner, "ssh:"},
		{"nobody there", "192.0.2.1", 22, "connect 192.0.2.1:22"},
	}
	var hostIDs []int64
	for _, c := range targets {
		id, hostURL := host(strings.ReplaceAll(c.name, " ", "-"), c.address, c.port)
		hostIDs = append(hostIDs, id)
		require.Equal(t, "could not connect", scanText(hostURL), c.name)
		require.Contains(t, logs.String(), c.logged, "%s: the detail is in the server's log", c.name)
		require.NoError(t, pb.store.PinHostKeys(ctx, pb.programID, id, someKey, someFingerprint, nil))
	}
	_, sshdURL := host("real-sshd", sshd.Addr, sshd.Port)
	require.Contains(t, scanText(sshdURL), sshrun.Fingerprint(sshd.HostKey), "a real SSH server still shows its key")

	// Checking the hosts (pinned to some key): the same two words.
	deps := jobs.Deps{Log: pb.log, Store: pb.store, Sealer: pb.sealer, Keyring: pb.keyring, Report: web.RenderReport, Runner: runners.Config{
		Options: sshrun.Options{DialTimeout: 2 * time.Second, HandshakeTimeout: 3 * time.Second, RemoteBase: t.TempDir()}, Probe: sshrun.ProbeSource{File: sshtest.BuildAccord(t)}}}
	client, err := river.NewClient(riverpgxv5.New(pb.pool), &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 5}},
		Workers: jobs.Register(deps), FetchPollInterval: 100 * time.Millisecond, TestOnly: true})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	for _, id := range hostIDs {
		res := pb.postForm(t, pb.engineer, pb.url(fmt.Sprintf("/hosts/%d/check", id)), nil)
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
	}
	for i, id := range hostIDs {
		require.Eventually(t, func() bool {
			h, err := pb.store.GetHost(ctx, pb.programID, id)
			return err == nil && h.LastCheckAt != nil
		}, 90*time.Second, 200*time.Millisecond, "%s: checked", targets[i].name)
		h, err := pb.store.GetHost(ctx, pb.programID, id)
		require.NoError(t, err)
		require.False(t, *h.LastCheckOK)
		require.Equal(t, "could not connect", h.LastCheckMessage, targets[i].name)
		_, page := pb.get(t, pb.engineer, pb.url(fmt.Sprintf("/hosts/%d", id)))
		require.Contains(t, page, "<span>could not connect</span>", targets[i].name)
	}
}
