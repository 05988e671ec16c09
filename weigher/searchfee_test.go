package weigher

import (
	"encoding/json"
	"testing"

	"github.com/llmguard/llmguard/spec"
	"github.com/tidwall/gjson"
)

// A chat request's search billed per request is in its estimate: the size
// web_search_options asks (the upstream's default when none, the dearest
// when unreadable) for a model that bills a fee per request or any model
// sent web_search_options, and OpenRouter's web plugin's results (Exa) or
// the provider's fee (native).
func TestChatSearchFeesEstimated(t *testing.T) {
	w := testWeigher(t)
	const msgs = `"messages":[{"role":"user","content":"news?"}]`
	low, med, high, none := spec.SearchContextLow, spec.SearchContextMedium, spec.SearchContextHigh, spec.SearchContextNone
	for _, tc := range []struct {
		name    string
		body    string
		size    spec.SearchContextSize
		results int64
	}{
		{"plain model", `{"model":"gpt-4o",` + msgs + `}`, none, 0},
		{"null options", `{"model":"gpt-4o","web_search_options":null,` + msgs + `}`, none, 0},
		{"sonar, no options: Perplexity's default", `{"model":"sonar",` + msgs + `}`, low, 0},
		{"sonar-pro high", `{"model":"sonar-pro","web_search_options":{"search_context_size":"high"},` + msgs + `}`, high, 0},
		{"sonar, options without a size", `{"model":"sonar","web_search_options":{"user_location":{}},` + msgs + `}`, low, 0},
		{"perplexity/sonar-reasoning medium", `{"model":"perplexity/sonar-reasoning","web_search_options":{"search_context_size":"Medium"},` + msgs + `}`, med, 0},
		{"deep research: billed per query instead", `{"model":"sonar-deep-research",` + msgs + `}`, none, 0},
		{"openai search model: OpenAI's default", `{"model":"gpt-4o-search-preview",` + msgs + `}`, med, 0},
		{"openai mini search low", `{"model":"gpt-4o-mini-search-preview-2025-03-11","web_search_options":{"search_context_size":"low"},` + msgs + `}`, low, 0},
		{"gpt-5-search-api", `{"model":"openai/gpt-5-search-api",` + msgs + `}`, med, 0},
		{"any model sent options", `{"model":"my-gateway-model","web_search_options":{},` + msgs + `}`, med, 0},
		{"unreadable size: the dearest", `{"model":"sonar","web_search_options":{"search_context_size":7},` + msgs + `}`, high, 0},
		{"unknown size name: the dearest", `{"model":"sonar","web_search_options":{"search_context_size":"huge"},` + msgs + `}`, high, 0},
		{"empty size: the dearest", `{"model":"sonar","web_search_options":{"search_context_size":""},` + msgs + `}`, high, 0},
		{"options not an object: the dearest", `{"model":"gpt-4o-search-preview","web_search_options":"high",` + msgs + `}`, high, 0},
		{"online model (Exa): 5 results", `{"model":"meta-llama/llama-3.3-70b-instruct:online",` + msgs + `}`, none, 5},
		{"web plugin max_results", `{"model":"mistralai/mistral-large","plugins":[{"id":"web","max_results":3}],` + msgs + `}`, none, 3},
		{"web plugin default results", `{"model":"mistralai/mistral-large","plugins":[{"id":"file-parser"},{"id":"web"}],` + msgs + `}`, none, 5},
		{"web plugin string count", `{"model":"x","plugins":[{"id":"web","max_results":"8"}],` + msgs + `}`, none, 8},
		{"web plugin native by provider", `{"model":"openai/gpt-4o","plugins":[{"id":"web"}],` + msgs + `}`, med, 0},
		{"online native by provider, size asked", `{"model":"anthropic/claude-sonnet-4:online","web_search_options":{"search_context_size":"low"},` + msgs + `}`, low, 0},
		{"web plugin engine native", `{"model":"x","plugins":[{"id":"web","engine":"native"}],` + msgs + `}`, med, 0},
		{"web plugin engine exa on an openai model", `{"model":"openai/gpt-4o","plugins":[{"id":"web","engine":"exa","max_results":2}],` + msgs + `}`, none, 2},
		{"unknown engine: both", `{"model":"x","plugins":[{"id":"web","engine":"firecrawl"}],` + msgs + `}`, med, 5},
		{"engine not a string: both", `{"model":"x","plugins":[{"id":"web","engine":1}],` + msgs + `}`, med, 5},
		{"other plugins only", `{"model":"x","plugins":[{"id":"file-parser"}],` + msgs + `}`, none, 0},
		{"plugin id not a string", `{"model":"x","plugins":[{"id":["web"]}],` + msgs + `}`, none, 0},
		{"sonar through the web plugin: the dearer of the two", `{"model":"perplexity/sonar","plugins":[{"id":"web"}],` + msgs + `}`, med, 0},
	} {
		e := w.Chat([]byte(tc.body))
		if !e.Parsed {
			t.Fatalf("%s: not parsed: %v %s", tc.name, e.Fault, e.FaultDetail)
		}
		if e.SearchContext != tc.size || e.SearchResults != tc.results {
			t.Errorf("%s: search %v, %d results; want %v, %d", tc.name, e.SearchContext, e.SearchResults, tc.size, tc.results)
		}
		sameAsPlain(t, KindChat, []byte(tc.body))
	}
}

