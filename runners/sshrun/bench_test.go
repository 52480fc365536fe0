package sshrun_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
)

// BenchmarkRunTrue measures the round trip of a trivial command on an open
// connection to a local sshd: a session opened, `true` run by the login
// shell, the exit status back.
func BenchmarkRunTrue(b *testing.B) {
	sshd := sshtest.StartSSHD(b, sshtest.Options{})
	c, err := sshrun.Dial(context.Background(), targetOf(sshd), testOpts)
	require.NoError(b, err)
	defer c.Close()
	for b.Loop() {
		res, err := c.Run(context.Background(), []string{"true"}, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v, exit %d", err, res.ExitCode)
		}
	}
}

// BenchmarkUploadProbe measures EnsureProbe's upload of the accord binary
// (into a fresh cache each time) to a local sshd.
func BenchmarkUploadProbe(b *testing.B) {
	binary := sshtest.BuildAccord(b)
	fi, err := os.Stat(binary)
	require.NoError(b, err)
	sshd := sshtest.StartSSHD(b, sshtest.Options{})
	opts := testOpts
	b.SetBytes(fi.Size())
	for b.Loop() {
		b.StopTimer()
		opts.RemoteBase = b.TempDir()
		c, err := sshrun.Dial(context.Background(), targetOf(sshd), opts)
		require.NoError(b, err)
		b.StartTimer()
		p, err := c.EnsureProbe(context.Background(), sshrun.ProbeSource{File: binary})
		b.StopTimer()
		require.NoError(b, err)
		require.True(b, p.Uploaded)
		c.Close()
		b.StartTimer()
	}
}
