package app

// Helpers of the SDK tests (sdk_test.go, sdk_flavors_test.go) that other
// tests use too and that need no SDK: kept out of the files the native copy
// of the tests leaves out (see TestMain).

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// slowTPM is a tokens limit that refills 1 token a day, so remaining
// amounts are exact within a test.
const slowTPM = `
limits:
  - name: user-tpm
    scope: user
    unit: tokens
    rate: 1
    per: 24h
    burst: 10000
`

func remainingTokens(t *testing.T, h http.Header) int64 {
	t.Helper()
	v, err := strconv.ParseInt(h.Get("x-ratelimit-remaining-tokens"), 10, 64)
	if err != nil {
		t.Fatalf("x-ratelimit-remaining-tokens = %q: %v", h.Get("x-ratelimit-remaining-tokens"), err)
	}
	return v
}

// usdLimit is a usd rule that refills 1 micro-USD a day, so its remaining
// amount (micro-USD, 10^8 when full) is exact within a test.
const usdLimit = `  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 100}`

// rateLimitRemaining is r of the named item of a RateLimit header
// (`"user-tpm";r=99000;t=5, "user-usd";r=…;t=…`).
func rateLimitRemaining(t *testing.T, h http.Header, name string) int64 {
	t.Helper()
	return itemRemaining(t, h, "RateLimit", name)
}

// itemRemaining is r of the named item of the header field of h, a list
// of items `"name";r=…;t=…` (RateLimit, x-llmguard-shadow).
func itemRemaining(t *testing.T, h http.Header, field, name string) int64 {
	t.Helper()
	v := h.Get(field)
	for item := range strings.SplitSeq(v, ",") {
		params := strings.Split(strings.TrimSpace(item), ";")
		if params[0] != strconv.Quote(name) {
			continue
		}
		for _, p := range params[1:] {
			if r, ok := strings.CutPrefix(strings.TrimSpace(p), "r="); ok {
				n, err := strconv.ParseInt(r, 10, 64)
				if err != nil {
					t.Fatalf("%s %q: %v", field, v, err)
				}
				return n
			}
		}
	}
	t.Fatalf("%s %q has no r for %s", field, v, name)
	return 0
}

// left is what the user-tpm (tokens) and user-usd (micro-USD) buckets hold,
// read from a requests-only probe (GET /v1/models), which costs neither.
func (h *harness) left() (tokens, microUSD int64) {
	h.t.Helper()
	hd := h.probe()
	return remainingTokens(h.t, hd), rateLimitRemaining(h.t, hd, "user-usd")
}
