// Package fakebin writes the stand-in programs tests run in place of a
// host's tools (nvme, gdsio, the GPU vendors' tools).
//
// A program written by the test process itself can fail to start with
// "text file busy": while the file is open for writing, another test
// running in parallel may fork, and its child holds a copy of the
// descriptor until it execs. So the script is written to a plain file
// first and installed by a child process (install(1)), whose descriptor no
// other fork can inherit.
package fakebin

import (
	"os"
	"os/exec"
	"testing"
)

// Write installs script at path as an executable.
func Write(tb testing.TB, path, script string) {
	tb.Helper()
	src := path + ".script"
	if err := os.WriteFile(src, []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("install", "-m", "0755", src, path).CombinedOutput(); err != nil {
		tb.Fatalf("install %s: %v: %s", path, err, out)
	}
	if err := os.Remove(src); err != nil {
		tb.Fatal(err)
	}
}
