package weigher

import "testing"

// TestChunkChoiceOrDeltaAsTextIsUncounted: a chat chunk whose choice, or
// whose choice's delta, is sent as a string or an array (not the object
// the API sends) carries output the walk does not count: Uncounted, so a
// stream without a usage keeps its output reservation, and its text is
// read as a JSON answer's (chatAnswerText) for the tap to check a usage
// against (review20: both were read as nothing, neither counted nor
// Uncounted). An honest chunk's empty or null delta and empty choices are
// not.
func TestChunkChoiceOrDeltaAsTextIsUncounted(t *testing.T) {
	for _, tc := range []struct {
		chunk       string
		completions bool
		uncounted   bool
		text        string // chatAnswerText's reading
	}{
		{chunk: `{"choices":["two words"]}`, uncounted: true, text: "two words"},
		{chunk: `{"choices":[["two words"]]}`, uncounted: true},
		{chunk: `{"choices":[{"index":0,"delta":"two words"}]}`, uncounted: true, text: "two words"},
		{chunk: `{"choices":[{"index":0,"delta":["two words"]}]}`, uncounted: true},
		{chunk: `{"choices":[{"index":0,"message":"two words"}]}`, uncounted: true, text: "two words"},
		{chunk: `{"choices":["two words"]}`, completions: true, uncounted: true, text: "two words"},
		{chunk: `{"choices":[{"index":0,"delta":""}]}`},
		{chunk: `{"choices":[{"index":0,"delta":null}]}`},
		{chunk: `{"choices":[{"index":0,"delta":{}}]}`},
		{chunk: `{"choices":[""]}`},
		{chunk: `{"choices":[]}`},
		{chunk: `{"choices":[{"index":0,"delta":{"content":"two words"}}]}`, text: "two words"},
	} {
		c := parseOpenAIChunk([]byte(tc.chunk), tc.completions, 64)
		if c.Uncounted != tc.uncounted {
			t.Errorf("%s (completions %v): Uncounted %v, want %v", tc.chunk, tc.completions, c.Uncounted, tc.uncounted)
		}
		if got := uncountedChunkText([]byte(tc.chunk), c.Text); got != tc.text {
			t.Errorf("%s: text read %q, want %q", tc.chunk, got, tc.text)
		}
	}
}
