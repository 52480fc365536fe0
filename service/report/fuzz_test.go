package report

import (
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// A registered key is one Ed25519 or ECDSA P-256 key line, kept in normal
// form with its fingerprint; nothing else is accepted, and nothing panics.
func FuzzParseSigningKey(f *testing.F) {
	f.Add("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPqMZ4Q30bD114Twz7UTvgUhr1xC7T8lYFwYx+SqnOQF erin@example")
	f.Add("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 rsa")
	f.Add("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPqMZ4Q30bD114Twz7UTvgUhr1xC7T8lYFwYx+SqnOQF\nssh-ed25519 AAAA")
	f.Fuzz(func(t *testing.T, text string) {
		authorized, fingerprint, err := ParseSigningKey(text)
		if err != nil {
			return
		}
		pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(authorized))
		if err != nil || len(strings.TrimSpace(string(rest))) > 0 {
			t.Fatalf("accepted %q as %q, which does not read back", text, authorized)
		}
		if ssh.FingerprintSHA256(pub) != fingerprint {
			t.Fatalf("fingerprint %s is not the key's", fingerprint)
		}
		if pub.Type() != ssh.KeyAlgoED25519 && pub.Type() != ssh.KeyAlgoECDSA256 {
			t.Fatalf("accepted a %s key", pub.Type())
		}
	})
}
