// Package emulatortest serves Accord's inference emulator on loopback for
// a test.
package emulatortest

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/accordlab/accord/runners/probe/emulator"
)

// Serve starts an emulator with cfg on 127.0.0.1 until the test ends and
// returns its API's base URL (http://127.0.0.1:PORT/v1; its Prometheus
// metrics are at /metrics beside /v1). Its notes go to notes (nil: none).
func Serve(t testing.TB, cfg emulator.Config, notes io.Writer) string {
	t.Helper()
	if notes == nil {
		notes = io.Discard
	}
	srv, err := emulator.New(cfg, notes)
	if err != nil {
		t.Fatalf("emulatortest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatalf("emulatortest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String() + "/v1"
}
