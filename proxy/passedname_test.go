package proxy

import (
	"bytes"
	"testing"
)

// FuzzPassedName: the name a field is forwarded under is a suffix of its
// own, has no x-pass- prefix left (but the bare prefix), and an x-pass-
// prefix in any case never changes whether a field routes or is the
// anthropic-beta field (adv54: LiteLLM's pass-through routes forward
// x-pass-<name> as <name>).
func FuzzPassedName(f *testing.F) {
	for _, s := range []string{"anthropic-beta", "x-pass-anthropic-beta", "X-PASS-x-portkey-config", "x-pass-", "x-pass-x-pass-helicone-fallbacks", "x-portkey-trace-id", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		k := []byte(name)
		p := passedName(k)
		if !bytes.HasSuffix(k, p) {
			t.Fatalf("passedName(%q) = %q, not a suffix", name, p)
		}
		if len(p) > len(passPrefix) && bytes.EqualFold(p[:len(passPrefix)], []byte(passPrefix)) {
			t.Fatalf("passedName(%q) = %q keeps a prefix", name, p)
		}
		for _, prefix := range []string{"x-pass-", "X-Pass-", "X-PASS-"} {
			if len(k) == 0 {
				break // an empty name is no field
			}
			q := append([]byte(prefix), k...)
			if isRoutingField(q) != isRoutingField(k) || isAnthropicBeta(q) != isAnthropicBeta(k) {
				t.Fatalf("%q reads as routing %v, beta %v; %q as %v, %v", q, isRoutingField(q), isAnthropicBeta(q), k, isRoutingField(k), isAnthropicBeta(k))
			}
		}
	})
}
