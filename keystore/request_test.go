package keystore

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 500_000_000, time.UTC) // half past a second

func TestParseCreate(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Spec
		err        string // substring of the error; "" for none
	}{
		{name: "minimal", body: `{"tenant":"acme"}`, want: Spec{Tenant: "acme"}},
		{name: "all", body: `{"tenant":"acme","user":"al","plan":"pro","expires_at":"2027-01-01T00:00:00.9Z"}`,
			want: Spec{Tenant: "acme", User: "al", Plan: "pro", ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{name: "expires_in cut to the second", body: `{"tenant":"acme","expires_in":"10s"}`,
			want: Spec{Tenant: "acme", ExpiresAt: time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)}},
		{name: "zone converted to UTC", body: `{"tenant":"acme","expires_at":"2027-01-01T01:00:00+01:00"}`,
			want: Spec{Tenant: "acme", ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{name: "no tenant", body: `{"user":"al"}`, err: "tenant is required"},
		{name: "unknown field", body: `{"tenant":"acme","admin":true}`, err: `unknown field "admin"`},
		{name: "trailing data", body: `{"tenant":"acme"} {"tenant":"evil"}`, err: "one JSON object"},
		{name: "not an object", body: `["acme"]`, err: "JSON object"},
		{name: "empty", body: ``, err: "JSON object"},
		{name: "bad JSON", body: `{"tenant":"acme"`, err: "not valid JSON"},
		{name: "wrong type", body: `{"tenant":7}`, err: "not valid JSON"},
		{name: "huge field", body: `{"tenant":"` + strings.Repeat("a", 129) + `"}`, err: "tenant is 129 bytes, more than 128"},
		{name: "control character", body: `{"tenant":"acme","user":"a\u0007b"}`, err: "user holds a control character"},
		{name: "not UTF-8 (decoded as U+FFFD)", body: "{\"tenant\":\"a\xffb\"}", want: Spec{Tenant: "a\ufffdb"}},
		{name: "both expiries", body: `{"tenant":"acme","expires_at":"2027-01-01T00:00:00Z","expires_in":"1h"}`, err: "not both"},
		{name: "past", body: `{"tenant":"acme","expires_at":"2026-12-01T12:00:00Z"}`, err: "not after now"},
		{name: "too far", body: `{"tenant":"acme","expires_at":"2200-01-01T00:00:00Z"}`, err: "more than"},
		{name: "bad instant", body: `{"tenant":"acme","expires_at":"tomorrow"}`, err: "RFC 3339"},
		{name: "bad duration", body: `{"tenant":"acme","expires_in":"-1h"}`, err: "positive Go duration"},
		{name: "sub-second", body: `{"tenant":"acme","expires_in":"100ms"}`, err: "not after now"},
	} {
		got, err := ParseCreate([]byte(tc.body), t0)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		case tc.err != "" && !errors.As(err, new(*RequestError)):
			t.Errorf("%s: %T is not a *RequestError", tc.name, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	big := `{"tenant":"acme","plan":"` + strings.Repeat("x", MaxRequestBytes) + `"}`
	if _, err := ParseCreate([]byte(big), t0); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("a body over %d bytes: %v", MaxRequestBytes, err)
	}
}

func TestParseRotate(t *testing.T) {
	for body, want := range map[string]time.Duration{``: 0, ` `: 0, `{}`: 0, `{"grace":"1h"}`: time.Hour, `{"grace":"0s"}`: 0} {
		if got, err := ParseRotate([]byte(body)); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", body, got, err, want)
		}
	}
	for _, body := range []string{`{"grace":"-1s"}`, `{"grace":"721h"}`, `{"grace":1}`, `{"graces":"1h"}`, `null`, `{"grace":"1h"}x`} {
		if _, err := ParseRotate([]byte(body)); err == nil {
			t.Errorf("%q: accepted", body)
		}
	}
}

func FuzzParseCreate(f *testing.F) {
	for _, s := range []string{`{"tenant":"acme"}`, `{"tenant":"acme","user":"al","plan":"pro","expires_at":"2027-01-01T00:00:00Z"}`,
		`{"tenant":"acme","expires_in":"720h"}`, `{"tenant":"a\u0000"}`, `{"tenant":"acme"} x`, `[]`, `{"tenant":{"a":[1,2]}}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := ParseCreate(body, t0)
		if err != nil {
			return
		}
		if s.Tenant == "" || len(s.Tenant) > MaxFieldBytes || len(s.User) > MaxFieldBytes || len(s.Plan) > MaxFieldBytes {
			t.Fatalf("accepted %+v", s)
		}
		for _, v := range []string{s.Tenant, s.User, s.Plan} {
			if CheckText("f", v) != nil {
				t.Fatalf("accepted text %q", v)
			}
		}
		if !s.ExpiresAt.IsZero() && (!s.ExpiresAt.After(t0) || s.ExpiresAt.Sub(t0) > MaxLifetime || s.ExpiresAt.Nanosecond() != 0) {
			t.Fatalf("accepted expiry %v", s.ExpiresAt)
		}
	})
}

func FuzzParseRotate(f *testing.F) {
	for _, s := range []string{``, `{"grace":"1h"}`, `{"grace":"-1h"}`, `{}`, `{"grace":"1h"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := ParseRotate(body)
		if err == nil && (g < 0 || g > MaxGrace) {
			t.Fatalf("accepted grace %v", g)
		}
	})
}

// A body two readers could read differently is refused: a key twice, a key
// in two cases (encoding/json took the last, in any case: a key of tenant
// "evil" from a body a reviewer reads as tenant "acme").
func TestParseCreateRefusesAmbiguousBodies(t *testing.T) {
	for _, body := range []string{
		`{"tenant":"acme","tenant":"evil"}`,
		`{"tenant":"acme","Tenant":"evil"}`,
		`{"tenant":"acme","expires_in":"1h","expires_in":"876000h"}`,
	} {
		if s, err := ParseCreate([]byte(body), t0); err == nil {
			t.Errorf("%q: accepted as tenant %q", body, s.Tenant)
		}
	}
	if s, err := ParseCreate([]byte(`{"tenant":"acmé"}`), t0); err != nil || s.Tenant != "acmé" {
		t.Errorf("a plain UTF-8 body: %+v %v", s, err)
	}
}
