package policy

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A remembered credential's sum is served from the memo; any other
// credential, in the same slot or not, of the same length or not, gets its
// own SHA-256, never the remembered one.
func TestSumMemoWrongKeyNeverMatches(t *testing.T) {
	m := newSumMemo()
	const key = "sk-lg-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	want := sha256.Sum256([]byte(key))
	if s, hit := m.sum(key); hit || s != want {
		t.Fatalf("empty memo: hit %v, sum %x", hit, s)
	}
	m.remember(key, want)
	if s, hit := m.sum(key); !hit || s != want {
		t.Fatalf("remembered: hit %v, sum %x, want hit and %x", hit, s, want)
	}
	for _, other := range []string{
		"sk-lg-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB", // last byte differs
		"tk-lg-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", // first byte differs
		"sk-lg-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  // a prefix
		key + "A", // an extension
		"",
	} {
		// Force other into the remembered key's slot: the slot is found
		// by hash, the answer only by the whole credential.
		m.slot(other).Store(m.slot(key).Load())
		s, hit := m.sum(other)
		if hit || s != sha256.Sum256([]byte(other)) {
			t.Errorf("%q in the slot of %q: hit %v, sum %x, want its own SHA-256", other, key, hit, s)
		}
	}
}

// The memo holds at most sumMemoSlots credentials, none longer than
// maxMemoCredential, however many distinct credentials it is given.
func TestSumMemoBounded(t *testing.T) {
	m := newSumMemo()
	for i := range 4 * sumMemoSlots {
		c := fmt.Sprintf("sk-lg-%040d", i)
		m.remember(c, sha256.Sum256([]byte(c)))
	}
	long := string(make([]byte, maxMemoCredential+1))
	m.remember(long, sha256.Sum256([]byte(long)))
	if _, hit := m.sum(long); hit {
		t.Errorf("a credential of %d bytes was remembered", len(long))
	}
	held, bytes := 0, 0
	for i := range m.slots {
		if e := m.slots[i].Load(); e != nil {
			held++
			bytes += len(e.credential)
			if len(e.credential) > maxMemoCredential {
				t.Errorf("slot %d holds %d bytes", i, len(e.credential))
			}
		}
	}
	if held > sumMemoSlots || bytes > sumMemoSlots*maxMemoCredential {
		t.Errorf("%d credentials, %d bytes held", held, bytes)
	}
	// Most of the 4 × slots credentials landed in distinct slots and the
	// last writer of each slot is the one served.
	if held < sumMemoSlots/2 {
		t.Errorf("only %d of %d slots used", held, sumMemoSlots)
	}
}

// A nil memo (a Policy not made by Compile) hashes every time.
func TestSumMemoNil(t *testing.T) {
	var m *sumMemo
	m.remember("sk-a", sha256.Sum256([]byte("sk-a")))
	if s, hit := m.sum("sk-a"); hit || s != sha256.Sum256([]byte("sk-a")) {
		t.Errorf("nil memo: hit %v sum %x", hit, s)
	}
}

// Authenticate remembers only the hash: a stored key revoked, expired or
// removed after it was accepted (and remembered) is refused on the very
// next request, and a reload that drops a file key refuses it at once.
func TestAuthenticateMemoRevocationImmediate(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-file-one, user: alice, tenant: acme}]
`)
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const stored = "sk-lg-stored-key-of-bob-0123456789abcdefghijklmnop"
	sum := sha256.Sum256([]byte(stored))
	src := mapSource{sum: {Principal: Principal{KeyID: "b", User: "bob", Tenant: "acme"}}}
	for i := range 2 { // the second call is served by the memo
		if pr, st := p.Authenticate(stored, src, now); st != KeyAccepted || pr.User != "bob" {
			t.Fatalf("call %d: %s %+v", i, st, pr)
		}
	}
	if _, hit := p.sums.sum(stored); !hit {
		t.Fatal("an accepted stored key is not remembered")
	}
	steps := []struct {
		name string
		key  StoredKey
		drop bool
		want KeyStatus
	}{
		{name: "revoked", key: StoredKey{Principal: Principal{User: "bob"}, Revoked: true}, want: KeyRevoked},
		{name: "expired", key: StoredKey{Principal: Principal{User: "bob"}, ExpiresAt: now}, want: KeyExpired},
		{name: "removed", drop: true, want: KeyUnknown},
	}
	for i, s := range steps {
		if s.drop {
			delete(src, sum)
		} else {
			src[sum] = s.key
		}
		if _, st := p.Authenticate(stored, src, now); st != s.want {
			t.Errorf("step %d (%s): %s, want %s", i, s.name, st, s.want)
		}
	}
	// A file key, remembered, then gone from the reloaded config.
	for range 2 {
		if pr, st := p.Authenticate("sk-file-one", nil, now); st != KeyAccepted || pr.User != "alice" {
			t.Fatalf("file key: %s %+v", st, pr)
		}
	}
	reloaded, err := Compile(mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-file-two, user: carol, tenant: acme}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, st := reloaded.Authenticate("sk-file-one", nil, now); st != KeyUnknown {
		t.Errorf("after the reload that removed it: %s, want unknown", st)
	}
	// A refused credential is not remembered (junk cannot evict callers).
	if _, st := p.Authenticate("sk-nobody", src, now); st != KeyUnknown {
		t.Fatalf("sk-nobody: %s", st)
	}
	if _, hit := p.sums.sum("sk-nobody"); hit {
		t.Error("a refused credential was remembered")
	}
}

// Concurrent callers with distinct and shared keys each get their own
// principal (run with -race: slots are written while read).
func TestAuthenticateMemoConcurrent(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
identity: {pass_through: true, tenant: pt}
`)
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				// Half the keys shared by every goroutine, half its own.
				cred := fmt.Sprintf("sk-pt-%d", i%7)
				if i%2 == 1 {
					cred = fmt.Sprintf("sk-pt-%d-%d", g, i%7)
				}
				pr, st := p.Authenticate(cred, nil, time.Time{})
				s := sha256.Sum256([]byte(cred))
				if st != KeyAccepted || pr.KeyID != fmt.Sprintf("%x", s[:8]) {
					t.Errorf("%q: %s %+v", cred, st, pr)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A memo hit neither hashes nor allocates.
func TestAuthenticateMemoHitAllocs(t *testing.T) {
	p, err := Compile(mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-lg-a-key-long-enough-to-leave-the-32-byte-stack-buffer, user: alice, tenant: acme}]
`))
	if err != nil {
		t.Fatal(err)
	}
	const key = "sk-lg-a-key-long-enough-to-leave-the-32-byte-stack-buffer"
	p.Authenticate(key, nil, time.Time{})
	if n := testing.AllocsPerRun(100, func() {
		if _, st := p.Authenticate(key, nil, time.Time{}); st != KeyAccepted {
			t.Fatal(st)
		}
	}); n != 0 {
		t.Errorf("%v allocations per Authenticate", n)
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	p, err := Compile(mustConfig(b, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-lg-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA, user: alice, tenant: acme}]
`))
	if err != nil {
		b.Fatal(err)
	}
	const key = "sk-lg-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, memo := range []bool{false, true} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			q := *p
			if !memo {
				q.sums = nil
			}
			b.ReportAllocs()
			for b.Loop() {
				q.Authenticate(key, nil, time.Time{})
			}
		})
	}
}
