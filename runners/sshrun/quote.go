package sshrun

import (
	"errors"
	"fmt"
	"strings"
)

// An SSH exec request carries one string that the login shell of the remote
// user parses. Every remote command of this package is therefore an
// argument vector joined by CommandLine, each argument passed through Quote,
// and the arguments are only constants, validated hex digests, integers and
// paths this package generates or validates (see checkPath). The remote
// login shell must be a POSIX shell (sh, dash, bash, ksh, zsh).

// Quote returns s as one word of a POSIX shell command line: unchanged when
// it consists only of characters no shell treats specially, otherwise in
// single quotes, each single quote inside written as quote, backslash,
// quote, quote (end the quoted part, an escaped quote, start a new one):
//
//	it's  →  'it'\''s'
//
// Inside single quotes nothing is special, so any byte string but one
// holding NUL (which no argument can carry) comes out of the shell as it
// went in.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isPlainWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isPlainWord reports whether s needs no quoting: letters, digits and
// _ @ % + = : , . / - only, and not starting with characters some shells
// expand at the start of a word (~ is not in the set at all; = is harmless
// except as the first character of zsh's =cmd expansion).
func isPlainWord(s string) bool {
	if s[0] == '=' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("_@%+=:,./-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ErrNULInArgument means an argument held a NUL byte, which cannot be
// passed to a remote command.
var ErrNULInArgument = errors.New("sshrun: NUL byte in a command argument")

// CommandLine quotes every argument of argv and joins them with spaces.
func CommandLine(argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("sshrun: empty command")
	}
	var b strings.Builder
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("%w (argument %d)", ErrNULInArgument, i)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Quote(a))
	}
	return b.String(), nil
}

// shScript is an argument vector running a constant POSIX shell script with
// positional arguments: the script never contains data, only "$1", "$2"...
func shScript(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "accord-sh"}, args...)
}
