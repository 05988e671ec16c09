package weigher

import "testing"

// A stream flag a lenient upstream reads as true (pydantic's lax mode:
// vLLM) marks the request streamed, so that the proxy asks for its usage;
// "stream": "true" was read as not streamed, and the stream settled on
// llmguard's own count.
func TestLenientStreamFlag(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		stream, usage string
		want, wantUse bool
	}{
		{`true`, `true`, true, true},
		{`"true"`, `"True"`, true, true},
		{`" yes "`, `1`, true, true},
		{`1`, `"on"`, true, true},
		{`"1"`, `false`, true, false},
		{`false`, `"false"`, false, false},
		{`"false"`, `0`, false, false},
		{`2`, `"2"`, false, false},
		{`null`, `null`, false, false},
		{`"truee"`, `"y"`, false, true},
	} {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":` + tc.stream + `,"stream_options":{"include_usage":` + tc.usage + `}}`
		for name, e := range map[string]Estimate{"chat": w.Chat([]byte(body)),
			"completions": w.Completions([]byte(`{"model":"gpt-3.5-turbo-instruct","prompt":"hi","stream":` + tc.stream + `,"stream_options":{"include_usage":` + tc.usage + `}}`))} {
			if e.Stream != tc.want || e.IncludeUsage != tc.wantUse {
				t.Errorf("%s stream %s include_usage %s: Stream %v IncludeUsage %v, want %v %v", name, tc.stream, tc.usage, e.Stream, e.IncludeUsage, tc.want, tc.wantUse)
			}
		}
	}
}
