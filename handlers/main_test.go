package handlers

import (
	"testing"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/web/browsertest"
)

// TestMain makes the accounts the tests create cheap to hash and check
// (auth's own tests keep the production cost), and stops the Chromium this
// package's browser tests share.
func TestMain(m *testing.M) {
	auth.UseMinimalCostInTests()
	browsertest.Main(m)
}