// FuzzSearchFees reads any web_search_options and plugins: never a
// panic, never a negative or unbounded count, a size whenever options
// are sent, and the chat estimate carries what fees reads.
func FuzzSearchFees(f *testing.F) {
	for _, s := range [][2]string{
		{`{"search_context_size":"high"}`, `[{"id":"web","max_results":3}]`},
		{`{"search_context_size":null}`, `[{"id":"web","engine":"native"},{"id":"web","engine":"exa"}]`},
		{`"low"`, `{"id":"web"}`},
		{`{"search_context_size":1e999}`, `[{"id":"WEB","max_results":1e999}]`},
		{`null`, `[{"id":"web","max_results":-1,"engine":null}]`},
	} {
		f.Add("sonar", s[0], s[1])
		f.Add("openai/gpt-4o:online", s[0], s[1])
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, model, options, plugins string) {
		if !gjson.Valid(options) || !gjson.Valid(plugins) {
			return
		}
		s := searchAsk{options: gjson.Parse(options), plugins: gjson.Parse(plugins)}
		size, n := s.fees(model)
		if n < 0 || n > 2*maxWebSearchUses {
			t.Errorf("results %d", n)
		}
		if size > spec.SearchContextHigh {
			t.Errorf("size %d", size)
		}
		if s.options.Type != gjson.Null && size == spec.SearchContextNone {
			t.Errorf("options %s sent, no fee", options)
		}
		m, err := json.Marshal(model)
		if err != nil {
			return
		}
		body := `{"model":` + string(m) + `,"web_search_options":` + options + `,"plugins":` + plugins + `,"messages":[]}`
		if e := w.Chat([]byte(body)); e.Parsed {
			if want, wantN := (searchAsk{options: gjson.Parse(options), plugins: gjson.Parse(plugins)}).fees(e.Model); e.SearchContext != want || e.SearchResults != wantN {
				t.Errorf("%s: estimate %v, %d; fees %v, %d", body, e.SearchContext, e.SearchResults, want, wantN)
			}
		}
	})
}

// OpenRouter's web plugin is billed on its completions, Responses and
// Messages endpoints as on chat: the results with Exa, the provider's fee
// with native search; a model name alone (sonar) reserves no fee there.
func TestPluginSearchFeesOnEveryKind(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name    string
		weigh   func([]byte) Estimate
		body    string
		size    spec.SearchContextSize
		results int64
	}{
		{"completions plugin", w.Completions, `{"model":"mistralai/mistral-7b","prompt":"hi","plugins":[{"id":"web","max_results":4}]}`, spec.SearchContextNone, 4},
		{"completions online", w.Completions, `{"model":"mistralai/mistral-7b:online","prompt":"hi"}`, spec.SearchContextNone, 5},
		{"responses native", w.Responses, `{"model":"openai/gpt-4o","input":"hi","plugins":[{"id":"web"}]}`, spec.SearchContextMedium, 0},
		{"messages exa", w.Messages, `{"model":"anthropic/claude-sonnet-4","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"plugins":[{"id":"web","engine":"exa","max_results":2}]}`, spec.SearchContextNone, 2},
		{"messages, no plugin", w.Messages, `{"model":"sonar","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, spec.SearchContextNone, 0},
	} {
		e := tc.weigh([]byte(tc.body))
		if !e.Parsed {
			t.Fatalf("%s: not parsed: %v %s", tc.name, e.Fault, e.FaultDetail)
		}
		if e.SearchContext != tc.size || e.SearchResults != tc.results {
			t.Errorf("%s: search %v, %d results; want %v, %d", tc.name, e.SearchContext, e.SearchResults, tc.size, tc.results)
		}
	}
}
