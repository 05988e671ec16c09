package weigher

// Unit tests of adv36 (2026-12-06): Messages content nested past the
// block walk's depth bound was weighed as nothing.

import (
	"fmt"
	"testing"
)

// nestBlocks wraps inner n times in the block wrap makes of it.
func nestBlocks(inner string, n int, wrap func(i int, inner string) string) string {
	for i := range n {
		inner = wrap(i, inner)
	}
	return inner
}

// TestAdv36DeepBlocksAreWeighed: a tool_result (or search_result) holding
// another, five deep or more, with 3,000 words at the bottom. The API
// refuses such nesting, but a lenient Anthropic-compatible upstream that
// writes the blocks out bills every word. The walk stopped at its depth
// bound and weighed what lay below as nothing (22 input tokens against
// some 3,600 at four deep); now it is weighed by its JSON text, as hidden
// context, so a document by URL down there is bounded by the window too.
func TestAdv36DeepBlocksAreWeighed(t *testing.T) {
	w := testWeigher(t)
	text := fmt.Sprintf(`{"type":"text","text":%q}`, words16)
	wraps := map[string]func(int, string) string{
		"tool_result": func(i int, in string) string {
			return fmt.Sprintf(`{"type":"tool_result","tool_use_id":"t%d","content":[%s]}`, i, in)
		},
		"tool_result content object": func(i int, in string) string {
			return fmt.Sprintf(`{"type":"tool_result","tool_use_id":"t%d","content":%s}`, i, in)
		},
		"search_result": func(_ int, in string) string {
			return fmt.Sprintf(`{"type":"search_result","source":"s","title":"t","content":[%s]}`, in)
		},
		"document content": func(_ int, in string) string {
			return fmt.Sprintf(`{"type":"document","source":{"type":"content","content":[%s]}}`, in)
		},
	}
	for name, wrap := range wraps {
		for n := 1; n <= 9; n++ {
			body := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[` +
				nestBlocks(text, n, wrap) + `]}]}`
			e := w.Messages([]byte(body))
			if !e.Parsed {
				t.Fatalf("%s ×%d: not parsed: %v %q", name, n, e.Fault, e.FaultDetail)
			}
			if e.InputTokens < 3000 {
				t.Errorf("%s ×%d: 3,000 words weighed %d input tokens", name, n, e.InputTokens)
			}
		}
	}
	// Deep enough that the walk stops above it, a document by URL (which
	// the upstream fetches) is hidden context as it is nearer the top.
	doc := `{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}`
	for n := 1; n <= 9; n++ {
		body := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[` +
			nestBlocks(doc, n, wraps["tool_result"]) + `]}]}`
		if e := w.Messages([]byte(body)); !e.ServerContext {
			t.Errorf("a URL document under %d tool_result blocks: not hidden context (%d input tokens)", n, e.InputTokens)
		}
	}
	// Shapes the API takes are weighed as before: not hidden.
	body := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[` +
		wraps["tool_result"](0, wraps["search_result"](0, text)) + `]}]}`
	if e := w.Messages([]byte(body)); e.ServerContext || e.InputTokens < 3000 {
		t.Errorf("a search_result in a tool_result: hidden %v, %d input tokens", e.ServerContext, e.InputTokens)
	}
}

// TestAdv36AudioInOtherPartsIsAudio: audio sent as a vLLM "audio_url"
// part, or as a file or image part whose data URL or file name says audio
// (which a gateway hands to a model that reads audio), is billed at the
// model's audio prices, as an input_audio part is; such a request was
// weighed as text (Audio false), so its hidden-context reservation was
// priced at the text price, 16× below gpt-4o-audio-preview's audio
// input. Text, images and PDFs stay text.
func TestAdv36AudioInOtherPartsIsAudio(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		part  string
		audio bool
	}{
		{`{"type":"audio_url","audio_url":{"url":"https://example.com/talk.wav"}}`, true},
		{`{"type":"Audio_URL","audio_url":{"url":"https://example.com/talk.wav"}}`, true},
		{`{"type":"file","file":{"file_data":"data:audio/wav;base64,UklGRiQAAABXQVZF","filename":"a"}}`, true},
		{`{"type":"file","file":{"file_data":"data:application/octet-stream;base64,UklGRiQAAABXQVZF","filename":"talk.MP3"}}`, true},
		{`{"type":"image_url","image_url":{"url":"data:audio/mpeg;base64,SUQzBAAAAAAA"}}`, true},
		{`{"type":"image_url","image_url":"DATA:Audio/ogg;base64,T2dnUwACAAAA"}`, true},
		{`{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}}`, true},
		{`{"type":"text","text":"an audio file"}`, false},
		{`{"type":"image_url","image_url":{"url":"https://example.com/audio.png"}}`, false},
		{`{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQKL1R5cGUgL1BhZ2U=","filename":"audio.pdf"}}`, false},
	} {
		body := `{"model":"gpt-4o-audio-preview","max_completion_tokens":10,"messages":[{"role":"user","content":[` + tc.part + `]}]}`
		e := w.Chat([]byte(body))
		if !e.Parsed {
			t.Fatalf("%s: not parsed: %v %q", tc.part, e.Fault, e.FaultDetail)
		}
		if e.Audio != tc.audio {
			t.Errorf("%s: Audio %v, want %v", tc.part, e.Audio, tc.audio)
		}
	}
}

// TestAdv36ObjectContentOfUnknownTypeIsHidden: a chat message's content
// given as one part object, not a list, of a type llmguard does not know
// (vLLM's video_url, audio_url: media its server fetches and bills) was
// weighed as its JSON text alone, 26 input tokens, where the same part in
// a list is hidden context (the model's largest input). A lenient
// upstream reads the object as its one part: it is now hidden too, and
// audio when it names audio.
func TestAdv36ObjectContentOfUnknownTypeIsHidden(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		part  string
		audio bool
	}{
		{`{"type":"video_url","video_url":{"url":"https://example.com/v.mp4"}}`, false},
		{`{"type":"audio_url","audio_url":{"url":"https://example.com/v.wav"}}`, true},
	} {
		for _, content := range []string{tc.part, "[" + tc.part + "]"} {
			e := w.Chat([]byte(`{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":` + content + `}]}`))
			if !e.ServerContext || e.Audio != tc.audio {
				t.Errorf("content %s: hidden %v audio %v, want hidden and audio %v", content, e.ServerContext, e.Audio, tc.audio)
			}
		}
	}
}
