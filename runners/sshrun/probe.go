package sshrun

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// ProbeSource says where the probe binary to upload comes from. File wins
// when set; otherwise Dir/accord-linux-ARCH for the host's architecture;
// otherwise the running executable, if it is a Linux binary of that
// architecture.
type ProbeSource struct {
	File string // one binary; its ELF machine must match the host
	Dir  string // prebuilt static binaries named accord-linux-amd64, accord-linux-arm64
}

// Probe is the probe binary on the host.
type Probe struct {
	Path      string // on the host, relative to the login home unless absolute
	SHA256    string // hex
	Arch      string // amd64, arm64
	Uploaded  bool   // false when the cached copy was already right
	BytesSent int64  // bytes of the binary sent (0 when not uploaded)
}

// ErrUnsupportedArch: no probe binary for the host's machine type.
var ErrUnsupportedArch = errors.New("sshrun: no probe binary for the host's architecture")

// ErrNoProbe: a probe command was asked for before EnsureProbe or UseProbe.
var ErrNoProbe = errors.New("sshrun: no probe on this client (call EnsureProbe or UseProbe first)")

// Exit codes of the remote helper scripts.
const (
	exitMissing  = 3 // the cached probe is missing or wrong
	exitMismatch = 6 // the uploaded bytes did not hash as expected
)

// checkProbeScript exits 0 when $1 is an executable regular file whose
// SHA-256 is $2, exitMissing otherwise.
const checkProbeScript = `f=$1 sum=$2
[ -f "$f" ] && [ -x "$f" ] || exit 3
set -- $(sha256sum -b -- "$f") || exit 3
[ "$1" = "$sum" ] || exit 3
exit 0`

// uploadProbeScript writes stdin to a temporary name in $1, checks its
// SHA-256 against $3, makes it executable and renames it to $2, so that
// the cache never holds a partial binary, even when the connection drops
// mid-upload (cat then sees end of input early and the digest differs).
const uploadProbeScript = `dir=$1 final=$2 sum=$3
umask 022
mkdir -p -- "$dir" || exit 1
tmp="$dir/.accord.tmp.$$"
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp" || exit 1
set -- $(sha256sum -b -- "$tmp") || exit 1
if [ "$1" != "$sum" ]; then echo "uploaded probe hashes to $1, want $sum" >&2; exit 6; fi
chmod 0755 -- "$tmp" && mv -f -- "$tmp" "$final" || exit 1
trap - EXIT
exit 0`

