package handlers

import (
	"os"
	"testing"

	"github.com/accordlab/accord/internal/testparallel"
	"github.com/accordlab/accord/web/browsertest"
)

// TestMain runs more tests at once than go test's default (most here wait
// for runs, a lab host or the browser) and stops the Chromium this
// package's browser tests share.
func TestMain(m *testing.M) {
	testparallel.Default(4)
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}
