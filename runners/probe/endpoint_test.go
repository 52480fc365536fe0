package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/closedport"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/wire"
)

// startTestEmulator serves Accord's inference emulator on loopback.
func startTestEmulator(t *testing.T) string {
	t.Helper()
	s, err := emulator.New(emulator.Config{Model: "m", BlockTokens: 16, BlockBytes: 4096, CacheBlocks: 64, ITL: time.Millisecond, DefaultMaxTokens: 16, Seed: 7}, io.Discard)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close() })
	return "http://" + ln.Addr().String() + "/v1"
}

// `accord probe endpoint` sends one small request and says what came back:
// the tokens and timings of a good answer, the server's refusal of a model
// it does not serve, a connection nobody answers.
func TestProbeEndpointCheck(t *testing.T) {
	t.Parallel()
	url := startTestEmulator(t)
	run := func(args ...string) (int, wire.EndpointCheck, string) {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"endpoint"}, args...), &out, &errOut)
		var c wire.EndpointCheck
		if code == ExitOK {
			require.NoError(t, json.Unmarshal(out.Bytes(), &c), out.String())
		}
		return code, c, errOut.String()
	}

	code, c, _ := run("--url", url, "--model", "m")
	require.Equal(t, ExitOK, code)
	require.True(t, c.OK, "%+v", c)
	require.Equal(t, 8, c.OutputTokens, "the small request asks for 8 tokens")
	require.Greater(t, c.TTFTMs, 0.0)
	require.GreaterOrEqual(t, c.E2EMs, c.TTFTMs)
	require.Empty(t, c.Error)

	code, c, _ = run("--url", url, "--model", "not-served", "--api", "completions")
	require.Equal(t, ExitOK, code)
	require.False(t, c.OK)
	require.Equal(t, 404, c.HTTPStatus)
	require.Equal(t, "http", c.ErrorKind)
	require.Contains(t, c.Error, "not-served")

	closed := "http://" + closedport.Addr(t) + "/v1"
	code, c, _ = run("--url", closed, "--model", "m", "--timeout", "5s")
	require.Equal(t, ExitOK, code)
	require.False(t, c.OK)
	require.Equal(t, "connect", c.ErrorKind)

	// The URL is checked before anything is sent.
	code, _, stderr := run("--url", "http://user:pw@10.0.0.1/v1", "--model", "m")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "must not contain a user name or password")
	code, _, _ = run("--url", "file:///etc/passwd", "--model", "m")
	require.Equal(t, ExitUsage, code)
}