// Arch runs uname -m on the host and names the architecture as Go does.
func (c *Client) Arch(ctx context.Context) (string, error) {
	res, err := c.Run(ctx, []string{"uname", "-m"}, nil)
	if err != nil {
		return "", fmt.Errorf("sshrun: uname -m: %w", err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("sshrun: uname -m: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	m := strings.TrimSpace(string(res.Stdout))
	switch m {
	case "x86_64", "amd64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("%w: uname -m says %q", ErrUnsupportedArch, m)
}

// EnsureProbe makes sure the host has the probe binary for its
// architecture in BASE/probe/<sha256>/accord and uses it for this client's
// probe commands. A cached copy with the right digest is kept (nothing is
// sent); a missing or damaged one is uploaded to a temporary name, checked
// on the host, made executable and renamed into place.
func (c *Client) EnsureProbe(ctx context.Context, src ProbeSource) (Probe, error) {
	arch, err := c.Arch(ctx)
	if err != nil {
		return Probe{}, err
	}
	local, err := src.pick(arch)
	if err != nil {
		return Probe{}, err
	}
	sum, size, err := fileDigest(local)
	if err != nil {
		return Probe{}, err
	}
	p := Probe{Path: CachedProbePath(c.opts.RemoteBase, sum), SHA256: sum, Arch: arch}
	dir := path.Dir(p.Path)
	if err := checkPath(p.Path); err != nil {
		return Probe{}, err
	}

	res, err := c.Run(ctx, shScript(checkProbeScript, p.Path, sum), nil)
	if err != nil {
		return Probe{}, fmt.Errorf("sshrun: check cached probe: %w", err)
	}
	switch res.ExitCode {
	case 0:
		c.UseProbe(p.Path)
		return p, nil
	case exitMissing:
	default:
		return Probe{}, fmt.Errorf("sshrun: check cached probe: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}

	f, err := os.Open(local)
	if err != nil {
		return Probe{}, fmt.Errorf("sshrun: open probe binary: %w", err)
	}
	defer f.Close()
	counted := &countingReader{r: f}
	res, err = c.Run(ctx, shScript(uploadProbeScript, dir, p.Path, sum), counted)
	if err != nil {
		return Probe{}, fmt.Errorf("sshrun: upload probe (%d of %d bytes sent): %w", counted.n, size, err)
	}
	if res.ExitCode != 0 {
		return Probe{}, fmt.Errorf("sshrun: upload probe: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	p.Uploaded, p.BytesSent = true, counted.n
	c.UseProbe(p.Path)
	return p, nil
}

// CachedProbePath is where EnsureProbe keeps the probe binary of a digest
// under a host's remote base folder.
func CachedProbePath(remoteBase, sha256Hex string) string {
	return path.Join(remoteBase, "probe", sha256Hex, "accord")
}

// UseProbe sets the probe binary path on the host for this client's probe
// commands, for a reconnection that knows it from an earlier EnsureProbe.
func (c *Client) UseProbe(remotePath string) {
	c.mu.Lock()
	c.probe = remotePath
	c.mu.Unlock()
}

func (c *Client) probePath() (string, error) {
	c.mu.Lock()
	p := c.probe
	c.mu.Unlock()
	if p == "" {
		return "", ErrNoProbe
	}
	return p, checkPath(p)
}

// pick chooses the local binary for a host of architecture arch.
func (s ProbeSource) pick(arch string) (string, error) {
	switch {
	case s.File != "":
		if err := checkELF(s.File, arch); err != nil {
			return "", err
		}
		return s.File, nil
	case s.Dir != "":
		f := filepath.Join(s.Dir, "accord-linux-"+arch)
		if err := checkELF(f, arch); err != nil {
			return "", err
		}
		return f, nil
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != arch {
		return "", fmt.Errorf("%w: host is linux/%s, this server is %s/%s and no prebuilt binaries were given",
			ErrUnsupportedArch, arch, runtime.GOOS, runtime.GOARCH)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sshrun: running executable: %w", err)
	}
	return exe, nil
}

// checkELF makes sure file is a Linux ELF executable for arch, so that a
// wrong binary is caught here rather than as "exec format error" there.
func checkELF(file, arch string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("sshrun: probe binary %s: %w", file, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		return fmt.Errorf("%w: %s is for %s, host is %s", ErrUnsupportedArch, file, f.Machine, arch)
	}
	return nil
}

// fileDigest hashes a local file, remembering the answer by path, size and
// modification time so that every run does not re-read a large binary.
func fileDigest(file string) (string, int64, error) {
	st, err := os.Stat(file)
	if err != nil {
		return "", 0, fmt.Errorf("sshrun: probe binary: %w", err)
	}
	key := digestKey{file, st.Size(), st.ModTime()}
	if v, ok := digests.Load(key); ok {
		return v.(string), st.Size(), nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", 0, fmt.Errorf("sshrun: probe binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", 0, fmt.Errorf("sshrun: hash probe binary: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	digests.Store(key, sum)
	return sum, st.Size(), nil
}

type digestKey struct {
	path  string
	size  int64
	mtime time.Time
}

var digests sync.Map // digestKey → hex sha256

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "(no message)"
	}
	return s
}

// checkPath accepts the remote paths this package passes to commands:
// clean, without "..", not starting with "-", of letters, digits and
// _ . / - + @ % , : = only. Quote would carry anything safely; this keeps
// what reaches the host boring and readable in logs.
func checkPath(p string) error {
	if p == "" || len(p) > 1024 {
		return fmt.Errorf("%w: remote path %q: empty or too long", ErrBadTarget, p)
	}
	if p[0] == '-' {
		return fmt.Errorf("%w: remote path %q starts with '-'", ErrBadTarget, p)
	}
	if path.Clean(p) != p {
		return fmt.Errorf("%w: remote path %q is not clean", ErrBadTarget, p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("%w: remote path %q has ..", ErrBadTarget, p)
		}
	}
	for i := 0; i < len(p); i++ {
		ch := p[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("_./-+@%,:=", ch) >= 0) {
			return fmt.Errorf("%w: remote path %q has character %q", ErrBadTarget, p, ch)
		}
	}
	return nil
}
