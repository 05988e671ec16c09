package spec

// Backend is the bucket store a config selects (store.backend). The zero
// value is BackendMemory, the default.
type Backend uint8

// Backends a config may name, in the order of backendNames.
const (
	BackendMemory       Backend = iota // one process's memory
	BackendRedis                       // one Redis (or a primary with replicas) shared by every node
	BackendRedisCluster                // a Redis Cluster shared by every node
)

// backendNames is the config name of each Backend, indexed by its value:
// the one table of store backends.
var backendNames = names[Backend]{
	BackendMemory:       "memory",
	BackendRedis:        "redis",
	BackendRedisCluster: "redis_cluster",
}

// String is the backend's config name; a value outside the enum is
// "unknown(<n>)".
func (b Backend) String() string { return backendNames.of(b) }

// Shared reports whether every node shares the store's buckets: Redis or
// Redis Cluster, not one process's memory.
func (b Backend) Shared() bool { return b == BackendRedis || b == BackendRedisCluster }

// ParseBackend returns the Backend whose config name is s; false if none
// is.
func ParseBackend(s string) (Backend, bool) { return backendNames.parse(s) }

// BackendNames returns every backend's config name in value order (a
// fresh slice the caller may keep).
func BackendNames() []string { return backendNames.list() }

// FailureMode is what a limit does while its store cannot answer
// (store.on_failure, limits[].on_failure). The zero value is FailOpen, the
// default.
type FailureMode uint8

// Failure modes, in the order of failureModeNames.
const (
	FailOpen   FailureMode = iota // admit against the node's fallback bucket (limit / store.nodes)
	FailClosed                    // refuse: 503
)

// failureModeNames is the config name of each FailureMode, indexed by its
// value: the one table of failure modes.
var failureModeNames = names[FailureMode]{
	FailOpen:   "open",
	FailClosed: "closed",
}

// String is the mode's config name; a value outside the enum is
// "unknown(<n>)".
func (m FailureMode) String() string { return failureModeNames.of(m) }

// ParseFailureMode returns the FailureMode whose config name is s; false if
// none is.
func ParseFailureMode(s string) (FailureMode, bool) { return failureModeNames.parse(s) }

// FailureModeNames returns every failure mode's config name in value order
// (a fresh slice the caller may keep).
func FailureModeNames() []string { return failureModeNames.list() }
