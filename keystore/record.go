package keystore

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/llmguard/llmguard/policy"
)

// Redis keys and channel of the key store; one hash tag, so one cluster
// slot.
const (
	// RegistryKey is the hash of every stored key: field = key id (16 hex
	// digits), value = the Record as JSON.
	RegistryKey = "llmguard:{llmguard-keys}:registry"
	// RevKey is the registry's revision: the Rev of its latest change.
	RevKey = "llmguard:{llmguard-keys}:rev"
	// AuditKey is the stream of changes (AuditEntry), bounded by
	// key_store.audit_max_len (XADD MAXLEN ~).
	AuditKey = "llmguard:{llmguard-keys}:audit"
	// Channel carries each changed Record, as JSON, to every node.
	Channel = "llmguard:{llmguard-keys}:changes"
)

// Bounds on what a record and a request may hold.
const (
	// MaxFieldBytes bounds user, tenant, plan and actor, in bytes.
	MaxFieldBytes = 128
	// MaxRecordBytes bounds a record's JSON as read from Redis or a
	// notification; a longer one is refused unread.
	MaxRecordBytes = 4096
	// MaxLifetime bounds how far in the future an expiry may be.
	MaxLifetime = 100 * 365 * 24 * time.Hour
)

// Record is one stored key as the registry holds it: who it is, its
// lifecycle, and its SHA-256 — never the secret.
type Record struct {
	// ID is the first 16 hex digits of SHA256: the key id of logs,
	// metrics and ledger records (policy.Principal.KeyID).
	ID string `json:"id"`
	// SHA256 is the lowercase hex SHA-256 of the secret (64 digits).
	SHA256 string `json:"sha256"`
	// User, Tenant and Plan are the principal's; User defaults to ID.
	User   string `json:"user"`
	Tenant string `json:"tenant"`
	Plan   string `json:"plan,omitempty"`
	// CreatedAt and CreatedBy say when and by whom (the admin caller) the
	// key was created.
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	// ExpiresAt is the first instant (a whole second, UTC) the key is
	// refused; zero: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// RevokedAt and RevokedBy are set once the key is revoked.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`
	// RotatedFrom is the id of the key this one replaced; RotatedTo the id
	// of the key that replaced this one.
	RotatedFrom string `json:"rotated_from,omitempty"`
	RotatedTo   string `json:"rotated_to,omitempty"`
	// Rev is the registry revision of the record's last change: a node
	// keeps the record with the highest Rev it has seen.
	Rev int64 `json:"rev"`
}

// Status of a record at an instant.
const (
	StatusActive  = "active"
	StatusExpired = "expired"
	StatusRevoked = "revoked"
)

// Status is "revoked", "expired" (at now) or "active".
func (r *Record) Status(now time.Time) string {
	switch {
	case !r.RevokedAt.IsZero():
		return StatusRevoked
	case !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt):
		return StatusExpired
	}
	return StatusActive
}

// StateGrace is the State of a key that was rotated (RotatedTo is set) and
// still works: its rotation's grace period runs until its ExpiresAt.
const StateGrace = "grace"

// State is Status at now, with one more value to tell the two working keys
// of a rotation apart (trial26: `keys list` showed the old key "active"
// beside its successor): StateGrace for a key that was rotated and is
// still in its grace period (neither revoked nor expired). "revoked",
// "expired" and "active" otherwise, as Status.
func (r *Record) State(now time.Time) string {
	if st := r.Status(now); st != StatusActive || r.RotatedTo == "" {
		return st
	}
	return StateGrace
}

// Stored is the record as the proxy's identification needs it.
func (r *Record) Stored() policy.StoredKey {
	return policy.StoredKey{
		Principal: policy.Principal{KeyID: r.ID, User: r.User, Tenant: r.Tenant, Plan: r.Plan},
		ExpiresAt: r.ExpiresAt,
		Revoked:   !r.RevokedAt.IsZero(),
		Rotated:   r.RotatedTo != "",
	}
}

// sum is the record's SHA-256 as bytes; ok is false for a malformed one.
func (r *Record) sum() (s [32]byte, ok bool) {
	if len(r.SHA256) != 64 {
		return s, false
	}
	_, err := hex.Decode(s[:], []byte(r.SHA256))
	return s, err == nil
}

// ParseRecord reads a record's JSON as Redis or a notification gives it,
// bytes that are not trusted: at most MaxRecordBytes, one object, a
// 64-digit lowercase SHA-256 whose first 16 digits are the ID, a tenant,
// and every text field within MaxFieldBytes of printable UTF-8. Errors
// describe the first problem.
func ParseRecord(b []byte) (Record, error) {
	var r Record
	if len(b) > MaxRecordBytes {
		return r, fmt.Errorf("keystore: record of %d bytes is over %d", len(b), MaxRecordBytes)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("keystore: record: %w", err)
	}
	if err := r.check(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// check validates a record's fields (ParseRecord's rules).
func (r *Record) check() error {
	if _, ok := r.sum(); !ok || !isLowerHex(r.SHA256) {
		return errors.New("keystore: record: sha256 must be 64 lowercase hex digits")
	}
	if r.ID != r.SHA256[:16] {
		return errors.New("keystore: record: id must be the first 16 digits of sha256")
	}
	if r.Tenant == "" {
		return errors.New("keystore: record: tenant is required")
	}
	for _, f := range []struct{ name, v string }{{"user", r.User}, {"tenant", r.Tenant}, {"plan", r.Plan},
		{"created_by", r.CreatedBy}, {"revoked_by", r.RevokedBy}, {"rotated_from", r.RotatedFrom}, {"rotated_to", r.RotatedTo}} {
		if err := CheckText(f.name, f.v); err != nil {
			return fmt.Errorf("keystore: record: %w", err)
		}
	}
	if r.Rev < 0 {
		return errors.New("keystore: record: rev must not be negative")
	}
	return nil
}

// CheckText refuses a field over MaxFieldBytes, not UTF-8, or holding a
// control character (it is printed in tables and logs); the error names
// the field (name).
func CheckText(name, v string) error {
	if len(v) > MaxFieldBytes {
		return fmt.Errorf("%s is %d bytes, more than %d", name, len(v), MaxFieldBytes)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not UTF-8", name)
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("%s holds a control character", name)
		}
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidID reports whether id is a key id: 16 lowercase hex digits.
func ValidID(id string) bool { return len(id) == 16 && isLowerHex(id) }
