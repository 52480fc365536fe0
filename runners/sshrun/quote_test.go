package sshrun

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// shells are the POSIX shells a login shell may be that are installed here.
func shells(t testing.TB) []string {
	var out []string
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/dash"} {
		if _, err := exec.LookPath(sh); err == nil {
			out = append(out, sh)
		}
	}
	if len(out) == 0 {
		t.Fatal("no POSIX shell found")
	}
	return out
}

// throughShell has sh parse a command line made by CommandLine and prints
// each argument it sees, NUL-terminated, the way a login shell on the host
// would run it.
func throughShell(t testing.TB, shell string, args []string) []string {
	t.Helper()
	line, err := CommandLine(append([]string{"printf", `%s\0`}, args...))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, shell, "-c", line).Output()
	require.NoError(t, err, "command line %q", line)
	got := strings.Split(string(out), "\x00")
	return got[:len(got)-1]
}

func TestQuote(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
	}{
		{"", "''"},
		{"plain", "plain"},
		{"/abs/path-1.2_x", "/abs/path-1.2_x"},
		{".accord/probe/0123abcd/accord", ".accord/probe/0123abcd/accord"},
		{"--dir", "--dir"},
		{"a=b", "a=b"},
		{"=cmd", "'=cmd'"},
		{"with space", "'with space'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$HOME", "'$HOME'"},
		{"`id`", "'`id`'"},
		{"$(id)", "'$(id)'"},
		{"a;b", "'a;b'"},
		{"a&&b", "'a&&b'"},
		{"a|b", "'a|b'"},
		{"~", "'~'"},
		{"~root", "'~root'"},
		{"*", "'*'"},
		{"a?b", "'a?b'"},
		{"[a]", "'[a]'"},
		{"{a,b}", "'{a,b}'"},
		{"back\\slash", `'back\slash'`},
		{"line\nbreak", "'line\nbreak'"},
		{"tab\there", "'tab\there'"},
		{`"dq"`, `'"dq"'`},
		{"!bang", "'!bang'"},
		{"#hash", "'#hash'"},
		{"héllo", "'héllo'"},
		{"a>b<c", "'a>b<c'"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, Quote(tc.in), "Quote(%q)", tc.in)
	}

	// Every case survives every installed shell unchanged.
	args := make([]string, len(cases))
	for i, tc := range cases {
		args[i] = tc.in
	}
	for _, sh := range shells(t) {
		require.Equal(t, args, throughShell(t, sh, args), sh)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	line, err := CommandLine([]string{".accord/probe/ab/accord", "probe", "tail", "--dir", "runs/1-1", "--offset", "42"})
	require.NoError(t, err)
	require.Equal(t, ".accord/probe/ab/accord probe tail --dir runs/1-1 --offset 42", line)

	_, err = CommandLine(nil)
	require.Error(t, err)
	_, err = CommandLine([]string{"echo", "a\x00b"})
	require.ErrorIs(t, err, ErrNULInArgument)

	// A constant script with positional arguments reaches sh intact.
	script := shScript(`printf '%s|' "$@"`, "a b", "it's", "$x")
	for _, sh := range shells(t) {
		line, err := CommandLine(script)
		require.NoError(t, err)
		out, err := exec.Command(sh, "-c", line).Output()
		require.NoError(t, err)
		require.Equal(t, "a b|it's|$x|", string(out))
	}
}

func TestCheckPath(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{".accord/runs/1-1", "/tmp/x/y", "a", ".accord/probe/" + strings.Repeat("ab", 32) + "/accord"} {
		require.NoError(t, checkPath(ok), ok)
	}
	for _, bad := range []string{"", "-rf", "a/../b", "..", "a//b", "a/", "./a", "a b", "a;b", "$HOME/x", "a\nb", "~/x", strings.Repeat("a", 1025)} {
		require.ErrorIs(t, checkPath(bad), ErrBadTarget, "%q", bad)
	}
}

// FuzzQuote checks that the shell hands back exactly what was quoted, for
// any string without NUL, with a real /bin/sh.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a", "it's", "''''", `'\''`, "$(id)", "`x`", "a\nb", "\xff\xfe", "~", "=x", "-n", "-e", "%s", "\\", "\"", "a b\tc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			_, err := CommandLine([]string{s})
			require.ErrorIs(t, err, ErrNULInArgument)
			return
		}
		q := Quote(s)
		// A quoted word is either plain or one single-quoted run with
		// escaped quotes: nothing else can reach the shell.
		if q != s {
			require.True(t, strings.HasPrefix(q, "'") && strings.HasSuffix(q, "'"), "%q", q)
		}
		got := throughShell(t, "/bin/sh", []string{s, "end"})
		require.Equal(t, []string{s, "end"}, got, "quoted as %q (valid UTF-8: %v)", q, utf8.ValidString(s))
		require.False(t, bytes.Contains([]byte(q), []byte{0}))
	})
}
