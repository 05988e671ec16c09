package weigher

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNamedModel: the model a body that is not weighed names is its
// top-level "model" string, resolved as a weighed body's is, and none for
// a body a weighed endpoint would refuse unread or that is not an object.
func TestNamedModel(t *testing.T) {
	w := testWeigher(t)
	deployment := func(string) string { return "gpt-4o" }
	upper := func(name string) string { return strings.ToUpper(name) }
	for _, c := range []struct {
		name    string
		body    string
		resolve func(string) string
		want    string
	}{
		{name: "count_tokens", body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, want: "claude-sonnet-4-5"},
		{name: "model last", body: ` {"input":"hi", "model":"omni-moderation-latest"} `, want: "omni-moderation-latest"},
		{name: "escaped key", body: `{"mod\u0065l":"gpt-4o-mini"}`, want: "gpt-4o-mini"},
		{name: "resolved", body: `{"model":"my-deployment"}`, resolve: upper, want: "MY-DEPLOYMENT"},
		{name: "deployment path, no body", resolve: deployment, want: "gpt-4o"},
		{name: "deployment path, multipart", body: "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b--", resolve: deployment, want: "gpt-4o"},
		{name: "empty"},
		{name: "multipart", body: "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b--"},
		{name: "array", body: `[{"model":"gpt-4o"}]`},
		{name: "number", body: `{"model":4}`},
		{name: "nested only", body: `{"params":{"model":"gpt-4o"}}`},
		{name: "named twice", body: `{"model":"gpt-4o-mini","model":"gpt-4o"}`},
		{name: "two cases", body: `{"Model":"gpt-4o","model":"gpt-4o-mini"}`},
		{name: "other case only", body: `{"MODEL":"gpt-4o"}`},
		{name: "byte-order mark", body: "\ufeff" + `{"model":"gpt-4o"}`},
		{name: "not UTF-8", body: "{\"model\":\"gpt-4o\xff\"}"},
		{name: "comment", body: `{"model":"gpt-4o"/* c */}`},
		{name: "too deep", body: `{"model":"gpt-4o","x":` + strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1) + `}`},
	} {
		if got := w.NamedModel([]byte(c.body), c.resolve); got != c.want {
			t.Errorf("%s: NamedModel(%q) = %q, want %q", c.name, c.body, got, c.want)
		}
	}
}

// TestNamedModelIsACopy: the name is kept after the caller reuses the
// body's buffer.
func TestNamedModelIsACopy(t *testing.T) {
	w := testWeigher(t)
	for step := range 3 {
		body := []byte(`{"model":"claude-haiku-4-5","messages":[]}`)
		got := w.NamedModel(body, nil)
		copy(body[10:], "XXXXXXXXXXXXXXXX")
		if got != "claude-haiku-4-5" {
			t.Fatalf("step %d: NamedModel %q after the body was overwritten", step, got)
		}
	}
}

// FuzzNamedModel: NamedModel never panics, and a name it finds is the
// top-level "model" string encoding/json decodes from the same body.
func FuzzNamedModel(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-sonnet-4-5","messages":[]}`, `{"mod\u0065l":"a"}`, `{"model":"a","model":"b"}`,
		`{"Model":"a"}`, `[{"model":"a"}]`, `{"model":null}`, `{"model":"\ud800"}`, "", "{", `"model"`,
	} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got := w.NamedModel(body, nil)
		if got == "" {
			return
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("NamedModel(%q) = %q of a body encoding/json refuses: %v", body, got, err)
		}
		var want string
		if err := json.Unmarshal(doc["model"], &want); err != nil || got != want {
			t.Fatalf("NamedModel(%q) = %q, encoding/json reads model %s (%v)", body, got, doc["model"], err)
		}
	})
}
