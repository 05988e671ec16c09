package weigher

import (
	"runtime"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// FuzzDupKeyUsage: dupKeyUsage never panics; its rewrites are valid JSON
// without duplicate keys; and a usage it reads costs at least each
// reading's figures.
func FuzzDupKeyUsage(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":9,"completion_tokens":1},"usage":{"prompt_tokens":3000,"completion_tokens":45}}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":3000,"prompt_tok\u0065ns":9,"completion_tokens":[1,{"a":1,"a":2}]}}`))
	f.Add([]byte(`{"a":"\u00e9","a":[true,null,-1.5e3]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if jsonscan.Check(body, jsonscan.Options{}) != nil {
			return
		}
		for _, k := range []Kind{KindChat, KindResponses, KindMessages, KindCompletions, KindEmbeddings} {
			u, ok := dupKeyUsage(k, body, 0)
			if !ok {
				continue
			}
			root := parsedRoot(body)
			for _, last := range []bool{false, true} {
				d := dedupeKeys(nil, root, last)
				if err := jsonscan.Check(d, jsonscan.Options{DuplicateKeys: true}); err != nil {
					t.Fatalf("rewrite (last %v) of %q: %v: %q", last, body, err, d)
				}
				r, rok := parseUsage(k, d, 0)
				if !rok || r.InputTokens > u.InputTokens || r.OutputTokens > u.OutputTokens {
					t.Fatalf("kind %v: reading %+v (ok %v) above the settled %+v", k, r, rok, u)
				}
			}
		}
	})
}

func parsedRoot(body []byte) gjson.Result { return gjson.ParseBytes(body) }

// TestDedupeKeysAllocationsDoNotGrowWithObjects: rewriting an answer of
// many small objects that name a key twice allocates for the output and
// the per-level scratch, not per object: 20,000 objects cost about what
// 2,000 do (before the scratch was reused, one map and one member list per
// object).
func TestDedupeKeysAllocationsDoNotGrowWithObjects(t *testing.T) {
	allocs := func(n int) float64 {
		body := []byte(`{"usage":{"prompt_tokens":9,"completion_tokens":1},"usage":{"prompt_tokens":9,"completion_tokens":2},"x":[` +
			strings.TrimSuffix(strings.Repeat(`{"a":1,"a":2,"b":3},`, n), ",") + `]}`)
		root := gjson.ParseBytes(body)
		dst := make([]byte, 0, 2*len(body))
		return testing.AllocsPerRun(5, func() { dedupeKeys(dst[:0], root, true) })
	}
	small, large := allocs(2000), allocs(20000)
	if large > small+100 {
		t.Errorf("%v allocations for 20,000 objects, %v for 2,000: the rewrite allocates per object", large, small)
	}
}

// dupKeyUsage holds about one body's length beside the answer (read in
// place, both rewrites in one buffer), where it copied the body and wrote
// each rewrite anew (about 3×); and an answer past maxDupUsageBytes is not
// rewritten at all (it keeps its reservation).
func TestDupKeyUsageMemory(t *testing.T) {
	filler := strings.Repeat(`{"a":"`+strings.Repeat("x", 200)+`"},`, 10_000) // ~2 MiB
	body := []byte(`{"usage":{"prompt_tokens":9,"completion_tokens":1},"usage":{"prompt_tokens":9,"completion_tokens":2},"x":[` +
		strings.TrimSuffix(filler, ",") + `]}`)
	dupKeyUsage(KindChat, body, 0) // warm
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	u, ok := dupKeyUsage(KindChat, body, 0)
	runtime.ReadMemStats(&after)
	if !ok || u.OutputTokens != 2 {
		t.Fatalf("usage %+v, %v: want the dearer reading, 2 output tokens", u, ok)
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(len(body))*5/4+256<<10; got > bound {
		t.Errorf("allocated %d bytes for a %d-byte answer, over %d", got, len(body), bound)
	}
	big := append(body[:len(body)-2:len(body)-2], []byte(`,{"a":"`+strings.Repeat("y", maxDupUsageBytes)+`"}]}`)...)
	if _, ok := dupKeyUsage(KindChat, big, 0); ok {
		t.Errorf("a %d-byte answer was rewritten, over maxDupUsageBytes", len(big))
	}
}
