package policy

import (
	"crypto/sha256"
	"regexp"
	"strings"
	"testing"
	"time"
)

// mapSource is a KeySource over a map.
type mapSource map[[32]byte]StoredKey

func (m mapSource) LookupKey(sum [32]byte) (StoredKey, bool) { k, ok := m[sum]; return k, ok }

// The file's keys come first, then the stored keys (refused when revoked
// or expired, to the instant), then pass-through identity, which never
// admits a revoked or expired stored key as a caller's own key.
func TestAuthenticatePrecedence(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
identity: {pass_through: true, tenant: pt}
keys: [{key: sk-file, user: alice, tenant: acme}]
`)
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sum := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	src := mapSource{
		sum("sk-file"):    {Principal: Principal{KeyID: "x", User: "shadowed", Tenant: "other"}, Revoked: true},
		sum("sk-live"):    {Principal: Principal{KeyID: "l", User: "bob", Tenant: "acme"}, ExpiresAt: now.Add(time.Second)},
		sum("sk-expired"): {Principal: Principal{KeyID: "e", User: "eve", Tenant: "acme"}, ExpiresAt: now},
		sum("sk-revoked"): {Principal: Principal{KeyID: "r", User: "rob", Tenant: "acme"}, Revoked: true},
	}
	for _, tc := range []struct {
		cred     string
		src      KeySource
		wantUser string
		want     KeyStatus
	}{
		{"sk-file", src, "alice", KeyAccepted}, // the file wins over the store
		{"sk-live", src, "bob", KeyAccepted},
		{"sk-expired", src, "eve", KeyExpired}, // named, for the access log
		{"sk-revoked", src, "rob", KeyRevoked},
		{"sk-unknown", src, "", KeyAccepted}, // pass-through
		{"sk-live", nil, "", KeyAccepted},    // no source: a pass-through caller
		{"", src, "", KeyUnknown},
		// Pass-through takes one token68 only: the upstream may read the
		// key before a break where llmguard would see a new caller.
		{"sk-proj-AbC_12.x~y+z/w==", src, "", KeyAccepted},
		{"sk-A junk", src, "", KeyMalformed},
		{"sk-A,sk-B", src, "", KeyMalformed},
		{"sk-A\tjunk", src, "", KeyMalformed},
		{`"sk-A"`, src, "", KeyMalformed},
		{"sk-A=x", src, "", KeyMalformed},
		{"==", src, "", KeyMalformed},
		{"sk-\u00e9", src, "", KeyMalformed},
		{strings.Repeat("k", 4097), src, "", KeyMalformed},
	} {
		pr, st := p.Authenticate(tc.cred, tc.src, now)
		if st != tc.want || (tc.wantUser != "" && pr.User != tc.wantUser) {
			t.Errorf("%q: %s %+v, want %s user %q", tc.cred, st, pr, tc.want, tc.wantUser)
		}
		if bpr, bst := p.AuthenticateBytes([]byte(tc.cred), tc.src, now); bst != st || bpr != pr {
			t.Errorf("%q: AuthenticateBytes %s %+v, Authenticate %s %+v", tc.cred, bst, bpr, st, pr)
		}
		if tc.wantUser == "" && st == KeyAccepted && !pr.PassThrough {
			t.Errorf("%q: accepted as %+v, want a pass-through caller", tc.cred, pr)
		}
	}
	if _, st := p.Authenticate("sk-live", src, now.Add(time.Second-time.Nanosecond)); st != KeyAccepted {
		t.Errorf("a nanosecond before its expiry: %s", st)
	}
	if _, st := p.Authenticate("sk-live", src, now.Add(time.Second)); st != KeyExpired {
		t.Errorf("at its expiry: %s", st)
	}
	// Without pass-through a credential no key has is unknown, whatever
	// its shape.
	off, err := Compile(mustConfig(t, `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-file, user: alice, tenant: acme}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, cred := range []string{"sk-A junk", "sk-unknown"} {
		if _, st := off.Authenticate(cred, nil, now); st != KeyUnknown {
			t.Errorf("pass-through off, %q: %s, want unknown", cred, st)
		}
	}
	if !p.HasFileKey(sum("sk-file")) || p.HasFileKey(sum("sk-live")) || p.FileKeys() != 1 {
		t.Error("HasFileKey / FileKeys")
	}
}

// FuzzToken68 holds token68 to its grammar (RFC 7235 §2.1) written as a
// regular expression, with the 4 KiB bound.
func FuzzToken68(f *testing.F) {
	for _, s := range []string{"sk-a", "a==", "==", "", "a b", "a=b", "sk-ant-api03-x_Y.z~+/", "é"} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := token68(s), re.MatchString(s) && len(s) <= 4096; got != want {
			t.Errorf("token68(%q) = %v, want %v", s, got, want)
		}
	})
}
