//go:build unix

package app

import (
	"testing"
	"time"
)

// bigBody asks for 1,000 output tokens: a reservation some 1,000 tokens
// above what the mock's answer settles at.
const bigBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`

// TestChaosRedisPausedQuotaSeededSettled is the recipe of
// TestChaosRedisPausedQuotaSeeded with the last node's last take before
// the outage reserving some 1,000 tokens (max_tokens 1000) that its answer
// settles at a few dozen: the reading that take reports holds the
// reservation, and only the node's own settlement (Fallback.ObserveDelta,
// fed by meter) gives it back. That reading is under three requests'
// reservations: read as it was, the node's fallback would start below one
// request (Remaining / 3 < 124) and admit none; moved by its settlement,
// it admits some. The day still closes within the quota plus what the
// stalest reading missed.
func TestChaosRedisPausedQuotaSeededSettled(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	const quota = 5000
	srv, nodes, ledgers := startSeededNodes(t, quota)
	quiet := func() { quietSeeded(t, nodes) }
	// Spend the quota to within 1,300 tokens (every settlement in), then
	// one last take on each node, the third reserving some 1,000 tokens:
	// whether or not the first two's settlements are in by then, 1,028 to
	// 1,252 are left before it, so its reading is at most some 250, under
	// three reservations of 124.
	for i := 0; i < quota; i++ {
		status, left := postLeft(t, nodes[i%3].url, "sk-load")
		if status != 200 {
			t.Fatalf("request %d before the outage answered %d", i, status)
		}
		if left >= 1500 {
			continue
		}
		quiet()
		if storedQuotaUsed(t, srv, "acme", "user-tok", "loader") > quota-1300 {
			break
		}
	}
	var readings [3]int64
	for i, h := range nodes {
		body := hiBody
		if i == 2 {
			body = bigBody
		}
		status, left := postLeftBody(t, h.url, "sk-load", body)
		if status != 200 {
			t.Fatalf("the last take before the outage answered %d", status)
		}
		readings[i] = left
	}
	t.Logf("the nodes' last readings: %v tokens left, the last before its 1,000-token reservation was given back", readings)
	if readings[2] >= 3*124 {
		t.Fatalf("the last reading is %d: not under three requests' reservations, so the run shows nothing", readings[2])
	}
	quiet()
	before := storedQuotaUsed(t, srv, "acme", "user-tok", "loader")
	resume := srv.Pause()
	var admitted [3]int
	for i, h := range nodes {
		for range 120 { // bounded: a node's share is 1,666 tokens, a request's settles at 24
			if s := postChat(t, h.url, "sk-load"); s.status == 200 {
				admitted[i]++
			} else if s.status != 429 {
				t.Errorf("a fail-open request during the outage answered %d", s.status)
			}
		}
	}
	resume()
	for _, h := range nodes {
		waitSettledAs(t, h, "sk-other")
	}
	time.Sleep(200 * time.Millisecond) // the ledger writers' last flush
	used := storedQuotaUsed(t, srv, "acme", "user-tok", "loader")
	var ledgered int64
	for _, f := range ledgers {
		ledgered += ledgerTokens(t, f)["loader"]
	}
	const bound = quota + 2*120 // as TestChaosRedisPausedQuotaSeeded's
	t.Logf("quota %d: used %d when Redis froze; requests admitted by each node's fallback %v; closed the day at %d in Redis, %d in the ledgers (bound %d)",
		quota, before, admitted, used, ledgered, bound)
	if admitted[2] == 0 {
		t.Errorf("the last node's fallback admitted nothing: its reading (%d) was not moved by its own settlement", readings[2])
	}
	if used != ledgered {
		t.Errorf("Redis holds %d tokens used, the ledgers %d", used, ledgered)
	}
	if used > bound {
		t.Errorf("the day closed at %d tokens of a %d quota, over the bound %d", used, quota, bound)
	}
}
