package weigher

import (
	"strings"
	"testing"
)

// A request whose input the body does not hold reserves the model's largest
// input through Weigh (ServerContext set); the same stored file is treated
// alike by chat and Responses; a file sent inline is counted, not hidden.
func TestHiddenContextReservesTheModelsMaxInput(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{"gpt-4o": {MaxInputTokens: 128_000}}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind Kind
		body string
		want int64 // InputTokens through Weigh; 0: not hidden
	}{
		{"responses previous_response_id", KindResponses, `{"model":"gpt-4o","previous_response_id":"resp_1","input":"go on"}`, 128_000},
		{"responses conversation", KindResponses, `{"model":"gpt-4o","conversation":"conv_1","input":"go on"}`, 128_000},
		{"responses input_file by id", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, 128_000},
		{"responses input_file by url", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}`, 128_000},
		{"chat file by id", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, 128_000},
		{"chat Azure data_sources", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"q"}],"data_sources":[{"type":"azure_search"}]}`, 128_000},
		{"messages document by file id", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"f"}}]}]}`, DefaultMaxInputTokens},
		{"messages document by url", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, DefaultMaxInputTokens},
		{"chat file inline", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+PiBlbmRvYmoK"}}]}]}`, 0},
		// A PDF showing no page object may hide its pages (object streams).
		{"chat file inline, no page found", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQK"}}]}]}`, 128_000},
		{"plain chat", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 0},
	} {
		e := w.Weigh(tc.kind, []byte(tc.body))
		if tc.want == 0 {
			if e.ServerContext || e.InputTokens >= 100_000 {
				t.Errorf("%s: %+v, want the body's own estimate", tc.name, e)
			}
			continue
		}
		if !e.ServerContext || e.InputTokens != tc.want {
			t.Errorf("%s: ServerContext %v, input %d; want true, %d", tc.name, e.ServerContext, e.InputTokens, tc.want)
		}
	}
}

