package loadbench

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/weigher"
)

// TestWarmMissesAreNewMessages explains the "cache hits" column of the
// warm cells (about 65% at 1 KiB, 94% at 16 and 128 KiB): every lookup of
// a warm body that misses is a message whose exact bytes no earlier body
// held, and every element seen before is a hit (a message of a resumed
// prefix counts as one), body by body. What lowers the 1 KiB figure is
// the benchmark's shape, not the cache: a turn is at least turnMinBytes
// (160 bytes, a sixth of a 1 KiB body, not a sixteenth), a third of the
// turns bring a tool call and its result (four new messages), and the
// trim back to ¾ of the size drops most of the old messages every second
// or third body, so that a body holds about 2.7 new messages for 4 to 5
// remembered elements (the system prompt, the tool list and what the
// trim kept). Elements under 64 bytes are neither looked up nor counted
// here. The conversations' seeds are this test's own, so no other test's
// bodies are in the process's shared cache.
func TestWarmMissesAreNewMessages(t *testing.T) {
	pool := newTextPool(1)
	for _, size := range []int{1 << 10, 16 << 10} {
		w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
		if err != nil {
			t.Fatal(err)
		}
		c := newConversation(pool, Shape{Size: size, Warm: true}, 0x5eed13+uint64(size))
		seen := map[string]bool{}
		note := func(body []byte) (old, fresh uint64) {
			gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
				if len(m.Raw) >= 64 {
					if seen[m.Raw] {
						old++
					} else {
						fresh++
					}
				}
				seen[m.Raw] = true
				return true
			})
			return old, fresh
		}
		first := c.next()
		w.Chat(first)
		note(first)
		var hits, lookups uint64
		for i := range 200 {
			body := c.next()
			before := w.CacheStats()
			w.Chat(body)
			after := w.CacheStats()
			old, fresh := note(body)
			old++ // the tool list, sent unchanged
			h, m := after.Hits-before.Hits, after.Misses-before.Misses
			if h != old || m != fresh {
				t.Fatalf("%d KiB, body %d: %d hits and %d misses; it holds %d elements seen before (the tool list included) and %d new",
					size>>10, i, h, m, old, fresh)
			}
			hits, lookups = hits+h, lookups+h+m
		}
		t.Logf("%d KiB warm: %.1f%% hits (%d of %d), all of them the elements seen before", size>>10, 100*float64(hits)/float64(lookups), hits, lookups)
	}
}
