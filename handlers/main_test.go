package handlers

import (
	"os"
	"testing"

	"github.com/accordlab/accord/web/browsertest"
)

// TestMain stops the Chromium this package's browser tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}
