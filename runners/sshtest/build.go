package sshtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/accordlab/accord/runners/sshrun"
)

// AccordPackage is the main package built by BuildAccord.
const AccordPackage = "github.com/accordlab/accord"

// TestBinaryEnv names the environment variable that gives BuildAccord an
// accord binary built from this tree already.
const TestBinaryEnv = "ACCORD_TEST_BINARY"

var build struct {
	once sync.Once
	dir  string
	path string
	err  error

	sumOnce sync.Once
	sum     string // the binary's SHA-256, hex
	sumErr  error
}

// BuildAccord builds the accord binary once per test process (static,
// CGO_ENABLED=0) and returns its path. The binary lives in a temporary
// folder shared by the process's tests; RemoveBuild deletes it (call it
// from TestMain after m.Run).
//
// When TestBinaryEnv names a file, that is the binary: make test builds
// one, the same way, for all its test processes, which would otherwise
// each link their own (about 4 CPU-seconds each, with the go command's
// checks).
func BuildAccord(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if given := os.Getenv(TestBinaryEnv); given != "" {
			if _, build.err = os.Stat(given); build.err == nil {
				build.path = given
			}
			return
		}
		build.dir, build.err = os.MkdirTemp("", "accord-sshtest-build-")
		if build.err != nil {
			return
		}
		out := filepath.Join(build.dir, "accord")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// Stripped as the probe binaries are (the Makefile's): a quarter
		// less to upload in every test that uploads it.
		cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-s -w", "-o", out, AccordPackage)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build %s: %w\n%s", AccordPackage, err, msg)
			return
		}
		build.path = out
	})
	if build.err != nil {
		t.Fatalf("sshtest: %v", build.err)
	}
	return build.path
}

// SeedProbe puts the BuildAccord binary where EnsureProbe looks for it in
// the remote base folder remoteBase of a loopback lab host, as an earlier
// run would have left it, so that a test about something else does not
// upload 33 MB over SSH (about a CPU-second of sshd's each time). Tests of
// the upload itself do not seed. It is a hard link to the build when it
// can be: the upload and the probe only ever replace that file, never
// write into it.
func SeedProbe(t testing.TB, remoteBase string) {
	t.Helper()
	bin := BuildAccord(t)
	build.sumOnce.Do(func() {
		data, err := os.ReadFile(bin)
		if err != nil {
			build.sumErr = err
			return
		}
		sum := sha256.Sum256(data)
		build.sum = hex.EncodeToString(sum[:])
	})
	if build.sumErr != nil {
		t.Fatalf("sshtest: %v", build.sumErr)
	}
	dst := sshrun.CachedProbePath(remoteBase, build.sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	if err := os.Link(bin, dst); err == nil {
		return
	}
	data, err := os.ReadFile(bin)
	if err == nil {
		err = os.WriteFile(dst, data, 0o755)
	}
	if err != nil {
		t.Fatalf("sshtest: seed the probe: %v", err)
	}
}

// RemoveBuild deletes the binary built by BuildAccord, if any.
func RemoveBuild() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}
