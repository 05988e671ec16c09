package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Fingerprint is the hex SHA-256 (64 characters) of c's settings as
// loaded: defaults filled, price files read, in a fixed encoding (JSON of
// the struct, map keys sorted), so that two files that differ only in
// comments, spacing, key order or a default spelt out have the same
// fingerprint, and any other setting that differs changes it. Left out:
// the listen addresses and TLS files (serve's --listen and --admin-listen
// override the first; the second are resolved against the config file's
// folder, which depends on the path it was named by). The admin commands
// send it, so that a node serving another config (another llmguard on the
// address, a reload that was refused) says so instead of answering with
// its own numbers. It returns "" if c cannot be encoded (it always can:
// Config holds no func or channel).
func (c *Config) Fingerprint() string {
	o := *c
	o.Listen, o.AdminListen, o.TLS, o.AdminTLS = "", "", nil, nil
	b, err := json.Marshal(&o)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
