package weigher

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// serverToolsLaidCases are tool lists whose verdict turns on each rule of
// eachTool and clientTool: the type before or after the function, a shell
// with and without its environment (before and after its type), types that
// are not strings, untyped tools shaped as a client's or named as a
// gateway's server tool, escaped keys, and a server tool after client ones.
var serverToolsLaidCases = []string{
	`[]`, `[1,"a",null]`,
	`[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]`,
	`[{"function":{"name":"f","parameters":{"type":"object"}},"type":"function"}]`,
	`[{"type":"function","function":{"name":"f"}},{"type":"browser_search"}]`,
	`[{"type":"function","function":{"name":"f"}},{"function":{"type":"x"},"type":"code_interpreter"}]`,
	`[{"type":"shell"}]`,
	`[{"type":"shell","environment":{"type":"local"}}]`,
	`[{"environment":{"type":"local"},"type":"shell"}]`,
	`[{"environment":{"kind":"x","type":"container_auto"},"type":"shell"}]`,
	`[{"type":"shell","environment":"local"}]`,
	`[{"type":null}]`, `[{"type":""}]`, `[{"type":7}]`, `[{"type":{"a":1}}]`,
	`[{"googleSearch":{}}]`, `[{"google_search":{},"name":"x"}]`, `[{"urlContext":{}}]`, `[{"":1,"codeExecution":{}}]`,
	`[{"name":"f","input_schema":{"type":"object"}}]`,
	`[{"ty\u0070e":"x_search"}]`, `[{"type":"web\u005fsearch_preview"}]`,
	`[{"type":"custom","custom":{"name":"c"}},{"type":"openrouter:web_search"}]`,
	`[{"type":"mcp","server_url":"https://example.com"}]`,
	`[{"parameters":{"type":"object"},"foo":1}]`, `[{"foo":{"type":"function"}}]`,
}

// sameServerTools compares serverToolsLaid, given the elements the layout
// of a body holding the list records, with serverTools on the list alone.
// It reports whether the list holds a server tool.
func sameServerTools(t *testing.T, list string) bool {
	t.Helper()
	body := `{"tools":` + list + `}`
	var lay jsonscan.Layout
	if jsonscan.Check([]byte(body), jsonscan.Options{FoldCase: true, UTF8: true, Layout: &lay}) != nil || lay.Dropped {
		return false
	}
	want := serverTools(gjson.Parse(list))
	laid := 0
	doc{body: body, lay: &lay}.walk(true, func(k string, v gjson.Result, elems elements) bool {
		if k != "tools" {
			return true
		}
		if elems.laid {
			laid++
		}
		if got := serverToolsLaid(v, elems); got != want {
			t.Fatalf("%s: serverToolsLaid %v, serverTools %v", list, got, want)
		}
		return true
	})
	if laid != 1 && gjson.Parse(list).IsArray() {
		t.Fatalf("%s: the list was not laid out", list)
	}
	return want
}

// TestServerToolsLaidSameAsWalk: the walk that stops at a tool's deciding
// member judges every list as the walk of every member does.
func TestServerToolsLaidSameAsWalk(t *testing.T) {
	server := 0
	for _, c := range serverToolsLaidCases {
		if sameServerTools(t, c) {
			server++
		}
	}
	if server < 10 {
		t.Errorf("%d lists hold a server tool, want at least 10", server)
	}
}

// FuzzServerToolsLaidSameAsWalk: on any list a body may hold, the verdicts
// agree.
func FuzzServerToolsLaidSameAsWalk(f *testing.F) {
	for _, c := range serverToolsLaidCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, list string) {
		if len(list) > 1<<16 {
			return
		}
		sameServerTools(t, list)
	})
}
