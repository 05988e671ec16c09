package bucket

import (
	"strconv"
	"testing"
)

// shardOf sends a key to one shard, always the same in a Memory, and
// spreads keys over all of them: 6,400 bucket keys over 64 shards put
// between 50 and 150 in each (100 expected; a binomial spread of 10).
func TestShardOfSpreadsKeys(t *testing.T) {
	m := NewMemory(MemoryOptions{SweepEvery: -1})
	defer m.Close()
	counts := make([]int, len(m.shards))
	for i := range 100 * len(m.shards) {
		k := "llmguard:{tenant-" + strconv.Itoa(i%50) + "}:user-tpm:user-" + strconv.Itoa(i)
		s := m.shardOf(k)
		if again := m.shardOf(k); again != s {
			t.Fatalf("key %q: shard %d, then %d", k, s, again)
		}
		counts[s]++
	}
	for s, n := range counts {
		if n < 50 || n > 150 {
			t.Errorf("shard %d holds %d of %d keys, want 50 to 150", s, n, 100*len(m.shards))
		}
	}
}
