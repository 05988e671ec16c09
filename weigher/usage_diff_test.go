package weigher

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/spec"
)

// upstreamDoc is how the answer readers began before upstreamMembers: the
// check, then the answer as a string for gjson's Get. The reference the
// differential tests hold upstreamMembers to.
func upstreamDoc(body []byte, maxDepth int) (string, bool) {
	if jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth, DuplicateKeys: true}) != nil {
		return "", false
	}
	return bodyString(body), true
}

// sameMembers reports, for one answer, whether upstreamMembers gives what
// the check and gjson's Get give: the same verdict and, for "usage" and
// "output", the same value (type and text).
func sameMembers(t *testing.T, body []byte) {
	t.Helper()
	u, o, ok := upstreamMembers(body, 0, "usage", "output")
	s, okRef := upstreamDoc(body, 0)
	if ok != okRef {
		t.Fatalf("%q: readable %v, reference %v", body, ok, okRef)
	}
	if !ok {
		return
	}
	for _, c := range []struct {
		name string
		got  gjson.Result
	}{{"usage", u}, {"output", o}} {
		want := gjson.Get(s, c.name)
		if c.got.Type != want.Type || c.got.Raw != want.Raw {
			t.Fatalf("%q: %s is %v %q, gjson.Get gives %v %q", body, c.name, c.got.Type, c.got.Raw, want.Type, want.Raw)
		}
	}
}

// TestUpstreamMembersSameAsGJSON: the members an answer reader takes from
// the check's layout are those gjson's Get finds after the check, over the
// usage seeds and answers with an output array, a usage first or last,
// escaped keys and non-object roots.
func TestUpstreamMembersSameAsGJSON(t *testing.T) {
	bodies := append([]string{
		`{"output":[{"type":"web_search_call"},{"type":"message"}],"usage":{"input_tokens":3,"output_tokens":4}}`,
		`{"usage":{"input_tokens":3},"output":[]}`, `{"\u006fut\u0070ut":[1],"us\u0061ge":{"a":1}}`,
		`[{"usage":{}}]`, `"usage"`, `12`, `{}`, `{"output":null}`,
	}, usageSeeds...)
	// A layout cut short (more elements than a body's length allows it:
	// Layout.Dropped), where upstreamMembers falls back to gjson.Get.
	bodies = append(bodies, `{"usage":{"input_tokens":1},"output":[`+strings.Repeat("1,", 200)+`1]}`)
	for _, b := range bodies {
		sameMembers(t, []byte(b))
	}
}

