package weigher

import (
	"strings"
	"testing"
)

// compactionUsage is a Messages usage after server-side compaction, as the
// compaction guide's example reports it
// (https://platform.claude.com/docs/en/build-with-claude/compaction-threshold): the
// top-level figures are the message's sampling only (23,000 input, 1,000
// output); the compaction iteration that read the whole conversation and
// wrote its summary (180,000 input, 3,500 output) is listed in
// "iterations" beside it.
const compactionUsage = `{"input_tokens":23000,"output_tokens":1000,"iterations":[` +
	`{"type":"compaction","input_tokens":180000,"output_tokens":3500,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},` +
	`{"type":"message","input_tokens":23000,"output_tokens":1000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}]}`

// TestCompactionIterationsAreBilled: a Messages usage's "iterations" are
// what the request is billed, its top-level figures leave the compaction
// iteration out. Before, the usage settled at 23,000 + 1,000 a request
// billed 203,000 + 4,500.
func TestCompactionIterationsAreBilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		usage string
		want  Usage
	}{
		{"guide's example", compactionUsage, Usage{InputTokens: 203000, OutputTokens: 4500}},
		// A list that leaves the message's own iteration out: the
		// top-level figures plus the compaction's.
		{"compaction only listed", `{"input_tokens":23000,"output_tokens":1000,"iterations":[{"type":"compaction","input_tokens":180000,"output_tokens":3500}]}`,
			Usage{InputTokens: 203000, OutputTokens: 4500}},
		{"cache figures summed", `{"input_tokens":10,"cache_read_input_tokens":5000,"cache_creation_input_tokens":100,"output_tokens":7,"iterations":[` +
			`{"type":"compaction","input_tokens":50,"cache_read_input_tokens":90000,"cache_creation_input_tokens":0,"output_tokens":2000,"cache_creation":{"ephemeral_1h_input_tokens":0}},` +
			`{"type":"message","input_tokens":10,"cache_read_input_tokens":5000,"cache_creation_input_tokens":100,"output_tokens":7,"cache_creation":{"ephemeral_1h_input_tokens":100}}]}`,
			Usage{InputTokens: 60 + 95000 + 100, CachedInputTokens: 95000, CacheWriteTokens: 100, CacheWrite1hTokens: 100, OutputTokens: 2007}},
		// No compaction: one message iteration, the same figures.
		{"message iteration only", `{"input_tokens":25,"output_tokens":12,"iterations":[{"type":"message","input_tokens":25,"output_tokens":12}]}`,
			Usage{InputTokens: 25, OutputTokens: 12}},
		// Iterations below the top-level figures never lower them.
		{"smaller iterations", `{"input_tokens":25,"output_tokens":12,"iterations":[{"type":"message","input_tokens":1,"output_tokens":1}]}`,
			Usage{InputTokens: 25, OutputTokens: 12}},
		{"iterations not a list", `{"input_tokens":25,"output_tokens":12,"iterations":{"input_tokens":900}}`,
			Usage{InputTokens: 25, OutputTokens: 12}},
		{"absurd iterations saturate", `{"input_tokens":25,"output_tokens":12,"iterations":[{"input_tokens":1e300,"output_tokens":1e300},{"input_tokens":1e300,"output_tokens":1e300}]}`,
			Usage{InputTokens: maxTokens + 0, OutputTokens: maxTokens}},
	} {
		got, ok := ParseUsage(KindMessages, []byte(`{"type":"message","content":[{"type":"text","text":"x"}],"usage":`+tc.usage+`}`))
		if !ok || got != tc.want {
			t.Errorf("%s: ParseUsage = %+v, %v; want %+v", tc.name, got, ok, tc.want)
		}
	}
}

