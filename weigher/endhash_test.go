package weigher

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestEndHashesWriteTheHints: the end hints a request writes under the
// hashes End made (endHash) are those its elements' first hintPrefix bytes
// hash to: every message and the tools list of a chat conversation, new
// and resumed, weighed through the cache, is found by its hint with the
// hash made afresh (a message whose hint is wrong, for another message
// that starts alike, included).
func TestEndHashesWriteTheHints(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	c := w.cache
	msg := func(i int) string {
		return `{"role":"user","content":"message ` + strconv.Itoa(i) + ` ` + strings.Repeat("long enough to have an end hint of its own, ", 4) + `"}`
	}
	tools := `[{"type":"function","function":{"name":"search","description":"` + strings.Repeat("searches the docs ", 8) + `","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	var msgs []string
	for turn := range 6 {
		msgs = append(msgs, msg(2*turn), msg(2*turn+1))
		if turn == 3 {
			// Its first hintPrefix bytes are message 1's, its end is not:
			// End's guess is wrong, the scan finds the end and offers it
			// to Vouch, which keeps End's hash.
			msgs = append(msgs, strings.TrimSuffix(msg(1), `"}`)+`and longer"}`)
		}
		body := `{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `],"tools":` + tools + `,"max_tokens":50}`
		if e := w.Chat([]byte(body)); !e.Parsed {
			t.Fatalf("turn %d: %+v", turn, e)
		}
		hints := c.hints.Load()
		elemCtx := c.fieldsContext(chatMessageFields, 2, w.maxDepth)
		// Messages that start alike share a hint: the last one's.
		want := map[string]int{}
		gjson.Get(body, "messages").ForEach(func(_, m gjson.Result) bool {
			if m.Index+hintPrefix <= len(body) {
				want[body[m.Index:m.Index+hintPrefix]] = len(m.Raw)
			}
			return true
		})
		checked, evicted := 0, 0
		gjson.Get(body, "messages").ForEach(func(_, m gjson.Result) bool {
			if m.Index+hintPrefix <= len(body) {
				prefix := body[m.Index : m.Index+hintPrefix]
				h := c.hintHash(elemCtx, prefix)
				if got := hints.get(h); got != want[prefix] {
					// The table is direct-mapped and its hash seeded at
					// random: another hint written since (a message's, the
					// tools', a part's) may hold this one's slot. That is
					// eviction, not a missing write; a slot still holding
					// this hint's tag with another size is a wrong write.
					if got == 0 && uint32(hints.slots[h&hints.mask].Load()>>32) != uint32(h>>32) {
						evicted++
						return true
					}
					t.Fatalf("turn %d: message at %d: hint %d, want %d", turn, m.Index, got, want[prefix])
				}
				checked++
			}
			return true
		})
		if evicted > 2 {
			t.Fatalf("turn %d: %d hints missing (evicted or never written) from %d slots: the check looks at too few", turn, evicted, len(hints.slots))
		}
		checked += evicted
		tl := gjson.Get(body, "tools")
		th := c.hintHash(c.listContext(toolFields, 1, w.maxDepth), body[tl.Index:tl.Index+hintPrefix])
		if got := hints.get(th); got != len(tl.Raw) && (got != 0 || uint32(hints.slots[th&hints.mask].Load()>>32) == uint32(th>>32)) {
			t.Fatalf("turn %d: tools: hint %d, want %d", turn, got, len(tl.Raw))
		}
		if checked < len(msgs)-1 {
			t.Fatalf("turn %d: %d of %d messages checked", turn, checked, len(msgs))
		}
	}
	if c.resumes.Load() == 0 {
		t.Error("no body resumed")
	}
}
