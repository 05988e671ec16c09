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