// TestStreamCompactionIterationsAreBilled: a Messages stream's
// message_delta carrying the iterations settles at their sum too.
func TestStreamCompactionIterationsAreBilled(t *testing.T) {
	events := []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":23000,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":""}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Based on our conversation"}}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":` + compactionUsage + `}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	s, _, _ := feed(KindMessages, events)
	want := Usage{InputTokens: 203000, OutputTokens: 4500}
	if r := s.Usage(); !r.Final || r.Usage != want {
		t.Errorf("Usage = %+v, want %+v, final", r, want)
	}
}

// FuzzCompactionIterationsNeverLower: whatever a Messages usage's
// "iterations" hold, the usage read with them reports every figure at
// least as the same usage without them does, and none negative.
func FuzzCompactionIterationsNeverLower(f *testing.F) {
	f.Add(`"input_tokens":23000,"output_tokens":1000`, `[{"type":"compaction","input_tokens":180000,"output_tokens":3500},{"type":"message","input_tokens":23000,"output_tokens":1000}]`)
	f.Add(`"input_tokens":3,"cache_read_input_tokens":20,"output_tokens":0`, `[{"cache_read_input_tokens":"7","output_tokens":-4,"cache_creation":{"ephemeral_1h_input_tokens":9}}]`)
	f.Add(`"input_tokens":1,"output_tokens":1`, `[1e400,null,{"input_tokens":1e400}]`)
	f.Add(`"input_tokens":1,"output_tokens":1`, `{"type":"message"}`)
	f.Fuzz(func(t *testing.T, top, iterations string) {
		without, ok1 := ParseUsage(KindMessages, []byte(`{"usage":{`+top+`}}`))
		with, ok2 := ParseUsage(KindMessages, []byte(`{"usage":{`+top+`,"iterations":`+iterations+`}}`))
		if !ok1 || !ok2 {
			return // not a usage, or not valid JSON with the iterations
		}
		if with.InputTokens < without.InputTokens || with.OutputTokens < without.OutputTokens ||
			with.CacheWriteTokens < without.CacheWriteTokens || with.CachedInputTokens > with.InputTokens ||
			with.CacheWriteTokens+with.CachedInputTokens > with.InputTokens {
			t.Errorf("with iterations %+v, without %+v", with, without)
		}
		if with.CachedInputTokens < 0 || with.CacheWrite1hTokens < 0 || with.OutputTokens < 0 {
			t.Errorf("negative figure %+v", with)
		}
	})
}

// TestCompactionMayRunIsHidden: a Messages request asking for server-side
// compaction whose estimated input reaches its trigger may sample twice,
// reading a summary the body does not show: hidden context (the model's
// largest input reserved). Below its trigger, or without a compaction
// edit, it is weighed as its text.
func TestCompactionMayRunIsHidden(t *testing.T) {
	w, err := New(Options{DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("word ", 60000) // ~60,000 tokens and more, Claude's safety factor applied
	body := func(cm string) []byte {
		return []byte(`{"model":"claude-opus-4-6","max_tokens":2000,` + cm + `"messages":[{"role":"user","content":"` + long + `"}]}`)
	}
	for _, tc := range []struct {
		name   string
		cm     string
		hidden bool
	}{
		{"no context_management", ``, false},
		{"default trigger above the input", `"context_management":{"edits":[{"type":"compact_20260112"}]},`, false},
		{"trigger reached", `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":50000}}]},`, true},
		{"trigger below the least taken", `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":5}}]},`, true},
		{"trigger not a count", `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":"soon"}}]},`, true},
		{"trigger of another type", `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"turns","value":900000}}]},`, true},
		{"trigger above the input", `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":900000}}]},`, false},
		{"clearing edit only", `"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":50000}}]},`, false},
	} {
		e := w.Weigh(KindMessages, body(tc.cm))
		if e.InputTokens < 60000 {
			t.Fatalf("%s: input %d, want at least the text's 60,000", tc.name, e.InputTokens)
		}
		if e.ServerContext != tc.hidden {
			t.Errorf("%s: ServerContext %v, want %v (input %d)", tc.name, e.ServerContext, tc.hidden, e.InputTokens)
		}
	}
}