// Tools the upstream runs itself (search, fetch, file search, MCP, code)
// add their results to the context it bills: reserved as hidden context.
func TestServerToolsAreHiddenContext(t *testing.T) {
	w, err := New(Options{DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind Kind
		body string
	}{
		{KindResponses, `{"model":"gpt-4o","input":"news?","tools":[{"type":"web_search"}]}`},
		{KindResponses, `{"model":"gpt-4o","input":"q","tools":[{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":["vs"]}]}`},
		{KindResponses, `{"model":"gpt-4o","input":"q","tools":[{"type":"mcp","server_label":"x","server_url":"https://x"}]}`},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"news?"}],"web_search_options":{}}`},
		{KindResponses, `{"model":"gpt-4o","input":"news?","tools":[{"type":"web_search_preview_2025_03_11"}]}`},
		// OpenAI-compatible chat upstreams that run tools themselves:
		// Groq's browser_search and code_interpreter (gpt-oss,
		// https://console.groq.com/docs/browser-search).
		{KindChat, `{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"news?"}],"tools":[{"type":"browser_search"}]}`},
		{KindChat, `{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"2+2?"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"code_interpreter"}]}`},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"news?"}],"tools":[{"type":"web_search"}]}`},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"news?"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"q"}],"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]}`},
		// Agent Skills load their instructions into the context, with or
		// without the code execution tool the API asks for beside them.
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"deck?"}],"container":{"skills":[{"type":"anthropic","skill_id":"pptx","version":"latest"}]}}`},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"deck?"}],"container":{"skills":{"type":"anthropic","skill_id":"pptx"}}}`},
	} {
		if e := w.Weigh(tc.kind, []byte(tc.body)); !e.ServerContext || e.InputTokens != DefaultMaxInputTokens {
			t.Errorf("%s: ServerContext %v, input %d; want hidden context reserved", tc.body, e.ServerContext, e.InputTokens)
		}
	}
	for _, c := range []string{`"cntr_1"`, `{"id":"cntr_1"}`, `{"skills":[]}`, `{"skills":null}`} {
		body := `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"q"}],"container":` + c + `}`
		if e := w.Weigh(KindMessages, []byte(body)); e.ServerContext {
			t.Errorf("container %s (no skills) was taken for hidden context", c)
		}
	}
	if e := w.Weigh(KindResponses, []byte(`{"model":"gpt-4o","input":"q","tools":[{"type":"function","name":"f"}]}`)); e.ServerContext {
		t.Error("a function tool (run by the caller) was taken for a server tool")
	}
	if e := w.Weigh(KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"web_search"}}]}`)); e.ServerContext {
		t.Error("a chat function tool named web_search (run by the caller) was taken for a server tool")
	}
}

// TestChatServerToolsRemembered: a chat tools list the count cache holds
// (serverTools kept with its count, as hidden) still marks its request as
// pulling hidden context when the list is read from the cache, and a
// "functions" list of the same bytes counted first does not make a tools
// list's server tool unseen (nor does a server tool among functions count).
func TestChatServerToolsRemembered(t *testing.T) {
	const list = `[{"type":"browser_search"},{"type":"function","function":{"name":"lookup","description":"Look a word up in the dictionary"}}]`
	tools := []byte(`{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"news?"}],"tools":` + list + `}`)
	functions := []byte(`{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"news?"}],"functions":` + list + `}`)
	plain := []byte(`{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"news?"}],"tools":[{"type":"function","function":{"name":"lookup","description":"Look a word up in the dictionary, again"}}]}`)
	w := cachedWeigher(t, DefaultCacheBytes)
	for i := range 3 {
		if e := w.Chat(functions); !e.Parsed || e.ServerContext {
			t.Fatalf("functions, body %d: %+v, want parsed, no server context", i, e)
		}
		if e := w.Chat(tools); !e.Parsed || !e.ServerContext {
			t.Fatalf("tools, body %d: %+v, want server context", i, e)
		}
		if e := w.Chat(plain); !e.Parsed || e.ServerContext {
			t.Fatalf("plain tools, body %d: %+v, want no server context", i, e)
		}
	}
	if s := w.CacheStats(); s.Hits == 0 {
		t.Fatalf("no cache hits (%+v): the lists were not read from the cache", s)
	}
}

// TestServerToolsEscaped: a server tool's type spelled with \u escapes,
// and nowhere else in the list's bytes, is still found by every kind (the
// byte pre-check of mayName lets no such list through unwalked), and a
// list that names no server tool is not taken for one.
func TestServerToolsEscaped(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		kind   Kind
		body   string
		server bool
	}{
		{KindChat, `{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"browser\u005fsearch"}]}`, true},
		{KindChat, `{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"\u0062rowser_search"}]}`, true},
		{KindChat, `{"model":"openai/gpt-oss-20b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"browser"}}]}`, false},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"co\u0064e_execution_20250825","name":"x"}]}`, true},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"code","input_schema":{"type":"object"}}]}`, false},
		{KindResponses, `{"model":"gpt-4.1","input":"hi","tools":[{"type":"file\u005fsearch","vector_store_ids":["vs_1"]}]}`, true},
	} {
		if e := w.Weigh(c.kind, []byte(c.body)); !e.Parsed || e.ServerContext != c.server {
			t.Errorf("%s: server context %v (parsed %v), want %v", c.body, e.ServerContext, e.Parsed, c.server)
		}
	}
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{`[{"type":"function"}]`, false},
		{`[{"type":"web_search"}]`, true},
		{`[{"description":"mcp"}]`, true},
		{`[{"type":"w\u0065b"}]`, true},
		{``, false},
	} {
		if got := mayName(c.raw, "web_search", "mcp"); got != c.want {
			t.Errorf("mayName(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
}

// A request with hidden context reserves the model's window, not the
// window plus a guess for what it names: gpt-4o-mini's page image is some
// 51k tokens, so a ten-page guess for a stored file came to 511,750 tokens,
// four times the 128K it can take, and lowering max_input_tokens changed
// nothing. The body's own text still counts in full when it is larger: a
// model that takes a shorter name's window by prefix (gpt-4.5-preview
// under gpt-4's 8,192) is not reserved below what its body holds.
func TestHiddenContextReservesTheWindowNotGuesses(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"gpt-4o-mini": {MaxInputTokens: 128_000},
		"small-mini":  {MaxInputTokens: 50_000},
		"gpt-4":       {MaxInputTokens: 8_192},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	file := func(model, text string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"` + text + `"},{"type":"file","file":{"file_id":"file-1"}},{"type":"file","file":{"file_id":"file-2"}}]}]}`
	}
	for _, c := range []struct {
		model string
		want  int64
	}{{"gpt-4o-mini", 128_000}, {"small-mini", 50_000}, {"unlisted-mini", DefaultMaxInputTokens}} {
		if e := w.Weigh(KindChat, []byte(file(c.model, "read these"))); !e.ServerContext || e.InputTokens != c.want {
			t.Errorf("%s: ServerContext %v, input %d; want the window %d", c.model, e.ServerContext, e.InputTokens, c.want)
		}
	}
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 6000) // some 54k tokens
	body := file("gpt-4.5-preview", long)
	counted := w.Chat([]byte(body)).InputTokens
	if counted < 50_000 {
		t.Fatalf("the long body counts %d tokens, want over 50,000 for the check below", counted)
	}
	if e := w.Weigh(KindChat, []byte(body)); e.InputTokens != counted {
		t.Errorf("gpt-4.5-preview (gpt-4's 8,192 by prefix) with %d tokens of text and stored files: reserved %d, want the text's %d", counted, e.InputTokens, counted)
	}
}

// vLLM's chat template writes "documents" and "chat_template_kwargs" into
// the prompt it bills: each is counted as the text of its JSON, on chat
// and on vLLM's chat-style embeddings; a "chat_template" of the request's
// own can write any amount and is hidden context. Null members add
// nothing. Cold, warm and plain weighing agree (sameAsPlain).
func TestVLLMTemplateFieldsAreWeighed(t *testing.T) {
	w := testWeigher(t)
	words := strings.Repeat("word ", 1000)
	wordsJSON := `"` + words + `"`
	base := w.Weigh(KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)).InputTokens
	embBase := w.Weigh(KindEmbeddings, []byte(`{"model":"text-embedding-3-small","messages":[{"role":"user","content":"hi"}]}`)).InputTokens
	for _, tc := range []struct {
		kind   Kind
		body   string
		base   int64
		texts  []string // the members counted as text
		hidden bool
	}{
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"documents":[{"title":"t","text":` + wordsJSON + `}]}`, base, []string{`[{"title":"t","text":` + wordsJSON + `}]`}, false},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false,"system":` + wordsJSON + `}}`, base, []string{`{"enable_thinking":false,"system":` + wordsJSON + `}`}, false},
		{KindChat, `{"model":"gpt-4o","documents":[` + wordsJSON + `],"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":[` + wordsJSON + `]}`, base, []string{`[` + wordsJSON + `]`, `[` + wordsJSON + `]`}, false},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"chat_template":"{% for i in range(9) %}{{ messages }}{% endfor %}"}`, base, nil, true},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"documents":null,"chat_template_kwargs":null,"chat_template":null}`, base, nil, false},
		{KindEmbeddings, `{"model":"text-embedding-3-small","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"a":` + wordsJSON + `}}`, embBase, []string{`{"a":` + wordsJSON + `}`}, false},
		{KindEmbeddings, `{"model":"text-embedding-3-small","messages":[{"role":"user","content":"hi"}],"chat_template":"{{ messages }}"}`, embBase, nil, true},
	} {
		e := w.Weigh(tc.kind, []byte(tc.body))
		if e.ServerContext != tc.hidden {
			t.Errorf("%.120s: ServerContext %v, want %v", tc.body, e.ServerContext, tc.hidden)
		}
		if !tc.hidden {
			want := tc.base
			for _, text := range tc.texts {
				want += w.CountText(e.Model, text)
			}
			if e.InputTokens != want {
				t.Errorf("%.120s: input %d, want %d (the body's own %d and the members' text)", tc.body, e.InputTokens, want, tc.base)
			}
		}
		sameAsPlain(t, tc.kind, []byte(tc.body))
	}
}

// An Anthropic tool's input_examples are written into the system prompt
// the Messages API builds: counted as the text of their JSON.
func TestClaudeToolInputExamplesCounted(t *testing.T) {
	w := testWeigher(t)
	words := strings.Repeat("word ", 1000)
	base := w.Weigh(KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`)).InputTokens
	e := w.Weigh(KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"},"input_examples":[{"q":"`+words+`"}]}]}`))
	if e.InputTokens < base+w.CountText("gpt-4o", words) {
		t.Errorf("input %d, want at least %d + the examples' %d words", e.InputTokens, base, 1000)
	}
}
