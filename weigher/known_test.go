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
