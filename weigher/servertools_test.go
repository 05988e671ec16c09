package weigher

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// Any tool whose type is not one the caller's code runs is a server tool:
// the request is partial (ServerContext, the model's largest input
// reserved) and, when the tool searches, its searches are reserved. The
// adversarial tester's shell with container_auto, openrouter:web_search,
// x_search, collections_search, view_x_video and openrouter:shell were
// counted as client tools (no partial flag, no hidden context, no fees).
func TestUnknownToolTypesAreServerRun(t *testing.T) {
	w := testWeigher(t)
	type tc struct {
		tool     string
		server   bool
		searches bool
	}
	responses := []tc{
		{`{"type":"shell","environment":{"type":"container_auto"}}`, true, false},
		{`{"type":"shell"}`, true, false},
		{`{"type":"shell","environment":{"type":"local"}}`, false, false},
		{`{"type":"openrouter:web_search"}`, true, true},
		{`{"type":"openrouter:shell"}`, true, false},
		{`{"type":"x_search"}`, true, true},
		{`{"type":"collections_search","collection_ids":["c"]}`, true, true},
		{`{"type":"view_x_video"}`, true, false},
		{`{"type":"web_search_preview"}`, true, true},
		{`{"type":"file_search","vector_store_ids":["v"]}`, true, false},
		{`{"type":"some_new_hosted_tool"}`, true, false},
		{`{"type":7}`, true, false},
		{`{"type":"function","name":"f","parameters":{"type":"object"}}`, false, false},
		{`{"type":"custom","name":"c"}`, false, false},
		{`{"type":"local_shell"}`, false, false},
		{`{"type":"apply_patch"}`, false, false},
		{`{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"}`, false, false},
	}
	for _, c := range responses {
		body := `{"model":"gpt-4.1","max_output_tokens":10,"input":"hi","tools":[` + c.tool + `]}`
		e := w.Weigh(KindResponses, []byte(body))
		if !e.Parsed || e.ServerContext != c.server || (e.WebSearches > 0) != c.searches {
			t.Errorf("responses %s: parsed %v, server %v, searches %d; want server %v, searches %v", c.tool, e.Parsed, e.ServerContext, e.WebSearches, c.server, c.searches)
		}
		if c.server && e.InputTokens < DefaultMaxInputTokens {
			t.Errorf("responses %s: %d input tokens, want the hidden context (%d)", c.tool, e.InputTokens, DefaultMaxInputTokens)
		}
	}
	messages := []tc{
		{`{"type":"openrouter:web_search"}`, true, true},
		{`{"type":"openrouter:shell"}`, true, false},
		{`{"type":"web_search_20250305","name":"web_search","max_uses":3}`, true, true},
		{`{"type":"web_fetch_20250910","name":"web_fetch"}`, true, false},
		{`{"type":"tool_search_tool_regex_20251119","name":"tool_search"}`, true, false},
		{`{"type":"bash_20250124","name":"bash"}`, false, false},
		{`{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}`, false, false},
		{`{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}`, false, false},
		{`{"type":"memory_20250818","name":"memory"}`, false, false},
		{`{"type":"custom","name":"f","input_schema":{"type":"object"}}`, false, false},
		{`{"name":"f","input_schema":{"type":"object"}}`, false, false},
	}
	for _, c := range messages {
		body := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[` + c.tool + `]}`
		e := w.Weigh(KindMessages, []byte(body))
		if !e.Parsed || e.ServerContext != c.server || (e.WebSearches > 0) != c.searches {
			t.Errorf("messages %s: parsed %v, server %v, searches %d; want server %v, searches %v", c.tool, e.Parsed, e.ServerContext, e.WebSearches, c.server, c.searches)
		}
	}
	chat := []tc{
		{`{"type":"openrouter:web_search"}`, true, false},
		{`{"type":"browser_search"}`, true, false},
		{`{"type":"function","function":{"name":"f"}}`, false, false},
		{`{"type":"custom","custom":{"name":"c"}}`, false, false},
	}
	for _, c := range chat {
		body := `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[` + c.tool + `]}`
		e := w.Weigh(KindChat, []byte(body))
		if !e.Parsed || e.ServerContext != c.server {
			t.Errorf("chat %s: parsed %v, server %v; want %v", c.tool, e.Parsed, e.ServerContext, c.server)
		}
	}
	// max_uses of the search tools add up, as for Anthropic's web search.
	e := w.Weigh(KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],`+
		`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3},{"type":"x_search","max_uses":4},{"type":"bash_20250124","name":"bash"}]}`))
	if e.WebSearches != 7 {
		t.Errorf("messages with two search tools: %d searches, want 7", e.WebSearches)
	}
}

// FuzzEachToolSameAsGJSON checks eachTool's one-pass reading of a tool
// list against gjson's: for every object of the list, the same type (a
// string's text; "" when absent or null), environment type and max_uses.
func FuzzEachToolSameAsGJSON(f *testing.F) {
	f.Add(`[{"type":"web_search_20250305","max_uses":3},{"type":"shell","environment":{"type":"local"}},{"name":"f"}]`)
	f.Add(`[{"type":"x\u005fsearch","max_uses":1e2},1,"s",{"type":null},{"type":7,"environment":{"type":"container_auto"}}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) || DuplicateKeys([]byte(raw)) {
			return
		}
		list := gjson.Parse(raw)
		if !list.IsArray() {
			return
		}
		type tool struct{ typ, env, maxUses string }
		var want []tool
		list.ForEach(func(_, t gjson.Result) bool {
			if t.IsObject() {
				typ := t.Get("type")
				s := typ.String()
				if typ.Type != gjson.String && typ.Type != gjson.Null && typ.Exists() {
					s = typ.Raw
				}
				env := ""
				if e := t.Get("environment"); e.IsObject() {
					env = e.Get("type").String()
				}
				want = append(want, tool{s, env, t.Get("max_uses").Raw})
			}
			return true
		})
		var got []tool
		eachTool(list, func(typ, env string, maxUses gjson.Result) { got = append(got, tool{typ, env, maxUses.Raw}) })
		if !mayName(raw, "type") { // no tool has a type: none is walked
			want = nil
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d tools, gjson %d", raw, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: tool %d %+v, gjson %+v", raw, i, got[i], want[i])
			}
		}
	})
}
