package sshtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// AccordPackage is the main package built by BuildAccord.
const AccordPackage = "github.com/accordlab/accord"

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// BuildAccord builds the accord binary once per test process (static,
// CGO_ENABLED=0) and returns its path. The binary lives in a temporary
// folder shared by the process's tests; RemoveBuild deletes it (call it
// from TestMain after m.Run).
func BuildAccord(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
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

// RemoveBuild deletes the binary built by BuildAccord, if any.
func RemoveBuild() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}
