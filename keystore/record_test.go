package keystore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func testRecord(secret string, rev int64) Record {
	h := Hash(secret)
	return Record{ID: h[:16], SHA256: h, User: "u", Tenant: "acme", CreatedAt: t0, CreatedBy: "test", Rev: rev}
}

func TestParseRecordRefusesHostileBytes(t *testing.T) {
	good := testRecord("sk-1", 3)
	b, _ := json.Marshal(good)
	if r, err := ParseRecord(b); err != nil || r != good {
		t.Fatalf("round trip: %+v %v", r, err)
	}
	for name, mutate := range map[string]func(r *Record){
		"id not the hash":   func(r *Record) { r.ID = "0000000000000000" },
		"short hash":        func(r *Record) { r.SHA256 = r.SHA256[:60]; r.ID = r.SHA256[:16] },
		"upper-case hash":   func(r *Record) { r.SHA256 = strings.ToUpper(r.SHA256); r.ID = r.SHA256[:16] },
		"no tenant":         func(r *Record) { r.Tenant = "" },
		"huge user":         func(r *Record) { r.User = strings.Repeat("u", 129) },
		"control in plan":   func(r *Record) { r.Plan = "a\nb" },
		"negative revision": func(r *Record) { r.Rev = -1 },
	} {
		r := good
		mutate(&r)
		b, _ := json.Marshal(r)
		if _, err := ParseRecord(b); err == nil {
			t.Errorf("%s: accepted %s", name, b)
		}
	}
	if _, err := ParseRecord([]byte(`{"id":` + strings.Repeat(" ", MaxRecordBytes) + `1}`)); err == nil {
		t.Error("a record over MaxRecordBytes was read")
	}
}

func TestRecordStatusIsExactToTheInstant(t *testing.T) {
	r := testRecord("sk-1", 1)
	r.ExpiresAt = time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{r.ExpiresAt.Add(-time.Nanosecond), StatusActive},
		{r.ExpiresAt, StatusExpired},
		{r.ExpiresAt.Add(time.Hour), StatusExpired},
	} {
		if got := r.Status(tc.at); got != tc.want {
			t.Errorf("at %v: %s, want %s", tc.at, got, tc.want)
		}
	}
	r.RevokedAt = t0
	if r.Status(t0.Add(-time.Hour)) != StatusRevoked || !r.Stored().Revoked {
		t.Error("a revoked record is not revoked")
	}
}

// State tells a rotated key in its grace period ("grace") from a key that
// was never rotated ("active"), while Status calls both active; past the
// grace, or revoked, it is Status (trial26).
func TestRecordStateGrace(t *testing.T) {
	r := testRecord("sk-1", 1)
	r.ExpiresAt = time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)
	at := r.ExpiresAt.Add(-time.Second)
	if got := r.State(at); got != StatusActive {
		t.Errorf("a key never rotated: state %s, want active", got)
	}
	r.RotatedTo = "9f86d081884c7d65"
	for _, tc := range []struct {
		at         time.Time
		want, stat string
	}{
		{at, StateGrace, StatusActive},
		{r.ExpiresAt, StatusExpired, StatusExpired},
	} {
		if got, st := r.State(tc.at), r.Status(tc.at); got != tc.want || st != tc.stat {
			t.Errorf("a rotated key at %v: state %s, status %s; want %s, %s", tc.at, got, st, tc.want, tc.stat)
		}
	}
	r.RevokedAt = t0
	if got := r.State(at); got != StatusRevoked {
		t.Errorf("a rotated key revoked: state %s, want revoked", got)
	}
}

func FuzzParseRecord(f *testing.F) {
	good, _ := json.Marshal(testRecord("sk-1", 3))
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"x","sha256":"` + strings.Repeat("0", 64) + `","tenant":"t"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		if err != nil {
			return
		}
		if r.ID != r.SHA256[:16] || r.Tenant == "" || len(r.User) > MaxFieldBytes {
			t.Fatalf("accepted %+v", r)
		}
		c := NewCache()
		c.Apply(r)
		s, _ := r.sum()
		if _, ok := c.LookupKey(s); !ok {
			t.Fatalf("an accepted record is not looked up: %+v", r)
		}
	})
}
