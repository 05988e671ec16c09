package weigher

import (
	"strings"
	"testing"
)

// A Responses context_management compaction entry
// (https://developers.openai.com/api/docs/guides/compaction) makes the
// call hidden context once the estimated input and output reach its
// compact_threshold, or always when the threshold is not a count it
// reads; a threshold out of reach leaves the estimate as it was.
func TestResponsesCompactionMayRunIsHidden(t *testing.T) {
	w := testWeigher(t)
	long := strings.Repeat("word ", 3000) // 3,000 tokens and a few
	body := func(cm string) []byte {
		return []byte(`{"model":"my-model","max_output_tokens":500,"input":"` + long + `"` + cm + `}`)
	}
	for _, tc := range []struct {
		name   string
		cm     string
		hidden bool
	}{
		{"no context_management", ``, false},
		{"null", `,"context_management":null`, false},
		{"empty list", `,"context_management":[]`, false},
		{"threshold above the call", `,"context_management":[{"type":"compaction","compact_threshold":200000}]`, false},
		{"threshold reached by the input", `,"context_management":[{"type":"compaction","compact_threshold":3000}]`, true},
		{"threshold reached with the output", `,"context_management":[{"type":"compaction","compact_threshold":3400}]`, true},
		{"threshold as a string", `,"context_management":[{"type":"compaction","compact_threshold":"3000"}]`, true},
		{"threshold absent", `,"context_management":[{"type":"compaction"}]`, true},
		{"threshold not a count", `,"context_management":[{"type":"compaction","compact_threshold":"soon"}]`, true},
		{"threshold zero", `,"context_management":[{"type":"compaction","compact_threshold":0}]`, true},
		{"least of two entries", `,"context_management":[{"type":"compaction","compact_threshold":200000},{"type":"compaction","compact_threshold":10}]`, true},
		{"one entry as an object", `,"context_management":{"type":"compaction","compact_threshold":10}`, true},
		{"entry not an object", `,"context_management":["compaction"]`, true},
	} {
		e := w.Weigh(KindResponses, body(tc.cm))
		if !e.Parsed || e.InputTokens < 3000 {
			t.Fatalf("%s: parsed %v, input %d, want at least the text's 3,000", tc.name, e.Parsed, e.InputTokens)
		}
		if e.ServerContext != tc.hidden {
			t.Errorf("%s: ServerContext %v, want %v (input %d, output %d)", tc.name, e.ServerContext, tc.hidden, e.InputTokens, e.OutputTokens)
		}
	}
}

// llama.cpp's Responses route copies every member into the chat request
// it runs (server_chat_convert_responses_to_chatcmpl), so its chat
// sampling counts and floors apply: the output reserved is one
// completion's maximum times the largest of n, n_cmpl and best_of, at
// least min_tokens, and with ignore_eos and no maximum the model's
// window.
func TestResponsesChatSamplingIsReserved(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name    string
		extra   string
		want    int64 // OutputTokens
		choices int64
	}{
		{"none", `"max_output_tokens":100`, 100, 1},
		{"n_cmpl", `"max_output_tokens":100,"n_cmpl":8`, 800, 8},
		{"n", `"max_output_tokens":100,"n":3`, 300, 3},
		{"n as a string", `"max_output_tokens":100,"n":"3"`, 300, 3},
		{"best_of over n", `"max_output_tokens":100,"n":2,"best_of":5`, 500, 5},
		{"n 0", `"max_output_tokens":100,"n":0`, 100, 1},
		{"n, defaulted", `"n":2`, 2000, 2},
		{"min_tokens over the maximum", `"max_output_tokens":100,"min_tokens":700`, 700, 1},
		{"ignore_eos, no maximum", `"ignore_eos":true`, DefaultMaxInputTokens, 1},
		{"ignore_eos under a maximum", `"max_output_tokens":100,"ignore_eos":true`, 100, 1},
	} {
		e := w.Weigh(KindResponses, []byte(`{"model":"my-model","input":"hi",`+tc.extra+`}`))
		if !e.Parsed || e.OutputTokens != tc.want || e.Choices != tc.choices {
			t.Errorf("%s: OutputTokens %d, Choices %d (parsed %v), want %d, %d", tc.name, e.OutputTokens, e.Choices, e.Parsed, tc.want, tc.choices)
		}
	}
	// A case variant of one of them is refused, as chat's are: a lenient
	// upstream may read "N_cmpl" as n_cmpl.
	for _, k := range []string{"N", "N_cmpl", "Best_Of", "Min_tokens", "Ignore_EOS", "Context_Management"} {
		e := w.Weigh(KindResponses, []byte(`{"model":"my-model","input":"hi","`+k+`":8}`))
		if e.Parsed {
			t.Errorf("%q: parsed, want refused as a case variant", k)
		}
	}
}

// A compaction item passed back as input (opaque state of an earlier
// compaction) is hidden context, weighed at least by its bytes.
func TestResponsesCompactionItemIsHidden(t *testing.T) {
	w := testWeigher(t)
	enc := strings.Repeat("gAAAAB", 400) // 2,400 bytes
	for _, tc := range []struct {
		name   string
		input  string
		hidden bool
	}{
		{"compaction item", `[{"type":"compaction","encrypted_content":"` + enc + `"},{"role":"user","content":"hi"}]`, true},
		{"reasoning item", `[{"type":"reasoning","summary":[],"encrypted_content":"` + enc + `"},{"role":"user","content":"hi"}]`, false},
	} {
		e := w.Weigh(KindResponses, []byte(`{"model":"my-model","max_output_tokens":16,"input":`+tc.input+`}`))
		if !e.Parsed || e.ServerContext != tc.hidden || e.InputTokens < 600 {
			t.Errorf("%s: parsed %v, ServerContext %v, input %d; want %v, at least 600", tc.name, e.Parsed, e.ServerContext, e.InputTokens, tc.hidden)
		}
	}
}
