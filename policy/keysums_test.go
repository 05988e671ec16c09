package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// authenticateOracle is Authenticate as it was before KeySums (a112cdd),
// kept verbatim as the oracle of the differential tests.
func authenticateOracle(p *Policy, credential string, src KeySource, now time.Time) (pr Principal, st KeyStatus) {
	if credential == "" {
		return Principal{}, KeyUnknown
	}
	sum := sha256.Sum256([]byte(credential))
	if pr, ok := p.keys[sum]; ok {
		return pr, KeyAccepted
	}
	if src != nil {
		if k, ok := src.LookupKey(sum); ok {
			switch {
			case k.Revoked:
				return k.Principal, KeyRevoked
			case !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt):
				return k.Principal, KeyExpired
			}
			return k.Principal, KeyAccepted
		}
	}
	if !p.passThrough {
		return Principal{}, KeyUnknown
	}
	if !token68(credential) {
		return Principal{}, KeyMalformed
	}
	id := hex.EncodeToString(sum[:8])
	return Principal{KeyID: id, User: id, Tenant: p.ptTenant, Plan: p.ptPlan, PassThrough: true}, KeyAccepted
}

// lockedSource is a KeySource whose keys a test changes while requests
// read it, as the Redis key store's reloads and revocations do.
type lockedSource struct {
	mu   sync.RWMutex
	keys map[[32]byte]StoredKey
}

func (s *lockedSource) LookupKey(sum [32]byte) (StoredKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[sum]
	return k, ok
}

func (s *lockedSource) set(cred string, k StoredKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[sha256.Sum256([]byte(cred))] = k
}

func (s *lockedSource) drop(cred string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, sha256.Sum256([]byte(cred)))
}

// sumsRig is two policies (the file before and after a reload, with and
// without pass-through) and a key store, for the differential tests.
type sumsRig struct {
	pols []*Policy
	src  *lockedSource
	t0   time.Time
}