// FuzzUpstreamMembers holds upstreamMembers to the check and gjson's Get
// on any bytes.
func FuzzUpstreamMembers(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"output":[{"type":"web_search_call"}],"usage":{"input_tokens":1,"output_tokens":2}}`))
	f.Fuzz(func(t *testing.T, body []byte) { sameMembers(t, body) })
}

// parseChatUsageGJSON is parseChatUsage as it was before it read the usage
// from the check's layout: the check (upstreamDoc), then gjson's Get of
// "usage" and usageOfGJSON. The reference the differential tests hold the
// one-pass reader to.
func parseChatUsageGJSON(body []byte, maxDepth int) (Usage, bool) {
	s, ok := upstreamDoc(body, maxDepth)
	if !ok {
		return Usage{}, false
	}
	return usageOfGJSON(gjson.Get(s, "usage"))
}

// usageOfGJSON is usageOf as it was: gjson's ForEach over the usage
// object and Get in its details.
func usageOfGJSON(v gjson.Result) (u Usage, ok bool) {
	if !v.IsObject() {
		return Usage{}, false
	}
	var prompt, completion, total, citations, reasoning, searches, write, size gjson.Result
	var pd promptDetails
	var cost, byok, upstream gjson.Result
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "cost":
			cost = f
		case "is_byok":
			byok = f
		case "cost_details":
			upstream = gjson.Result{}
			if f.IsObject() {
				upstream = f.Get("upstream_inference_cost")
			}
		case "prompt_tokens":
			prompt = f
		case "completion_tokens":
			completion = f
		case "total_tokens":
			total = f
		case "citation_tokens":
			citations = f
		case "reasoning_tokens":
			reasoning = f
		case "num_search_queries":
			searches = f
		case "cache_creation_input_tokens":
			write = f
		case "search_context_size":
			size = f
		case "prompt_tokens_details":
			u.CachedInputTokens = usageCount(f.Get("cached_tokens"))
			u.AudioInputTokens = usageCount(f.Get("audio_tokens"))
			pd = promptDetails{creation: usageCount(f.Get("cache_creation_tokens")), write: usageCount(f.Get("cache_write_tokens"))}
			if b := f.Get("cache_creation_token_details"); b.IsObject() {
				pd.creation5m = usageCount(b.Get("ephemeral_5m_input_tokens"))
				pd.creation1h = usageCount(b.Get("ephemeral_1h_input_tokens"))
			}
		case "completion_tokens_details":
			u.ReasoningTokens = usageCount(f.Get("reasoning_tokens"))
			u.AudioOutputTokens = usageCount(f.Get("audio_tokens"))
		}
		return true
	})
	u.InputTokens, u.OutputTokens, ok = reportedPair(prompt, completion)
	if !ok {
		return Usage{}, false
	}
	a := apart{total: usageCount(total), citations: usageCount(citations),
		reasoning: usageCount(reasoning), searches: usageCount(searches), cacheWrite: usageCount(write)}
	a.detailWrites(pd)
	if size.Type == gjson.String {
		a.searchContext = spec.ParseSearchContextSize(size.Str)
	}
	u = withLeftOut(u, a)
	u.BilledMicroUSD = billedMicroUSD(cost, upstream, byok)
	return u, true
}

// usageSeeds are chat answers whose usage is ordinary, odd or unreadable:
// numeric strings, floats, zero and negative figures, escaped keys, details
// that are not objects, usage in the wrong place, keys named twice, bad
// JSON, deep nesting.
var usageSeeds = []string{
	`{"usage":{"prompt_tokens":194,"completion_tokens":2,"cost":0.000123,"cost_details":{"upstream_inference_cost":null},"is_byok":false}}`,
	`{"usage":{"prompt_tokens":194,"completion_tokens":2,"cost":"0.5","cost_details":{"upstream_inference_cost":19},"is_byok":true}}`,
	`{"usage":{"prompt_tokens":194,"completion_tokens":2,"cost":-3,"cost_details":[1],"is_byok":"true"}}`,
	`{"id":"c","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`,
	`{"usage":{"prompt_tokens":2006,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":3},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":7}}}`,
	`{"usage":{"prompt_tokens":20004,"completion_tokens":40,"search_context_size":"high","prompt_tokens_details":{"cache_creation_tokens":20000,"cache_write_tokens":9,"cache_creation_token_details":{"ephemeral_5m_input_tokens":5000,"ephemeral_1h_input_tokens":15000}}}}`,
	`{"usage":{"prompt_tokens":4,"completion_tokens":40,"search_context_size":"medi\u0075m","prompt_tokens_details":{"cache_creation_token_details":{"ephemeral_1h_input_tokens":"15000"}}}}`,
	`{"usage":{"prompt_tokens":"12","completion_tokens":" 5 "}}`, `{"usage":{"prompt_tokens":1.5,"completion_tokens":2e3}}`,
	`{"usage":{"prompt_tokens":0,"completion_tokens":5}}`, `{"usage":{"prompt_tokens":-1,"completion_tokens":5}}`,
	`{"usage":{"prompt_tokens":1e300,"completion_tokens":5}}`, `{"usage":{"prompt_tokens":null,"completion_tokens":5}}`,
	`{"us\u0061ge":{"prompt\u005ftokens":7,"completion_tokens":5}}`, `{"usage":{"prompt_tokens":7,"completion_tokens":5,"prompt_tokens_details":{"cached\u005ftokens":3}}}`,
	`{"usage":{"prompt_tokens":7,"completion_tokens":5,"prompt_tokens_details":[{"cached_tokens":3}]}}`,
	`{"usage":{"prompt_tokens":7,"completion_tokens":5,"completion_tokens_details":"reasoning_tokens"}}`,
	`{"usage":{"prompt_tokens":7,"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":"9"}}}`,
	`{"usage":[{"prompt_tokens":7,"completion_tokens":5}]}`, `[{"usage":{"prompt_tokens":7,"completion_tokens":5}}]`,
	`{"choices":[{"usage":{"prompt_tokens":7,"completion_tokens":5}}]}`, `{"usage":{"prompt_tokens":1,"completion_tokens":1},"usage":{"prompt_tokens":9000,"completion_tokens":9000}}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":1,"completion_tokens":900}}`, `{"usage":{"prompt_tokens":1,"completion_tokens":2}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":2}} x`, ` {"usage" : { "prompt_tokens" : 4 , "completion_tokens" : 2 } } `,
	`{"usage":"{\"prompt_tokens\":1,\"completion_tokens\":1}"}`, `{"x":{"usage":{"prompt_tokens":7,"completion_tokens":5}},"usage":null}`,
	`{"usage":{"prompt_tokens":7,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":-4}}}`,
	`{"a":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `,"usage":{"prompt_tokens":7,"completion_tokens":5}}`,
	"{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5},\"t\":\"\xff\"}",
	// Figures of 15 to 17 digits, around rawCount's limit and maxTokens.
	`{"usage":{"prompt_tokens":999999999999999,"completion_tokens":99999999999999999,"prompt_tokens_details":{"cached_tokens":9999999999999999}}}`,
	`{"usage":{"prompt_tokens":000,"completion_tokens":1000000000000001,"completion_tokens_details":{"reasoning_tokens":0012}}}`,
}

// sameUsage fails t unless parseChatUsage reads body as the gjson
// reference does, under the default and a small nesting limit.
func sameUsage(t *testing.T, body []byte) {
	t.Helper()
	for _, depth := range []int{0, 3} {
		got, gok := parseChatUsage(body, depth)
		want, wok := parseChatUsageGJSON(body, depth)
		if got != want || gok != wok {
			t.Fatalf("%q (depth %d): %+v %v, gjson reference %+v %v", body, depth, got, gok, want, wok)
		}
	}
}

// TestChatUsageSameAsGJSON: the usage read from the check's layout is the
// gjson reference's on every seed, each cut short at every byte; and the
// seeds are not all alike (most are readable, some not).
func TestChatUsageSameAsGJSON(t *testing.T) {
	readable := 0
	for _, s := range usageSeeds {
		for n := range len(s) + 1 {
			sameUsage(t, []byte(s[:n]))
		}
		if _, ok := ParseChatUsage([]byte(s)); ok {
			readable++
		}
	}
	if readable < 8 || readable > len(usageSeeds)-8 {
		t.Fatalf("%d of %d seeds readable", readable, len(usageSeeds))
	}
}

// FuzzChatUsageSameAsGJSON is TestChatUsageSameAsGJSON on any input.
func FuzzChatUsageSameAsGJSON(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameUsage(t, body) })
}
