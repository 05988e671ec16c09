package proxy

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// TestDuplicateUsageSettlesAtTheDearerReading: through real sockets, a JSON
// answer that names a usage object or a figure twice — which a parser may
// read first-wins (gjson) or last-wins (Python's json, encoding/json, most
// gateways), so the upstream may have billed either — settles at the
// dearer reading, never at the reservation alone when a reading reports
// more (here a prompt of 3000 tokens against an estimate of 9).
func TestDuplicateUsageSettlesAtTheDearerReading(t *testing.T) {
	w := testWeigher(t)
	msg := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`
	for _, tc := range []struct {
		name, usage string
		want        int64
	}{
		{"dearer usage object last", `"usage":{"prompt_tokens":9,"completion_tokens":1},"usage":{"prompt_tokens":3000,"completion_tokens":45}`, 3045},
		{"dearer usage object first", `"usage":{"prompt_tokens":3000,"completion_tokens":45},"usage":{"prompt_tokens":9,"completion_tokens":1}`, 3045},
		{"figure named twice", `"usage":{"prompt_tokens":3000,"completion_tokens":45,"prompt_tokens":9}`, 3045},
		{"figure named twice, escaped", `"usage":{"prompt_tokens":9,"completion_tokens":45,"prompt_tok\u0065ns":3000}`, 3045},
		{"each reading dearer in one figure", `"usage":{"prompt_tokens":3000,"completion_tokens":1},"usage":{"prompt_tokens":9,"completion_tokens":45}`, 3045},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := string(response([]byte(msg + tc.usage + `}`)))
			checkCharged(t, chargedThrough(t, w, answer, spec.FlavorOpenAI, "/v1/chat/completions", panicBody), tc.want, true)
		})
	}
}
