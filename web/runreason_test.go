package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// A judged run's reason does not repeat its verdict ("Reason: verdict:
// PASS"); what follows the verdict, and every other reason, is said.
func TestRunReasonTextDoesNotRepeatTheVerdict(t *testing.T) {
	t.Parallel()
	require.Empty(t, RunReasonText(store.Run{State: store.RunDone, Verdict: "PASS", Reason: "verdict: PASS"}))
	require.Equal(t, "contaminated: another run measured on the host meanwhile",
		RunReasonText(store.Run{State: store.RunDone, Verdict: "FAIL", Reason: "verdict: FAIL (contaminated: another run measured on the host meanwhile)"}))
	require.Equal(t, "ssh: handshake failed", RunReasonText(store.Run{State: store.RunFailed, Reason: "ssh: handshake failed"}))
	require.Equal(t, "waiting for host", RunReasonText(store.Run{State: "queued", Reason: "waiting for host"}))
}
