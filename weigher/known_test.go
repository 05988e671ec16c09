package weigher

import (
	"strings"
	"testing"
)

// TestWarmElementsSkipTheScanOnlyWhereTheyPassed: an element whose bytes
// the count cache marked is not scanned again (elemMemo.Vouch), so the
// marks must name everything its passing depended on. A weigher with a
// lower nesting limit, sharing the cache, still finds the remembered
// message too deep; a remembered message or tool list beside a broken
// member, a repeated key or a case variant does not get the body weighed.
func TestWarmElementsSkipTheScanOnlyWhereTheyPassed(t *testing.T) {
	deep := `{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("nested deep enough to cache ", 3) + `","x":[[[[1]]]]}]}`
	tools := `[{"type":"function","function":{"name":"lookup","description":"looks things up in the index","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	body := `{"model":"gpt-4o","messages":[` + deep + `],"tools":` + tools + `}`
	w := cachedWeigher(t, 1<<20)
	w.maxDepth = 16
	for range 2 {
		if e := w.Chat([]byte(body)); !e.Parsed {
			t.Fatalf("limit 16: %+v", e)
		}
	}
	if w.cache.stats().Entries == 0 {
		t.Fatal("nothing cached")
	}
	shallow := *w
	shallow.maxDepth = 6 // the message nests 7 deep
	if e := shallow.Chat([]byte(body)); !e.TooDeep || e.Parsed {
		t.Errorf("limit 6, a message remembered under limit 16: %+v, want TooDeep", e)
	}
	for _, bad := range []string{
		`{"model":"gpt-4o","messages":[` + deep + `],"tools":` + tools + `,"model":"x"}`,
		`{"model":"gpt-4o","messages":[` + deep + `],"tools":` + tools + `,"Tools":[]}`,
		`{"model":"gpt-4o","messages":[` + deep + `,{"role":"user","ROLE":"x"}],"tools":` + tools + `}`,
		`{"model":"gpt-4o","messages":[` + deep + `,{"role":"user","content":"\xff"}],"tools":` + tools + `}`,
		`{"model":"gpt-4o","messages":[` + deep + `],"tools":` + tools + `,"n":01}`,
		`{"model":"gpt-4o","messages":[` + deep + deep + `],"tools":` + tools + `}`,
		`{"model":"gpt-4o","messages":[` + deep + `],"tools":` + tools[:len(tools)-1] + `,]}`,
	} {
		if e := w.Chat([]byte(bad)); e.Parsed {
			t.Errorf("%q weighed: %+v", bad, e)
		}
		sameAsPlain(t, KindChat, []byte(bad))
	}
}

// FuzzWarmBodies: a body weighed after another, whose elements the count
// cache (and so the scan's Known) remembers, is weighed as the plain
// weigher weighs it, refusals included.
func FuzzWarmBodies(f *testing.F) {
	a := agentBody(1)
	for _, b := range []string{
		string(agentBody(1)), string(agentBody(2)),
		strings.Replace(string(a), `"role":"user"`, `"role":"user","ROLE":"x"`, 1),
		strings.Replace(string(a), `"max_tokens":256`, `"max_tokens":256,"model":"x"`, 1),
		strings.Replace(string(a), `]}`, `]`, 1),
		strings.Replace(string(a), `"messages":[`, `"messages":[[`, 1) + "]",
	} {
		f.Add(a, []byte(b), uint8(KindChat))
	}
	msgs := `{"model":"claude-sonnet-4-5","max_tokens":64,"system":[{"type":"text","text":"` + strings.Repeat("you are terse ", 6) + `"}],"messages":[{"role":"user","content":"` + strings.Repeat("hello there ", 8) + `"}]}`
	f.Add([]byte(msgs), []byte(strings.Replace(msgs, `"max_tokens":64,`, `"max_tokens":64,"MAX_TOKENS":1,`, 1)), uint8(KindMessages))
	w := cachedWeigher(f, 1<<20)
	f.Fuzz(func(t *testing.T, first, second []byte, k uint8) {
		kind := Kind(k % uint8(numKinds))
		if !kind.Weighed() {
			return
		}
		w.Weigh(kind, first)
		if got, want := w.Weigh(kind, second), plain(t).Weigh(kind, second); got != want {
			t.Fatalf("%s %q after %q: %+v, plain %+v", kind, second, first, got, want)
		}
	})
}
