package app

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/llmguard/llmguard/keystore"
)

// The usage reports read the budgets of revoked or expired stored keys
// that could still be used when the earliest budget period began, not of
// every key ever revoked: revoked keys stay in the registry for good, and
// each one read costs a store call per key or user budget at every read.
func TestFormerStorePrincipalsSince(t *testing.T) {
	cache := keystore.NewCache()
	add := func(user string, revoked, expires time.Time) {
		sum := sha256.Sum256([]byte(user))
		h := hex.EncodeToString(sum[:])
		if !cache.Apply(keystore.Record{ID: h[:16], SHA256: h, User: user, Tenant: "acme", RevokedAt: revoked, ExpiresAt: expires}) {
			t.Fatalf("record of %s refused", user)
		}
	}
	day := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, time.UTC) }
	add("revoked-before", day(10, 9), time.Time{})
	add("revoked-today", day(15, 9), time.Time{})
	add("expired-before", time.Time{}, day(1, 0))
	add("expired-today", time.Time{}, day(15, 1))
	add("active", time.Time{}, day(20, 0))
	a := &App{keys: &keyStore{cache: cache}}
	now, since := day(15, 12), day(15, 0)
	users := func(since time.Time) []string {
		var out []string
		for _, pr := range a.formerStorePrincipals(now, since) {
			out = append(out, pr.User)
		}
		slices.Sort(out)
		return out
	}
	if got, want := users(since), []string{"expired-today", "revoked-today"}; !slices.Equal(got, want) {
		t.Errorf("since %v: %v, want %v", since, got, want)
	}
	if got, want := users(time.Time{}), []string{"expired-before", "expired-today", "revoked-before", "revoked-today"}; !slices.Equal(got, want) {
		t.Errorf("since zero: %v, want %v", got, want)
	}
}
