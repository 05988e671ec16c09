package proxy

import (
	"bytes"
	"strconv"
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

// FuzzGatewayRetries: an x-litellm-num-retries value is refused unless it
// reads as a count of 0 or less (cf-aig-max-attempts: 1 or less); an
// integer count above those always is, and
// the field's name in another case or behind x-pass- reads the same.
func FuzzGatewayRetries(f *testing.F) {
	for _, s := range []string{"0", "1", "50", " 2 ", "-1", "1.5", "many", "", "NaN", "1e3", "0x10"} {
		f.Add(s, int64(3))
	}
	f.Fuzz(func(t *testing.T, v string, n int64) {
		plain := gatewayRetries([]byte("x-litellm-num-retries"), []byte(v))
		for _, k := range []string{"X-LiteLLM-Num-Retries", "x-pass-x-litellm-num-retries"} {
			if gatewayRetries([]byte(k), []byte(v)) != plain {
				t.Fatalf("%q: %q reads otherwise than x-litellm-num-retries", v, k)
			}
		}
		if gatewayRetries([]byte("x-litellm-timeout"), []byte(v)) {
			t.Fatalf("x-litellm-timeout: %q read as retries", v)
		}
		count := strconv.FormatInt(n, 10)
		if got := gatewayRetries([]byte("x-litellm-num-retries"), []byte(count)); got != (n > 0) {
			t.Fatalf("count %s: retries %v", count, got)
		}
		if got := gatewayRetries([]byte("CF-AIG-Max-Attempts"), []byte(count)); got != (n > 1) {
			t.Fatalf("cf-aig-max-attempts %s: retries %v", count, got)
		}
	})
}
