package proxy

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/llmguard/llmguard/weigher"
)

// TestAddIncludeUsageMatchesSjson: the body llmguard forwards with
// include_usage added means what sjson's general edit of it means, whether
// the body has stream_options or not, and the caller's body is never
// changed.
func TestAddIncludeUsageMatchesSjson(t *testing.T) {
	w := testWeigher(t)
	for _, body := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi }"}],"stream":true}`,
		"{\"model\":\"gpt-4o-mini\",\"messages\":[],\"stream\":true}\n\t ",
		`{"model":"gpt-4o-mini","messages":[],"stream":true,"stream_options":{}}`,
		`{"model":"gpt-4o-mini","messages":[],"stream":true,"stream_options":null}`,
		`{"model":"gpt-4o-mini","messages":[],"stream":true,"stream_options":{"include_usage":false,"x":1}}`,
	} {
		in := []byte(body)
		est := w.Chat(in)
		got, strip := addIncludeUsage(weigher.KindChat, &est, in)
		if string(in) != body {
			t.Fatalf("%s: the caller's body was changed", body)
		}
		if !strip {
			t.Errorf("%s: include_usage not added", body)
			continue
		}
		want, err := sjson.SetBytes([]byte(body), "stream_options.include_usage", true)
		if err != nil {
			t.Fatal(err)
		}
		var g, wv any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: forwarded %s: %v", body, got, err)
		}
		json.Unmarshal(want, &wv)
		if !reflect.DeepEqual(g, wv) {
			t.Errorf("%s: forwarded %s, want %s", body, got, want)
		}
		if again := w.Chat(got); !again.Parsed || !again.IncludeUsage {
			t.Errorf("%s: forwarded %s does not read as asking for usage", body, got)
		}
	}
}
