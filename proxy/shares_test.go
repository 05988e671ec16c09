package proxy

import (
	"strconv"
	"testing"

	"golang.org/x/sync/semaphore"
)

// sharesProxy is a Proxy with a body budget of budget bytes and nothing
// else: what hold and release need.
func sharesProxy(budget int64) *Proxy {
	return &Proxy{bodies: semaphore.NewWeighted(budget), shares: make(map[string]*int64), shareCap: budget / 4}
}

// sharesHeld is what p.shares says tenant holds (0 with no entry), and
// whether it has an entry.
func sharesHeld(p *Proxy, tenant string) (int64, bool) {
	p.shareMu.Lock()
	defer p.shareMu.Unlock()
	if s := p.shares[tenant]; s != nil {
		return *s, true
	}
	return 0, false
}

// TestShareKeptAtZero: a tenant's entry stays, at zero, once its body is
// released, and its next body takes and gives back from the same entry;
// what it holds is counted exactly throughout, its cap kept.
func TestShareKeptAtZero(t *testing.T) {
	p := sharesProxy(4000)
	for step := range 3 {
		if !p.hold("acme", 600) || !p.hold("acme", 300) {
			t.Fatalf("step %d: refused within the share", step)
		}
		if p.hold("acme", 101) { // 1,000 is acme's share
			t.Fatalf("step %d: a hold past the share taken", step)
		}
		if held, _ := sharesHeld(p, "acme"); held != 900 {
			t.Fatalf("step %d: acme holds %d, want 900", step, held)
		}
		p.release(heldBody{held: 600, tenant: "acme"})
		p.release(heldBody{held: 300, tenant: "acme"})
		if held, ok := sharesHeld(p, "acme"); held != 0 || !ok {
			t.Fatalf("step %d: after release acme holds %d (entry kept: %v), want 0 kept", step, held, ok)
		}
	}
}

// TestIdleSharesBounded: tenants that each held and released a body leave
// at most maxIdleShares entries, however many they are, and a tenant
// holding bytes keeps its entry past that bound.
func TestIdleSharesBounded(t *testing.T) {
	p := sharesProxy(1 << 30)
	if !p.hold("busy", 10) {
		t.Fatal("busy refused")
	}
	for i := range 3 * maxIdleShares {
		tenant := "t" + strconv.Itoa(i)
		if !p.hold(tenant, 100) {
			t.Fatalf("%s refused", tenant)
		}
		p.release(heldBody{held: 100, tenant: tenant})
	}
	if n := len(p.shares); n > maxIdleShares+1 {
		t.Errorf("%d entries after %d tenants came and went, want at most %d", n, 3*maxIdleShares, maxIdleShares+1)
	}
	if held, ok := sharesHeld(p, "busy"); held != 10 || !ok {
		t.Errorf("busy holds %d (entry: %v), want 10", held, ok)
	}
}
