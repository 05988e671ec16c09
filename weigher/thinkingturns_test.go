package weigher

import (
	"fmt"
	"strings"
	"testing"
)

// TestEarlierThinkingKeptIsWeighed: Claude Opus 4.5 and later Opus,
// Sonnet 4.6 and later Sonnet, and Mythos keep the thinking blocks of
// every earlier assistant turn in the context they bill
// (https://platform.claude.com/docs/en/build-with-claude/extended-thinking);
// Opus 4.1 and earlier, Sonnet 4.5 and earlier and Haiku through 4.5 keep
// only the last turn's. A block whose display is "omitted" (Opus 4.7's
// default) carries its thinking only in its signature, weighed at 4 bytes
// a token. Before, an earlier turn's block weighed nothing on any model,
// and a signature nothing anywhere.
func TestEarlierThinkingKeptIsWeighed(t *testing.T) {
	w := testWeigher(t)
	words := strings.Repeat("prime ", 2000) // 2,000 o200k tokens
	sig := strings.Repeat("QUJD", 2000)     // 8,000 bytes: 2,000 tokens
	earlier := func(block string) string {
		return fmt.Sprintf(`[{"role":"user","content":"Question one?"},`+
			`{"role":"assistant","content":[%s,{"type":"text","text":"Yes."}]},`+
			`{"role":"user","content":"Question two?"}]`, block)
	}
	current := func(block string) string { // the block in the current turn (a tool loop)
		return fmt.Sprintf(`[{"role":"user","content":"Question one?"},`+
			`{"role":"assistant","content":[%s,{"type":"tool_use","id":"t1","name":"f","input":{}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]`, block)
	}
	visible := fmt.Sprintf(`{"type":"thinking","thinking":%q,"signature":"c2ln"}`, words)
	omitted := fmt.Sprintf(`{"type":"thinking","thinking":"","signature":%q}`, sig)
	redacted := fmt.Sprintf(`{"type":"redacted_thinking","data":%q}`, sig)
	weigh := func(model, messages, extra string) int64 {
		t.Helper()
		e := w.Messages([]byte(fmt.Sprintf(`{"model":%q,"max_tokens":1%s,"messages":%s}`, model, extra, messages)))
		if !e.Parsed {
			t.Fatalf("%s: not parsed", model)
		}
		return e.InputTokens
	}
	base := weigh("claude-opus-4-7", earlier(`{"type":"text","text":"."}`), "")
	for _, tc := range []struct {
		model, messages, extra string
		kept                   bool
	}{
		{"claude-opus-4-7", earlier(visible), "", true},
		{"claude-opus-4-7", earlier(omitted), "", true},
		{"claude-opus-4-7", earlier(redacted), "", true},
		{"claude-opus-4-7", current(omitted), "", true},
		{"claude-opus-4-5-20251101", earlier(visible), "", true},
		{"claude-sonnet-4-6", earlier(visible), "", true},
		{"anthropic/claude-sonnet-4.6", earlier(omitted), "", true},
		{"claude-mythos-preview", earlier(visible), "", true},
		{"claude-opus-5", earlier(omitted), "", true},
		{"some-gateway-model", earlier(visible), "", true},
		{"claude-sonnet-4-5", current(omitted), "", true}, // the current turn's block, by its signature
		{"claude-sonnet-4-5", earlier(visible), `,"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}`, true},
		{"claude-sonnet-4-5", earlier(visible), "", false},
		{"claude-sonnet-4-20250514", earlier(omitted), "", false},
		{"claude-opus-4-1-20250805", earlier(visible), "", false},
		{"claude-haiku-4-5", earlier(visible), "", false},
		{"claude-3-7-sonnet-20250219", earlier(visible), "", false},
	} {
		got := weigh(tc.model, tc.messages, tc.extra)
		if tc.kept && got < base+1950 {
			t.Errorf("%s %.60s: %d input tokens, want at least %d: the model reads the thinking again", tc.model, tc.extra, got, base+1950)
		}
		if !tc.kept && got > base+100 {
			t.Errorf("%s: %d input tokens, want about %d: the model drops an earlier turn's thinking", tc.model, got, base)
		}
	}
	// A block with visible text weighs its text, not its text and its
	// signature: 2,000 tokens of text beside a 2,000-token signature.
	both := fmt.Sprintf(`{"type":"thinking","thinking":%q,"signature":%q}`, words, sig)
	if got, want := weigh("claude-opus-4-7", earlier(both), ""), weigh("claude-opus-4-7", earlier(visible), ""); got != want {
		t.Errorf("text and signature: %d input tokens, want %d (the text alone)", got, want)
	}
}

func TestKeepsEveryThinking(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-opus-4-5": true, "claude-opus-4-6": true, "claude-opus-4-10": true, "claude-sonnet-4-6": true,
		"claude-sonnet-5": true, "claude-haiku-4-6": true, "us.anthropic.claude-opus-4-5-20251101-v1:0": true,
		"gpt-4o": true, "claude-latest": true,
		"claude-opus-4": false, "claude-opus-4@20250514": false, "claude-opus-4-20250514": false,
		"claude-opus-4-1": false, "claude-sonnet-4-5-20250929": false, "claude-sonnet-4": false,
		"claude-haiku-4-5": false, "claude-3-5-haiku-latest": false, "claude-instant-1": false, "Claude-Sonnet-4.5": false,
	} {
		if got := keepsEveryThinking(model); got != want {
			t.Errorf("keepsEveryThinking(%q) = %v, want %v", model, got, want)
		}
	}
}

// TestResumeEarlierThinking: a growing conversation resumed from a
// checkpoint gives a full weighing's estimate when earlier turns' thinking
// counts (Opus 4.7), when it does not (Sonnet 4.5), and when a
// clear_thinking edit comes and goes on the same model and messages.
func TestResumeEarlierThinking(t *testing.T) {
	w := cachedWeigher(t, 4<<20)
	p := plain(t)
	var msgs []string
	for i := range 12 {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":"question %d: how does the bucket refill when the clock steps back?"}`, i),
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"step %d: %s","signature":"%s"},{"type":"text","text":"it is clamped"}]}`,
				i, strings.Repeat("weigh then reconcile ", 20), strings.Repeat("QUJD", 10*i)))
		for _, model := range []string{"claude-opus-4-7", "claude-sonnet-4-5"} {
			for _, cm := range []string{"", `"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},`} {
				body := []byte(`{"max_tokens":1024,"messages":[` + strings.Join(msgs, ",") + `,{"role":"user","content":"go on"}],` + cm + `"model":"` + model + `"}`)
				if got, want := w.Messages(body), p.Messages(body); got != want {
					t.Fatalf("turn %d, %s %q: resumed %+v, plain %+v", i, model, cm, got, want)
				}
			}
		}
	}
	if r := w.CacheStats().Resumed; r < 12 {
		t.Errorf("%d bodies resumed, want at least 12", r)
	}
}
