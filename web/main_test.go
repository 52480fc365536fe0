package web

import (
	"testing"

	"github.com/accordlab/accord/web/browsertest"
)

// TestMain stops the Chromium this package's browser tests share.
func TestMain(m *testing.M) { browsertest.Main(m) }
