package keystore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// MaxRequestBytes bounds an admin API request body, in bytes.
const MaxRequestBytes = 8 << 10

// MaxGrace bounds a rotation's grace period.
const MaxGrace = 30 * 24 * time.Hour

// ErrBodyTooLarge is returned (wrapped) for a body over MaxRequestBytes.
var ErrBodyTooLarge = errors.New("keystore: request body too large")

// RequestError is a request the admin API refuses with 400: its message
// says what to change.
type RequestError struct{ Msg string }

func (e *RequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &RequestError{Msg: fmt.Sprintf(format, args...)}
}

// Spec is a validated new key: who it is and when it expires (zero:
// never; else a whole second, UTC).
type Spec struct {
	User, Tenant, Plan string
	ExpiresAt          time.Time
}

// createBody is the JSON of POST /admin/keys.
type createBody struct {
	User      string `json:"user"`
	Tenant    string `json:"tenant"`
	Plan      string `json:"plan"`
	ExpiresAt string `json:"expires_at"` // RFC 3339
	ExpiresIn string `json:"expires_in"` // Go duration
}

// rotateBody is the JSON of POST /admin/keys/{id}/rotate.
type rotateBody struct {
	Grace string `json:"grace"` // Go duration
}

// ParseCreate reads the body of POST /admin/keys, bytes that are not
// trusted, at instant now:
//
//	{"tenant": "acme", "user": "alice", "plan": "pro",
//	 "expires_at": "2027-01-01T00:00:00Z" | "expires_in": "720h"}
//
// tenant is required; user, plan and the expiry (one of expires_at, an
// RFC 3339 instant, or expires_in, a Go duration from now) are optional.
// An expiry is cut to the whole second and must fall after now and
// within MaxLifetime. Errors: ErrBodyTooLarge (wrapped) past
// MaxRequestBytes, else *RequestError for a body that is not one JSON
// object, has an unknown field, or a field out of bounds.
func ParseCreate(body []byte, now time.Time) (Spec, error) {
	var b createBody
	if err := decode(body, &b); err != nil {
		return Spec{}, err
	}
	s := Spec{User: b.User, Tenant: b.Tenant, Plan: b.Plan}
	if s.Tenant == "" {
		return Spec{}, badRequest("tenant is required")
	}
	for _, f := range []struct{ name, v string }{{"user", s.User}, {"tenant", s.Tenant}, {"plan", s.Plan}} {
		if err := CheckText(f.name, f.v); err != nil {
			return Spec{}, &RequestError{Msg: err.Error()}
		}
	}
	switch {
	case b.ExpiresAt != "" && b.ExpiresIn != "":
		return Spec{}, badRequest("set expires_at or expires_in, not both")
	case b.ExpiresAt != "":
		t, err := time.Parse(time.RFC3339, b.ExpiresAt)
		if err != nil {
			return Spec{}, badRequest("expires_at must be an RFC 3339 instant such as 2027-01-01T00:00:00Z (got %q)", clip(b.ExpiresAt))
		}
		s.ExpiresAt = t.UTC().Truncate(time.Second)
	case b.ExpiresIn != "":
		d, err := time.ParseDuration(b.ExpiresIn)
		if err != nil || d <= 0 || d > MaxLifetime {
			return Spec{}, badRequest("expires_in must be a positive Go duration up to %v, such as 720h (got %q)", MaxLifetime, clip(b.ExpiresIn))
		}
		s.ExpiresAt = now.Add(d).UTC().Truncate(time.Second)
	}
	if !s.ExpiresAt.IsZero() {
		if !s.ExpiresAt.After(now) {
			return Spec{}, badRequest("the expiry %s is not after now (%s)", s.ExpiresAt.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		if s.ExpiresAt.Sub(now) > MaxLifetime {
			return Spec{}, badRequest("the expiry %s is more than %v away", s.ExpiresAt.Format(time.RFC3339), MaxLifetime)
		}
	}
	return s, nil
}

// ParseRotate reads the body of POST /admin/keys/{id}/rotate: empty, or
// {"grace": "1h"}, how long the old key keeps working (a Go duration up
// to MaxGrace; zero, the default: it is revoked at once). Errors as
// ParseCreate's.
func ParseRotate(body []byte) (grace time.Duration, err error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, nil
	}
	var b rotateBody
	if err := decode(body, &b); err != nil {
		return 0, err
	}
	if b.Grace == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(b.Grace)
	if err != nil || d < 0 || d > MaxGrace {
		return 0, badRequest("grace must be a Go duration between 0s and %v, such as 1h (got %q)", MaxGrace, clip(b.Grace))
	}
	return d, nil
}

// decode reads exactly one JSON object of body into v, refusing unknown
// fields and trailing data.
func decode(body []byte, v any) error {
	if len(body) > MaxRequestBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBodyTooLarge, len(body), MaxRequestBytes)
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return badRequest("the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the body is not valid JSON for this request: %s", clip(err.Error()))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("the body must hold one JSON object and nothing after it")
	}
	// encoding/json takes the last of two equal keys and matches a key in
	// any case: a body a reviewing tool and llmguard would read
	// differently ({"tenant":"acme","tenant":"evil"} made a key of tenant
	// evil) is refused, as llmguard refuses it from callers.
	if err := jsonscan.Check(body, jsonscan.Options{DuplicateKeys: true, FoldCase: true}); err != nil {
		return badRequest("the body is not valid JSON for this request: %s", clip(err.Error()))
	}
	return nil
}

// clip shortens text echoed back in an error to 64 bytes.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
