package attest

import (
	"testing"
)

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte("1fed26e5771630c3bbebb3aafc0a7bf6e26a9e0e6e577da9a9a3a0686a0e863b  VERIFY.md\n"))
	f.Add([]byte("1fed26e5771630c3bbebb3aafc0a7bf6e26a9e0e6e577da9a9a3a0686a0e863b *artifacts/a b.csv\n"))
	f.Add([]byte("1fed26e5771630c3bbebb3aafc0a7bf6e26a9e0e6e577da9a9a3a0686a0e863b  ../x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			return
		}
		for name, sum := range m {
			if checkArtifactName(name) != nil || !isHexDigest(sum) {
				t.Fatalf("accepted %q %q", name, sum)
			}
		}
	})
}

func FuzzParseTrustedKeys(f *testing.F) {
	f.Add([]byte(`accord-signer namespaces="accord-report@accordlab" ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJJNUDf2dY/N8mIjpRk0kG+oNfPPeFibyhbUAQt3LHNPeTIrA0JgQXVJC4Y9jJ7eYJBKy6nZUoSgWB3Tv/WNZO0=`))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEkk1QN/Z1j83yYiOlGTSQb6g18894\nWJvKFtQBC3csc095MisDQmBBdUkLhj2Mnt5gkErLqdlShKBYHdO/9Y1k7Q==\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte(`{"format":"accord-keys/v1","keys":[]}`))
	// The comment Accord writes above a revoked key's line.
	f.Add([]byte("# SHA256:HGeEP1hmVv6VZCq8FRjm4oL/y6T5Lop1nAx2Z/bY5W0 revoked, made 2026-02-12T09:26:53Z, rotated out 2026-03-14T09:26:53Z, revoked 2026-03-14T09:26:53Z: laptop stolen, then found\n" +
		`accord-signer namespaces="accord-report@accordlab",valid-after="20260212092653Z",valid-before="20260314092653Z" ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJJNUDf2dY/N8mIjpRk0kG+oNfPPeFibyhbUAQt3LHNPeTIrA0JgQXVJC4Y9jJ7eYJBKy6nZUoSgWB3Tv/WNZO0=`))
	f.Add([]byte(`"a b" namespaces="accord-report@accordlab",valid-after="20260212092653Z",valid-before="20260314" ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJJNUDf2dY/N8mIjpRk0kG+oNfPPeFibyhbUAQt3LHNPeTIrA0JgQXVJC4Y9jJ7eYJBKy6nZUoSgWB3Tv/WNZO0=`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := ParseTrustedKeys(data)
		if err != nil {
			return
		}
		for _, k := range ks.Keys() {
			if k.ID != KeyID(k.SSH) || k.Key == nil {
				t.Fatalf("key %s inconsistent", k.ID)
			}
		}
	})
}

func FuzzParseDecisionLog(f *testing.F) {
	f.Add([]byte(`{"format":"accord-decision-log/v1","chain":"x","records":[],"checkpoint":null}`))
	f.Add([]byte(`{"format":"accord-decision-log/v1","chain":"x","records":[{"record":{"seq":1,"time":"2026-01-01T00:00:00Z"},"hash":"","envelope":null}],"checkpoint":null}`))
	keys := NewKeySet()
	f.Fuzz(func(t *testing.T, data []byte) {
		log, err := ParseDecisionLog(data)
		if err != nil {
			return
		}
		// No key is trusted: verification must fail, never pass or panic.
		if _, err := log.Verify(keys); err == nil && len(log.Records) > 0 {
			t.Fatal("a log verified without trusted keys")
		}
	})
}

func FuzzParseLogHead(f *testing.F) {
	f.Add([]byte(`{"format":"accord-decision-head/v1","chain":"program:1","seq":3,"head":"ab","time":"2026-01-01T00:00:00Z","checkpoint":null}`))
	f.Add([]byte(`{"format":"accord-decision-head/v1","chain":"program:1","seq":0,"head":"","time":"2026-01-01T00:00:00Z","checkpoint":{"payloadType":"application/vnd.accord.decision-checkpoint+json","payload":"e30=","signatures":[]}}`))
	keys := NewKeySet()
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseLogHead(data)
		if err != nil {
			return
		}
		// No key is trusted: a head never compares, and never panics.
		if _, err := (&ChainReport{Chain: h.Chain, Seq: h.Seq}).CompareHead(h, keys); err == nil {
			t.Fatal("a head compared without trusted keys")
		}
	})
}
