package weigher

import (
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