func newSumsRig(t testing.TB) *sumsRig {
	t.Helper()
	return &sumsRig{pols: sumsPolicies(t), src: &lockedSource{keys: map[[32]byte]StoredKey{}},
		t0: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
}

// sumsPolicies compiles the rig's two policies.
func sumsPolicies(t testing.TB) []*Policy {
	t.Helper()
	var pols []*Policy
	for _, y := range []string{`
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
identity: {pass_through: true, tenant: pt}
keys: [{key: sk-file-a, user: alice, tenant: acme}, {key: sk-file-b, user: bert, tenant: acme}]
`, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-file-b, user: bert, tenant: beta}, {key: sk-store-1, user: carl, tenant: acme}]
`} {
		p, err := Compile(mustConfig(t, y))
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, p)
	}
	return pols
}

// sumsCreds are the credentials the differential tests present: the
// file's keys, stored keys, pass-through keys, malformed ones, one longer
// than KeySums remembers and one longer than token68 allows.
var sumsCreds = []string{
	"sk-file-a", "sk-file-b", "sk-store-1", "sk-store-2", "sk-store-3", "sk-pt-1", "sk-pt-2",
	"sk-A junk", "sk-A,sk-B", "", "==", "sk-\u00e9",
	strings.Repeat("k", maxKeySumLen), strings.Repeat("k", maxKeySumLen+1), strings.Repeat("k", 4097),
}

// check authenticates cred through sums and compares with the oracle and
// with Authenticate, then checks that a refused credential is not held.
func (r *sumsRig) check(t testing.TB, step string, p *Policy, sums *KeySums, cred string, src KeySource, now time.Time) {
	t.Helper()
	wantPr, wantSt := authenticateOracle(p, cred, src, now)
	pr, st := p.AuthenticateBytes([]byte(cred), sums, src, now)
	if pr != wantPr || st != wantSt {
		t.Fatalf("%s: %q with memo: %s %+v, oracle %s %+v", step, cred, st, pr, wantSt, wantPr)
	}
	if pr, st := p.Authenticate(cred, src, now); pr != wantPr || st != wantSt {
		t.Fatalf("%s: %q Authenticate: %s %+v, oracle %s %+v", step, cred, st, pr, wantSt, wantPr)
	}
	if _, hit := sums.sum([]byte(cred)); hit != (st == KeyAccepted && len(cred) <= maxKeySumLen) {
		t.Fatalf("%s: %q (%s) remembered: %v", step, cred, st, hit)
	}
	if n := sums.Len(); n > 1<<keySumBits {
		t.Fatalf("%s: %d entries", step, n)
	}
}

// A memoised hash changes nothing at the moment a key is revoked, expires,
// is restored, or leaves the file at a reload: each step's answer is the
// oracle's, and a refused key is no longer held.
func TestKeySumsTimeline(t *testing.T) {
	r := newSumsRig(t)
	sums := NewKeySums()
	before, after := r.pols[0], r.pols[1]
	now := r.t0
	steps := []struct {
		name string
		do   func()
		p    *Policy
		cred string
	}{
		{name: "stored key accepted", do: func() {
			r.src.set("sk-store-2", StoredKey{Principal: Principal{KeyID: "s2", User: "dora", Tenant: "acme"}, ExpiresAt: r.t0.Add(time.Minute)})
		}, p: before, cred: "sk-store-2"},
		{name: "again, from the memo", p: before, cred: "sk-store-2"},
		{name: "revoked", do: func() {
			r.src.set("sk-store-2", StoredKey{Principal: Principal{KeyID: "s2", User: "dora", Tenant: "acme"}, Revoked: true})
		}, p: before, cred: "sk-store-2"},
		{name: "restored", do: func() {
			r.src.set("sk-store-2", StoredKey{Principal: Principal{KeyID: "s2", User: "dora", Tenant: "acme"}, ExpiresAt: r.t0.Add(time.Minute)})
		}, p: before, cred: "sk-store-2"},
		{name: "a nanosecond before expiry", do: func() { now = r.t0.Add(time.Minute - time.Nanosecond) }, p: before, cred: "sk-store-2"},
		{name: "at expiry", do: func() { now = r.t0.Add(time.Minute) }, p: before, cred: "sk-store-2"},
		{name: "deleted from the store: a pass-through caller", do: func() { r.src.drop("sk-store-2") }, p: before, cred: "sk-store-2"},
		{name: "after the reload: no pass-through, unknown", p: after, cred: "sk-store-2"},
		{name: "file key", p: before, cred: "sk-file-a"},
		{name: "file key after the reload removed it", p: after, cred: "sk-file-a"},
		{name: "file key kept by the reload, new principal", p: after, cred: "sk-file-b"},
		{name: "store key the reload moved into the file", do: func() {
			r.src.set("sk-store-1", StoredKey{Principal: Principal{KeyID: "s1", User: "shadowed"}, Revoked: true})
		}, p: before, cred: "sk-store-1"},
		{name: "now in the file, which wins", p: after, cred: "sk-store-1"},
		{name: "back to the old file: revoked", p: before, cred: "sk-store-1"},
		{name: "malformed pass-through", p: before, cred: "sk-A junk"},
		{name: "too long to remember", p: before, cred: strings.Repeat("k", maxKeySumLen+1)},
		{name: "empty", p: before, cred: ""},
	}
	for i, s := range steps {
		if s.do != nil {
			s.do()
		}
		r.check(t, fmt.Sprintf("step %d (%s)", i, s.name), s.p, sums, s.cred, r.src, now)
	}
}

// runSumsOps drives a random walk of requests, store changes, reloads and
// clock steps chosen by ops, checking every answer against the oracle.
func runSumsOps(t testing.TB, pols []*Policy, ops []byte) {
	r := &sumsRig{pols: pols, src: &lockedSource{keys: map[[32]byte]StoredKey{}},
		t0: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	sums := NewKeySums()
	p := r.pols[0]
	now := r.t0
	var src KeySource = r.src
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i], int(ops[i+1])
		cred := sumsCreds[arg%len(sumsCreds)]
		switch op % 8 {
		case 0, 1, 2: // a request
			r.check(t, fmt.Sprintf("op %d", i/2), p, sums, cred, src, now)
		case 3: // store or restore, with an expiry ahead or behind
			r.src.set(cred, StoredKey{Principal: Principal{KeyID: fmt.Sprint(arg), User: "u" + fmt.Sprint(arg)},
				ExpiresAt: now.Add(time.Duration(arg%5-2) * time.Second)})
		case 4:
			r.src.set(cred, StoredKey{Principal: Principal{KeyID: fmt.Sprint(arg)}, Revoked: true})
		case 5:
			r.src.drop(cred)
		case 6: // reload
			p = r.pols[arg%len(r.pols)]
		case 7:
			now = now.Add(time.Duration(arg) * 100 * time.Millisecond)
			if arg%16 == 0 {
				src = nil
			} else {
				src = r.src
			}
		}
	}
}

func TestKeySumsRandomWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pols := sumsPolicies(t)
	for range 200 {
		ops := make([]byte, 200)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		runSumsOps(t, pols, ops)
	}
}

// FuzzKeySums: whatever the sequence of requests, store changes, reloads
// and clock steps, the memoised answers are the oracle's.
//
//	go test -run X -fuzz FuzzKeySums -fuzztime 60s ./policy
func FuzzKeySums(f *testing.F) {
	f.Add([]byte{3, 3, 0, 3, 0, 3, 4, 3, 0, 3, 6, 1, 0, 3, 5, 3, 0, 3})
	f.Add([]byte{0, 0, 0, 0, 6, 1, 0, 0, 0, 1, 6, 0, 0, 1})
	pols := sumsPolicies(f)
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 1024 {
			ops = ops[:1024]
		}
		runSumsOps(t, pols, ops)
	})
}

// Requests of many callers, more than the table's slots, while keys are
// revoked and restored: under -race, no race; each answer is the
// oracle's for a store state that does not change during the request
// (each goroutine revokes and restores only its own keys).
func TestKeySumsConcurrent(t *testing.T) {
	r := newSumsRig(t)
	sums := NewKeySums()
	p := r.pols[0]
	var wg sync.WaitGroup
	const workers, perWorker = 4, 100
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 400 {
				cred := fmt.Sprintf("sk-w%d-%d", w, i%perWorker)
				switch i % 7 {
				case 3:
					r.src.set(cred, StoredKey{Principal: Principal{KeyID: cred, User: cred}, Revoked: true})
				case 5:
					r.src.set(cred, StoredKey{Principal: Principal{KeyID: cred, User: cred}})
				}
				wantPr, wantSt := authenticateOracle(p, cred, r.src, r.t0)
				pr, st := p.AuthenticateBytes([]byte(cred), sums, r.src, r.t0)
				if pr != wantPr || st != wantSt {
					t.Errorf("%s: %s %+v, oracle %s %+v", cred, st, pr, wantSt, wantPr)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := sums.Len(); n > 1<<keySumBits {
		t.Errorf("%d entries", n)
	}
}

// A remembered credential costs no allocation and no SHA-256.
func TestKeySumsNoAllocation(t *testing.T) {
	r := newSumsRig(t)
	sums := NewKeySums()
	cred := []byte("sk-file-a")
	r.pols[0].AuthenticateBytes(cred, sums, r.src, r.t0)
	if n := testing.AllocsPerRun(100, func() { r.pols[0].AuthenticateBytes(cred, sums, r.src, r.t0) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	r := newSumsRig(b)
	cred := "sk-file-a"
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r.pols[0].Authenticate(cred, r.src, r.t0)
		}
	})
	b.Run("memo", func(b *testing.B) {
		sums := NewKeySums()
		c := []byte(cred)
		b.ReportAllocs()
		for range b.N {
			r.pols[0].AuthenticateBytes(c, sums, r.src, r.t0)
		}
	})
}

// Two credentials of the same length in the same slot: the one the slot
// does not hold misses (its bytes are compared, not its slot or length),
// and is authenticated as the oracle says.
func TestKeySumsSameSlot(t *testing.T) {
	r := newSumsRig(t)
	sums := NewKeySums()
	seen := map[*atomic.Pointer[keySum]]string{}
	var a, b string
	for i := 0; b == ""; i++ {
		c := fmt.Sprintf("sk-pt-%04d", i)
		s := sums.slot([]byte(c))
		if prev, ok := seen[s]; ok {
			a, b = prev, c
		}
		seen[s] = c
	}
	r.check(t, "first", r.pols[0], sums, a, r.src, r.t0)
	if _, hit := sums.sum([]byte(b)); hit {
		t.Fatalf("%q found under %q's entry", b, a)
	}
	r.check(t, "second, same slot", r.pols[0], sums, b, r.src, r.t0)
	r.check(t, "first again, replaced", r.pols[0], sums, a, r.src, r.t0)
}
