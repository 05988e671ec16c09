package config

import "time"

// KeyStore turns on virtual keys managed live in the Redis store (README,
// "Managing keys"): created, listed, revoked and rotated through the admin
// API (/admin/keys) and `llmguard keys`, seen by every node sharing the
// store within a second (Redis pub/sub), with a periodic resync as the
// safety net. The keys under Keys (the file's) keep working beside them.
// The zero value is off.
type KeyStore struct {
	// Enabled turns the store's keys on. It needs store.backend redis or
	// redis_cluster: the memory backend has nothing to share, and its
	// /admin/keys answers 501. Default false.
	Enabled bool `yaml:"enabled"`
	// Resync is how often a node reads the whole key registry again, in
	// case a notification was lost; a node also reads it whenever its
	// subscription (re)connects. Default 30s; between 1s and 24h.
	Resync Duration `yaml:"resync"`
	// AuditMaxLen bounds the audit stream of key changes (XADD MAXLEN ~),
	// in entries. Default 100000; at least 1000.
	AuditMaxLen int64 `yaml:"audit_max_len"`
	// MaxKeys bounds the keys the registry holds, revoked ones included:
	// a create past it is refused (409), and a node reads at most this
	// many. Default 100000; at most 1000000.
	MaxKeys int `yaml:"max_keys"`
}

// Key store bounds and defaults (KeyStore's field docs).
const (
	DefaultKeyStoreResync      = 30 * time.Second
	MinKeyStoreResync          = time.Second
	MaxKeyStoreResync          = 24 * time.Hour
	DefaultKeyStoreAuditMaxLen = 100000
	MinKeyStoreAuditMaxLen     = 1000
	DefaultKeyStoreMaxKeys     = 100000
	MaxKeyStoreMaxKeys         = 1000000
)

func (c *Config) applyKeyStoreDefaults() {
	k := &c.KeyStore
	if k.Resync == 0 {
		k.Resync = Duration(DefaultKeyStoreResync)
	}
	if k.AuditMaxLen == 0 {
		k.AuditMaxLen = DefaultKeyStoreAuditMaxLen
	}
	if k.MaxKeys == 0 {
		k.MaxKeys = DefaultKeyStoreMaxKeys
	}
}

// validateKeyStore reports every problem of key_store.
func (c *Config) validateKeyStore(p *problems) {
	k := c.KeyStore
	// Zero fields are the defaults (Validate may run before applyDefaults).
	if k.Resync == invalidDuration {
		checkDuration(p, "key_store.resync", k.Resync)
	} else if d := time.Duration(k.Resync); d != 0 && (d < MinKeyStoreResync || d > MaxKeyStoreResync) {
		p.add("key_store.resync", "must be between %v and %v (got %v)", MinKeyStoreResync, MaxKeyStoreResync, d)
	}
	if k.AuditMaxLen != 0 && k.AuditMaxLen < MinKeyStoreAuditMaxLen {
		p.add("key_store.audit_max_len", "must be at least %d entries (got %d)", MinKeyStoreAuditMaxLen, k.AuditMaxLen)
	}
	if k.MaxKeys < 0 || k.MaxKeys > MaxKeyStoreMaxKeys {
		p.add("key_store.max_keys", "must be between 1 and %d (got %d)", MaxKeyStoreMaxKeys, k.MaxKeys)
	}
	if k.Enabled && !c.Store.Kind().Shared() {
		p.add("key_store.enabled", "needs store.backend redis or redis_cluster, where every node shares the keys (got %q); with the memory store, keys live in the file (keys:)", c.Store.Backend)
	}
}
