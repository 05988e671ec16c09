package loadbench

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// A child on Redis or a cluster sends no idle health probe (one would be
// counted in another child's run or floor on the same servers), keeps the
// store.timeout it is given, and is otherwise the config it always was:
// three rules on the store asked for.
func TestChildConfigHasNoIdleProbe(t *testing.T) {
	for _, c := range []struct {
		name, redis, cluster string
		timeout              time.Duration
		backend              string
	}{
		{"memory", "", "", 0, "memory"},
		{"redis", "127.0.0.1:6390", "", 2 * time.Second, "redis"},
		{"redis, default timeout", "127.0.0.1:6390", "", 0, "redis"},
		{"cluster", "", "127.0.0.1:7000,127.0.0.1:7001", 10 * time.Second, "redis_cluster"},
	} {
		cfg, err := config.Parse(childConfig("http://127.0.0.1:1", c.redis, c.cluster, c.timeout))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := cfg.Store
		if s.Backend != c.backend || len(cfg.Limits) != 3 {
			t.Errorf("%s: backend %q with %d limits, want %q with 3", c.name, s.Backend, len(cfg.Limits), c.backend)
		}
		if c.backend == "memory" {
			continue
		}
		if s.HealthCheck == nil || *s.HealthCheck != 0 {
			t.Errorf("%s: health_check %v, want 0 (no idle probe)", c.name, s.HealthCheck)
		}
		if want := config.Duration(c.timeout); c.timeout > 0 && s.Timeout != want {
			t.Errorf("%s: timeout %v, want %v", c.name, s.Timeout, want)
		}
	}
}
