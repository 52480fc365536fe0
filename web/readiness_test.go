package web

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// splitShell splits a command line the way a POSIX shell splits words of
// bare characters, single-quoted runs and backslash-escaped characters
// (all CommandText writes); ok is false on an unterminated quote.
func splitShell(s string) (words []string, ok bool) {
	var cur strings.Builder
	inWord, quoted, escaped := false, false, false
	// Bytes, not runes: every special character is ASCII, and arguments
	// need not be UTF-8.
	for i := 0; i < len(s); i++ {
		r := s[i]
		switch {
		case escaped:
			cur.WriteByte(r)
			escaped = false
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == '\\':
			escaped, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(r)
			inWord = true
		}
	}
	if quoted || escaped {
		return nil, false
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}

func TestCommandText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "nvme smart-log /dev/nvme1 -o json", CommandText([]string{"nvme", "smart-log", "/dev/nvme1", "-o", "json"}))
	require.Equal(t, `dcb -j pfc show dev 'eth 0' '' 'it'\''s'`, CommandText([]string{"dcb", "-j", "pfc", "show", "dev", "eth 0", "", "it's"}))
	require.Equal(t, "'$(reboot)' ';' '|'", CommandText([]string{"$(reboot)", ";", "|"}))
}

// What CommandText writes splits back into the same argument vector.
func FuzzCommandText(f *testing.F) {
	f.Add("nvme", "list", "-o json")
	f.Add("it's", "", "a\tb")
	f.Add("'\\''", "$(x)", "\x00")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		argv := []string{a, b, c}
		if strings.ContainsRune(a+b+c, 0) {
			t.Skip("NUL is never in an argument")
		}
		got, ok := splitShell(CommandText(argv))
		require.True(t, ok, "%q", CommandText(argv))
		require.Equal(t, argv, got, "%q", CommandText(argv))
	})
}

func TestReadinessOverrideText(t *testing.T) {
	t.Parallel()
	require.Empty(t, ReadinessOverrideText(nil))
	require.Empty(t, ReadinessOverrideText([]byte("null")))
	require.Equal(t, "run by eng@example.com despite failing blocking checks: fio: fio is missing; ANA path states: no usable path",
		ReadinessOverrideText([]byte(`{"confirmed_by":"eng@example.com","user_id":3,"failing_checks":["fio: fio is missing","ANA path states: no usable path"]}`)))
	require.Contains(t, ReadinessOverrideText([]byte(`{"confirmed_by":3}`)), "could not be read")
}
