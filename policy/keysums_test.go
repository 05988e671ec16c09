package policy

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// AuthenticateSums answers as AuthenticateBytes for every credential, the
// first time and every time after, and whatever a store's record became
// since the credential was remembered.
func TestAuthenticateSumsSameAsBytes(t *testing.T) {
	p, err := Compile(mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
identity: {pass_through: true, tenant: pt}
keys: [{key: sk-file, user: alice, tenant: acme}]
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sum := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	src := mapSource{
		sum("sk-live"):    {Principal: Principal{KeyID: "l", User: "bob", Tenant: "acme"}, ExpiresAt: now.Add(time.Second)},
		sum("sk-revoked"): {Principal: Principal{KeyID: "r", User: "rob", Tenant: "acme"}, Revoked: true},
	}
	creds := []string{"sk-file", "sk-live", "sk-revoked", "sk-unknown", "", "sk-A junk",
		"sk-live\x00", "sk-liv", "sk-livf", "sk-file" + strings.Repeat("x", 16), // same prefix, other lengths and bytes
		strings.Repeat("k", keySumMaxLen), strings.Repeat("k", keySumMaxLen+1), strings.Repeat("k", 4097)}
	sums := NewKeySums()
	check := func(step string, cred string, at time.Time) {
		t.Helper()
		wpr, wst := p.AuthenticateBytes([]byte(cred), src, at)
		if pr, st := p.AuthenticateSums([]byte(cred), sums, src, at); st != wst || pr != wpr {
			t.Errorf("%s: %.20q: %s %+v, want %s %+v", step, cred, st, pr, wst, wpr)
		}
	}
	for round := range 3 {
		for _, c := range creds {
			check(fmt.Sprintf("round %d", round), c, now)
		}
	}
	// A remembered key's record changes: the decision follows the record.
	src[sum("sk-live")] = StoredKey{Principal: Principal{KeyID: "l", User: "bob", Tenant: "acme"}, Revoked: true}
	check("revoked since", "sk-live", now)
	check("past its expiry", "sk-live", now.Add(time.Second))
	delete(src, sum("sk-revoked"))
	check("dropped from the store (pass-through)", "sk-revoked", now)
	check("nil sums", "sk-live", now)
	if pr, st := p.AuthenticateSums([]byte("sk-file"), nil, src, now); st != KeyAccepted || pr.User != "alice" {
		t.Errorf("nil KeySums: %s %+v", st, pr)
	}
}

// A slot holds the SHA-256 of one credential only: credentials of the
// same length that differ in any one byte, and those a byte longer or
// shorter, are hashed themselves, even when they fall into the slot of a
// remembered one.
func TestKeySumsNeverLendASum(t *testing.T) {
	s := NewKeySums()
	rng := rand.New(rand.NewPCG(1, 2))
	held := make([][]byte, 0, 300)
	for range 300 {
		c := make([]byte, 1+rng.IntN(80))
		for i := range c {
			c[i] = byte('a' + rng.IntN(26))
		}
		sum, _, tag := s.sum(c)
		s.keep(tag, len(c), sum)
		held = append(held, c)
	}
	hits := 0
	for i, c := range held {
		if got, h, _ := s.sum(c); h {
			hits++
			if got != sha256.Sum256(c) {
				t.Fatalf("credential %d: a wrong SHA-256 held", i)
			}
		}
		for j := range c {
			v := append([]byte(nil), c...)
			v[j] ^= 1 << (j % 8)
			if got, _, _ := s.sum(v); got != sha256.Sum256(v) {
				t.Fatalf("credential %d, byte %d changed: another credential's SHA-256", i, j)
			}
		}
		for _, v := range [][]byte{append(append([]byte(nil), c...), 0), c[:len(c)-1]} {
			if got, _, _ := s.sum(v); got != sha256.Sum256(v) {
				t.Fatalf("credential %d, %d bytes long: another credential's SHA-256", i, len(v))
			}
		}
	}
	if hits < 200 { // 300 keys in 1,024 slots keep about 260
		t.Errorf("%d of 300 credentials held, want most", hits)
	}
	// Forge a slot: a credential whose tag matched but length did not,
	// or whose length matched but not its tag, finds nothing.
	c := []byte("sk-lg-forged")
	sum, _, tag := s.sum(c)
	s.keep(tag, len(c)+1, sum)
	if _, h, _ := s.sum(c); h {
		t.Error("a slot of another length taken")
	}
	tag[15] ^= 1
	s.keep(tag, len(c), sum)
	if _, h, _ := s.sum(c); h {
		t.Error("a slot of another tag taken")
	}
}

// Two KeySums tag a credential differently (each draws its own MAC key),
// and a remembered credential is found without an allocation.
func TestKeySumsKeyedAndAllocationFree(t *testing.T) {
	a, b := NewKeySums(), NewKeySums()
	c := []byte("sk-lg-3q2XJ5yB1nGm0wVbE7s4tQpLr8uKcHdA6fZiNoWj9xY")
	if a.tag(c) == b.tag(c) {
		t.Error("two KeySums share their MAC key")
	}
	if a.tag(c) == a.tag(c[:len(c)-1]) {
		t.Error("a credential and its prefix share a tag")
	}
	p, err := Compile(mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-lg-3q2XJ5yB1nGm0wVbE7s4tQpLr8uKcHdA6fZiNoWj9xY, user: alice, tenant: acme}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p.AuthenticateSums(c, a, nil, time.Time{})
	if _, held, _ := a.sum(c); !held {
		t.Fatal("an accepted key was not remembered")
	}
	if _, st := p.AuthenticateSums([]byte("sk-other"), a, nil, time.Time{}); st != KeyUnknown {
		t.Fatalf("unknown key: %s", st)
	} else if _, held, _ := a.sum([]byte("sk-other")); held {
		t.Error("an unknown credential was remembered")
	}
	if n := testing.AllocsPerRun(100, func() { p.AuthenticateSums(c, a, nil, time.Time{}) }); n != 0 {
		t.Errorf("%v allocations a remembered key, want 0", n)
	}
}

// FuzzKeySums: whatever the credentials, AuthenticateSums answers as
// AuthenticateBytes, remembered or not.
func FuzzKeySums(f *testing.F) {
	f.Add([]byte("sk-file"), []byte("sk-fild"))
	f.Add([]byte("sk-live"), []byte("sk-live\x00"))
	f.Add([]byte(""), []byte("a b"))
	p, err := Compile(mustConfig(f, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
identity: {pass_through: true, tenant: pt}
keys: [{key: sk-file, user: alice, tenant: acme}]
`))
	if err != nil {
		f.Fatal(err)
	}
	sums := NewKeySums()
	f.Fuzz(func(t *testing.T, x, y []byte) {
		for _, c := range [][]byte{x, y, x, y} {
			wpr, wst := p.AuthenticateBytes(c, nil, time.Time{})
			if pr, st := p.AuthenticateSums(c, sums, nil, time.Time{}); st != wst || pr != wpr {
				t.Fatalf("%q: %s %+v, want %s %+v", c, st, pr, wst, wpr)
			}
		}
	})
}

// BenchmarkKeySums: a remembered key's SHA-256 taken from a KeySums,
// against computing it (read the ratio within one run).
func BenchmarkKeySums(b *testing.B) {
	c := []byte("sk-lg-3q2XJ5yB1nGm0wVbE7s4tQpLr8uKcHdA6fZiNoWj9xY")
	b.Run("sha256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sha256.Sum256(c)
		}
	})
	b.Run("held", func(b *testing.B) {
		s := NewKeySums()
		sum, _, tag := s.sum(c)
		s.keep(tag, len(c), sum)
		b.ReportAllocs()
		for b.Loop() {
			s.sum(c)
		}
	})
}

// Goroutines that remember and find keys at once, 200 keys over 1,024
// slots (some share one), each get their own SHA-256 (run under -race).
func TestKeySumsConcurrent(t *testing.T) {
	s := NewKeySums()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 2000 {
				c := []byte(fmt.Sprintf("sk-%d-%d", g, i%50))
				sum, held, tag := s.sum(c)
				if sum != sha256.Sum256(c) {
					t.Errorf("%s: a wrong SHA-256 (held %v)", c, held)
					return
				}
				if !held {
					s.keep(tag, len(c), sum)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}
