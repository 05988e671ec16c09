package weigher

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// serverToolCases are tool lists whose verdict turns on each rule of
// eachTool and clientTool: the type before or after the function, a shell
// with and without its environment (before and after its type), types that
// are not strings, untyped tools shaped as a client's or named as a
// gateway's server tool, escaped keys, and a server tool after client ones.
var serverToolCases = []string{
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
	`[{"foo":1}]`, `[{"bar":{},"baz":2}]`, // no "type" nor hint: eachTool walks none
	`[{"type":"func\u0074ion","function":{"name":"f"}}]`, `[{"type":"functions"}]`,
	`[{"a":1,"":"search"}]`, `[{"":"search"}]`, // a hint, no type: the first key named decides
}

// sameServerTools compares the server-tool verdict the count's walk
// finds (countServer, and countCheckedServer with the fields of both
// list kinds) with serverTools on the list, for a list that passes the
// request's scan, and the walk's count and check with count and
// countChecked. It reports whether the list holds a server tool.
func sameServerTools(t *testing.T, tc toolsCounter, list string) bool {
	t.Helper()
	if jsonscan.Check([]byte(list), jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
		return false
	}
	v := gjson.Parse(strings.TrimSpace(list))
	want := serverTools(v)
	n, got := tc.countServer(v)
	if got != want || n != tc.count(v) {
		t.Fatalf("%s: countServer %d, %v; count %d, serverTools %v", list, n, got, tc.count(v), want)
	}
	for _, elem := range []*fields{toolFields, functionFields} {
		n, got, ok := tc.countCheckedServer(v, elem)
		wantN, wantOK := tc.countChecked(v, elem)
		if got != want || n != wantN || ok != wantOK {
			t.Fatalf("%s: countCheckedServer %d, %v, %v; countChecked %d, %v, serverTools %v", list, n, got, ok, wantN, wantOK, want)
		}
	}
	return want
}

// TestToolsWalkServerSameAsEachTool: the count's walk judges every list
// as eachTool's walk of every member does (the cases turn on each of its
// rules).
func TestToolsWalkServerSameAsEachTool(t *testing.T) {
	w := testWeigher(t)
	tc := newToolsCounter(w.encoders[EncodingO200k], EncodingO200k)
	server := 0
	for _, c := range append(append(serverToolCases, toolLists...), checkedToolLists...) {
		if sameServerTools(t, tc, c) {
			server++
		}
	}
	if server < 14 {
		t.Errorf("%d lists hold a server tool, want at least 14", server)
	}
}

// FuzzToolsWalkServerSameAsEachTool: on any list a body may hold, the
// verdicts agree.
func FuzzToolsWalkServerSameAsEachTool(f *testing.F) {
	for _, c := range append(append(serverToolCases, toolLists...), checkedToolLists...) {
		f.Add(c)
	}
	w := testWeigher(f)
	tc := newToolsCounter(w.encoders[EncodingO200k], EncodingO200k)
	f.Fuzz(func(t *testing.T, list string) {
		if len(list) > 1<<16 {
			return
		}
		sameServerTools(t, tc, list)
	})
}
