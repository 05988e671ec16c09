package spec

// Scope says whose bucket a limit takes from. The zero value is ScopeKey.
type Scope uint8

// Scopes, narrowest first: the order in which a request's buckets are taken.
const (
	ScopeKey    Scope = iota // one bucket per virtual key
	ScopeUser                // one per user
	ScopeTenant              // one per tenant
	ScopeGlobal              // one for everyone
)

// scopeNames is the config name of each Scope, indexed by its value: the
// one table of scopes.
var scopeNames = names[Scope]{
	ScopeKey:    "key",
	ScopeUser:   "user",
	ScopeTenant: "tenant",
	ScopeGlobal: "global",
}

// String is the scope's config name; a value outside the enum is
// "unknown(<n>)".
func (s Scope) String() string { return scopeNames.of(s) }

// ParseScope returns the Scope whose config name is s; false if none is.
func ParseScope(s string) (Scope, bool) { return scopeNames.parse(s) }

// ScopeNames returns every scope's config name, narrowest first (a fresh
// slice the caller may keep).
func ScopeNames() []string { return scopeNames.list() }
