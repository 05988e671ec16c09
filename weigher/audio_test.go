package weigher

import (
	"fmt"
	"strings"
	"testing"
)

// A chat request that sends or asks for audio says so (Estimate.Audio),
// whatever way it asks, and one that refers to an earlier audio answer by
// id is hidden context too; text requests are not audio. The flag comes
// from the count cache as well as from a cold count.
func TestChatAudio(t *testing.T) {
	w := testWeigher(t)
	const part = `{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}}`
	for _, c := range []struct {
		name          string
		body          string
		audio, hidden bool
	}{
		{"text", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, false, false},
		{"modalities text", `{"model":"gpt-4o","modalities":["text"],"messages":[{"role":"user","content":"hi"}]}`, false, false},
		{"audio null", `{"model":"gpt-4o","audio":null,"modalities":null,"messages":[{"role":"user","content":"hi"}]}`, false, false},
		{"modalities audio", `{"model":"gpt-4o","modalities":["text","audio"],"messages":[{"role":"user","content":"hi"}]}`, true, false},
		{"modalities unknown", `{"model":"gpt-4o","modalities":["text","Audio"],"messages":[{"role":"user","content":"hi"}]}`, true, false},
		{"modalities not an array", `{"model":"gpt-4o","modalities":"audio","messages":[{"role":"user","content":"hi"}]}`, true, false},
		{"audio output", `{"model":"gpt-4o","audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"hi"}]}`, true, false},
		{"input_audio part", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"what is said here?"},` + part + `]}]}`, true, false},
		{"part with input_audio member", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"x","input_audio":{"data":"AAAA"}}]}]}`, true, false},
		{"earlier audio answer", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},{"role":"assistant","audio":{"id":"audio_abc123"}},{"role":"user","content":"and again, please, with feeling"}]}`, true, true},
	} {
		for round := range 2 { // cold, then through the count cache
			est := w.Chat([]byte(c.body))
			if !est.Parsed || est.Audio != c.audio || est.ServerContext != c.hidden {
				t.Errorf("%s (round %d): parsed %v audio %v hidden %v, want audio %v hidden %v", c.name, round, est.Parsed, est.Audio, est.ServerContext, c.audio, c.hidden)
			}
		}
	}
}

// The audio parts of a chat usage are read, in a JSON answer and in a
// stream's usage chunk.
func TestChatUsageAudio(t *testing.T) {
	const usage = `"usage":{"prompt_tokens":640,"completion_tokens":1210,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":600},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":1200}}`
	u, ok := ParseChatUsage([]byte(`{"choices":[],` + usage + `}`))
	if !ok || u.InputTokens != 640 || u.AudioInputTokens != 600 || u.OutputTokens != 1210 || u.AudioOutputTokens != 1200 {
		t.Errorf("JSON usage %+v %v", u, ok)
	}
	c := ParseChatChunk([]byte(`{"choices":[],` + usage + `}`))
	if !c.HasUsage || c.Usage.AudioInputTokens != 600 || c.Usage.AudioOutputTokens != 1200 {
		t.Errorf("chunk usage %+v", c)
	}
}

// A chat conversation whose first message sends audio, resent with one
// more turn, resumes after its last message and is still audio (the
// resume point keeps the mark, as it keeps hidden input).
func TestResumeKeepsAudio(t *testing.T) {
	turn := func(i int) string {
		role := [...]string{"user", "assistant"}[i%2]
		return fmt.Sprintf(`{"role":%q,"content":"turn %d: the bucket refills at a steady rate, Задача 漢字 %d"}`, role, i, i)
	}
	audio := `{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=","format":"wav"}}]}`
	body := func(n int) []byte {
		msgs := []string{audio}
		for i := range n {
			msgs = append(msgs, turn(i))
		}
		return []byte(`{"model":"gpt-4o-audio-preview","messages":[` + strings.Join(msgs, ",") + `],"max_completion_tokens":100}`)
	}
	var steps []resumeStep
	for n := 1; n < 8; n++ {
		steps = append(steps, resumeStep{name: "turn", body: body(n), resumes: n > 1})
	}
	w := cachedWeigher(t, 4<<20)
	runResumeKind(t, w, KindChat, steps)
	if e := w.Chat(body(8)); !e.Audio {
		t.Errorf("resumed conversation lost its audio: %+v", e)
	}
}

