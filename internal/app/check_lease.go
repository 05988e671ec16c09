package app

import (
	"fmt"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// checkLeases warns of every lease in a config whose store is the memory
// backend: one process already holds every bucket in memory, so a lease
// would only add bookkeeping; llmguard takes such limits as they are
// (README, "Leases").
func checkLeases(cfg *config.Config) []Finding {
	if cfg.Store.Kind() != spec.BackendMemory {
		return nil
	}
	var out []Finding
	for i, l := range cfg.Limits {
		if l.Lease != nil {
			out = append(out, Finding{Field: fmt.Sprintf("limits[%d].lease", i), Message: fmt.Sprintf(
				"limit %s has a lease, which has no effect with store.backend memory: this process holds every bucket in memory already; leases serve a Redis store's hot buckets from memory", l.Name)})
		}
	}
	return out
}
