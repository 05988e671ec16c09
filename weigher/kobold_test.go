package weigher

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// KoboldCpp's chat route wraps every message in its role's start and end
// strings from the body's adapter: a 500-word user_start beside 40 user
// messages is some 20,000 tokens of prompt, weighed before as the
// adapter's text once (about 500).
func TestKoboldAdapterWrapsEveryMessage(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("word ", 500))
	var msgs []string
	for range 40 {
		msgs = append(msgs, `{"role":"user","content":"hi"}`)
	}
	conv := "[" + strings.Join(msgs, ",") + "]"
	for _, w := range []*Weigher{testWeigher(t), uncached(t)} {
		for _, tc := range []struct {
			name, adapter string
			least, most   int64
		}{
			{"user_start per message", `{"user_start":"` + long + `"}`, 40 * 500, 41*500 + 300},
			{"start and end of one role", `{"user_start":"` + long + `","user_end":"` + long + `"}`, 40 * 1000, 41*1000 + 300},
			{"the largest role's pair", `{"system_start":"x","user_start":"` + long + `","assistant_end":"y y"}`, 40 * 500, 41*500 + 300},
			{"not an object: its text once", `"` + long + `"`, 500, 800},
			{"null: nothing", `null`, 0, 300},
		} {
			body := fmt.Sprintf(`{"model":"my-model","max_tokens":1,"messages":%s,"adapter":%s}`, conv, tc.adapter)
			// Twice: the second weighs from the count cache.
			for range 2 {
				e := w.Weigh(KindChat, []byte(body))
				if !e.Parsed || e.InputTokens < tc.least || e.InputTokens > tc.most {
					t.Errorf("%s: InputTokens %d (parsed %v), want %d..%d", tc.name, e.InputTokens, e.Parsed, tc.least, tc.most)
				}
			}
		}
	}
	// A non-string role value by its JSON text, per message too.
	e := testWeigher(t).Weigh(KindChat, []byte(`{"model":"my-model","max_tokens":1,"messages":`+conv+`,"adapter":{"user_start":["`+long+`"]}}`))
	if e.InputTokens < 40*500 {
		t.Errorf("array user_start: InputTokens %d, want at least %d", e.InputTokens, 40*500)
	}
}

func FuzzKoboldAdapterTokens(f *testing.F) {
	f.Add(`{"user_start":"a b","user_end":"c"}`, 3)
	f.Add(`{"x_start":1,"x_end":[1,2],"chat_start":"s"}`, 0)
	f.Add(`"text"`, 2)
	f.Fuzz(func(t *testing.T, adapter string, n int) {
		n = n & 63
		msgs := "[" + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, n), ",") + "]"
		body := `{"model":"my-model","max_tokens":1,"messages":` + msgs + `,"adapter":` + adapter + `}`
		w := testWeigher(t)
		e := w.Weigh(KindChat, []byte(body))
		if !e.Parsed {
			return
		}
		// Never below the adapter's text once, as any unknown member.
		without := w.Weigh(KindChat, []byte(`{"model":"my-model","max_tokens":1,"messages":`+msgs+`}`))
		if e.InputTokens < without.InputTokens {
			t.Fatalf("with the adapter %d tokens, without %d", e.InputTokens, without.InputTokens)
		}
	})
}

// An adapter of many role keys is weighed in memory of its own size, not
// a table of its roles: 200,000 distinct "rN_start" keys (some 3 MB) in
// one body allocate at most twice its size (the scan's own layout is about its size).
func TestKoboldAdapterOfManyKeysHoldsNoTable(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"my-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"adapter":{`)
	for i := range 200000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"r%d_start":"x"`, i)
	}
	b.WriteString(`}}`)
	body := []byte(b.String())
	w := uncached(t)
	w.Weigh(KindChat, body) // warm the counter's pools
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w.Weigh(KindChat, body)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*uint64(len(body)) {
		t.Errorf("%d bytes allocated weighing an adapter of 200,000 role keys (a %d-byte body), want at most twice the body (no table of roles: 18 MB with one)", got, len(body))
	}
}
