package keystore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// SecretPrefix starts every secret the key store makes, so that secret
// scanners and people can tell an llmguard key.
const SecretPrefix = "sk-lg-"

// NewSecret returns a new secret: SecretPrefix and 32 bytes from
// crypto/rand in unpadded base64url (43 characters), 256 bits of entropy.
// crypto/rand.Read does not fail on supported platforms (it panics
// otherwise, per its documentation).
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Hash is the lowercase hex SHA-256 of a key, the form of the config
// file's key_sha256 and of Record.SHA256.
func Hash(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}