// A Messages request with Anthropic web search tools reserves the searches
// they may run: the sum of their max_uses, defaultWebSearchUses for a tool
// without a readable one, none for other tools; the cache (a second
// weighing) gives the same figure.
func TestMessagesWebSearches(t *testing.T) {
	w := testWeigher(t)
	const msgs = `"messages":[{"role":"user","content":"news today?"}]`
	for _, c := range []struct {
		name  string
		tools string
		want  int64
	}{
		{"none", ``, 0},
		{"client tool", `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`, 0},
		{"web fetch", `,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5}]`, 0},
		{"max_uses 5", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`, 5},
		{"max_uses as a string", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":"7"}]`, 7},
		{"max_uses 2.5", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":2.5}]`, 3},
		{"no max_uses", `,"tools":[{"type":"web_search_20250305","name":"web_search"}]`, defaultWebSearchUses},
		{"max_uses null", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":null}]`, defaultWebSearchUses},
		{"max_uses 0", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":0}]`, defaultWebSearchUses},
		{"max_uses -3", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":-3}]`, defaultWebSearchUses},
		{"max_uses 1e300", `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1e300}]`, maxWebSearchUses},
		{"newer version", `,"tools":[{"type":"web_search_20260209","name":"web_search","max_uses":4}]`, 4},
		{"escaped type", `,"tools":[{"type":"web\u005fsearch_20250305","name":"web_search","max_uses":4}]`, 4},
		{"escaped type alone", `,"tools":[{"type":"web\u005fsearch_20250305","name":"s","max_uses":4}]`, 4},
		{"escaped letters", `,"tools":[{"type":"\u0077eb_s\u0065arch_20250305","name":"s"}]`, defaultWebSearchUses},
		{"two tools", `,"tools":[{"type":"web_search_20250305","name":"a","max_uses":3},{"name":"b","input_schema":{}},{"type":"web_search_20250305","name":"c","max_uses":4}]`, 7},
	} {
		body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":50` + c.tools + `,` + msgs + `}`)
		for round := range 2 {
			if e := w.Weigh(KindMessages, body); !e.Parsed || e.WebSearches != c.want {
				t.Errorf("%s (round %d): %d searches (parsed %v), want %d", c.name, round, e.WebSearches, e.Parsed, c.want)
			}
		}
	}
}

// A Messages stream cut before its final usage keeps the searches it
// reserved (the upstream may have run them unreported), or the reported
// count when larger; a final usage settles at what it reports.
func TestStreamSettleWebSearches(t *testing.T) {
	est := Estimate{InputTokens: 10, OutputTokens: 50, WebSearches: 5}
	start := `{"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}`
	delta := func(n int) string {
		return fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40,"server_tool_use":{"web_search_requests":%d}}}`, n)
	}
	for _, c := range []struct {
		name   string
		events []string
		want   int64
	}{
		{"cut after message_start", []string{start}, 5},
		{"cut after a delta reporting 2", []string{start, delta(2)}, 5},
		{"cut after a delta reporting 9", []string{start, delta(9)}, 9},
		{"final, 2 reported", []string{start, delta(2), `{"type":"message_stop"}`}, 2},
	} {
		s := NewStream(KindMessages)
		for _, e := range c.events {
			s.Event(nil, []byte(e))
		}
		if u, src := s.Settle(est, 3); u.WebSearches != c.want {
			t.Errorf("%s: settled %d searches (%v), want %d", c.name, u.WebSearches, src, c.want)
		}
	}
}

// A web search tool naming max_uses in another case is refused: the
// weigher would reserve defaultWebSearchUses where a decoder that ignores
// case reads 50.
func TestMessagesWebSearchUsesCase(t *testing.T) {
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":50,"tools":[{"type":"web_search_20250305","name":"web_search","Max_Uses":50}],"messages":[{"role":"user","content":"news?"}]}`)
	if e := testWeigher(t).Weigh(KindMessages, body); e.Parsed || e.Fault != FaultCaseVariantKey {
		t.Fatalf("Max_Uses: %+v, want refused (FaultCaseVariantKey)", e)
	}
}

// A Responses request with a web_search tool reserves max_tool_calls
// searches (defaultWebSearchUses without a readable one), none without
// one; its answer's web_search_call items are the searches charged, JSON
// and stream alike.
func TestResponsesWebSearchCalls(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		name string
		rest string
		want int64
	}{
		{"no tools", ``, 0},
		{"function tool", `,"tools":[{"type":"function","name":"web_search"}],"max_tool_calls":3`, 0},
		{"file search", `,"tools":[{"type":"file_search","vector_store_ids":["vs"]}],"max_tool_calls":3`, 0},
		{"web_search, max_tool_calls 3", `,"tools":[{"type":"web_search"}],"max_tool_calls":3`, 3},
		{"preview after a function", `,"tools":[{"type":"function","name":"f"},{"type":"web_search_preview"}],"max_tool_calls":4`, 4},
		{"no max_tool_calls", `,"tools":[{"type":"web_search"}]`, defaultWebSearchUses},
		{"max_tool_calls 0", `,"tools":[{"type":"web_search"}],"max_tool_calls":0`, defaultWebSearchUses},
		{"max_tool_calls 1e300", `,"tools":[{"type":"web_search"}],"max_tool_calls":1e300`, maxWebSearchUses},
	} {
		body := []byte(`{"model":"gpt-4o","input":"news?","max_output_tokens":50` + c.rest + `}`)
		if e := w.Weigh(KindResponses, body); !e.Parsed || e.WebSearches != c.want {
			t.Errorf("%s: %d searches (parsed %v), want %d", c.name, e.WebSearches, e.Parsed, c.want)
		}
	}
	if e := w.Weigh(KindResponses, []byte(`{"model":"gpt-4o","input":"q","tools":[{"type":"web_search"}],"MAX_TOOL_CALLS":1}`)); e.Parsed {
		t.Errorf("MAX_TOOL_CALLS weighed: %+v, want refused", e)
	}
	const output = `"output":[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"reasoning","id":"rs"},{"type":"web_search_call","id":"ws_2","status":"completed"},{"type":"message","role":"assistant","content":[]}]`
	const usage = `"usage":{"input_tokens":10,"output_tokens":5}`
	if u, ok := ParseResponsesUsage([]byte(`{"id":"resp_1",` + output + `,` + usage + `}`)); !ok || u.WebSearches != 2 {
		t.Errorf("JSON: %+v %v, want 2 searches", u, ok)
	}
	s := NewStream(KindResponses)
	s.Event([]byte("response.completed"), []byte(`{"type":"response.completed","response":{"id":"resp_1",`+output+`,`+usage+`}}`))
	if u, src := s.Settle(Estimate{WebSearches: 9}, 0); src != SourceReported || u.WebSearches != 2 {
		t.Errorf("stream: %+v %v, want 2 searches reported", u, src)
	}
}
