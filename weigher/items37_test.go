package weigher

// Unit tests of items37 (2026-12-06): Responses input parts that send
// audio were weighed as text.

import "testing"

// TestItems37ResponsesAudioParts: a Responses input part that sends audio
// (an audio input_file by data URL, file name or URL, an input_audio part,
// a data:audio input_image) sets Estimate.Audio, as the same part in a
// chat message does (partSendsAudio): the upstream bills it at the
// model's audio prices. A PDF, a PNG and text do not. Each body is also
// weighed with the part as the input's second item after a first one,
// and as the input given as one object, so that every path (the items'
// cache, a resumed prefix, a lone item) carries the flag.
func TestItems37ResponsesAudioParts(t *testing.T) {
	w := testWeigher(t)
	const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
	cases := []struct {
		name  string
		part  string
		audio bool
	}{
		{"input_file audio data", `{"type":"input_file","filename":"a","file_data":"data:audio/wav;base64,` + wav + `"}`, true},
		{"input_file audio name", `{"type":"input_file","filename":"talk.MP3","file_data":"data:application/octet-stream;base64,` + wav + `"}`, true},
		{"input_file audio url", `{"type":"input_file","file_url":"https://example.com/talk.wav?x=1"}`, true},
		{"input_audio", `{"type":"input_audio","input_audio":{"data":"` + wav + `","format":"wav"}}`, true},
		{"input_image audio data", `{"type":"input_image","image_url":"data:Audio/wav;base64,` + wav + `"}`, true},
		{"input_text", `{"type":"input_text","text":"hello"}`, false},
		{"input_file pdf", `{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + fakePDF(1) + `"}`, false},
		{"input_file pdf url", `{"type":"input_file","file_url":"https://example.com/a.pdf"}`, false},
		{"input_image png", `{"type":"input_image","image_url":"https://example.com/a.png"}`, false},
	}
	for _, c := range cases {
		msg := `{"role":"user","content":[{"type":"input_text","text":"Transcribe this."},` + c.part + `]}`
		bodies := map[string]string{
			"one item":    `{"model":"gpt-4o","max_output_tokens":10,"input":[` + msg + `]}`,
			"second item": `{"model":"gpt-4o","max_output_tokens":10,"input":[{"role":"user","content":"hi"},` + msg + `]}`,
			"object":      `{"model":"gpt-4o","max_output_tokens":10,"input":` + msg + `}`,
			"instruction": `{"model":"gpt-4o","max_output_tokens":10,"instructions":[` + msg + `],"input":"go"}`,
		}
		for how, body := range bodies {
			for i := range 2 { // the second weighing is served by the caches
				e := w.Responses([]byte(body))
				if !e.Parsed {
					t.Fatalf("%s, %s: not parsed: %v", c.name, how, e.Fault)
				}
				if e.Audio != c.audio {
					t.Errorf("%s, %s (weighing %d): Audio %v, want %v", c.name, how, i+1, e.Audio, c.audio)
				}
			}
		}
	}
}

// TestItems37ResponsesAudioResumed: a conversation whose first turn sent
// audio, weighed again with a turn more (resumed from the checkpoint of
// its prefix, resume.go), still sends that audio.
func TestItems37ResponsesAudioResumed(t *testing.T) {
	w := testWeigher(t)
	msg := `{"role":"user","content":[{"type":"input_file","filename":"talk.wav","file_data":"data:audio/wav;base64,UklGRiQAAABXQVZF"}]}`
	body := `{"model":"gpt-4o","max_output_tokens":10,"input":[` + msg
	for turn := range 4 {
		e := w.Responses([]byte(body + `]}`))
		if !e.Audio {
			t.Errorf("turn %d: Audio false", turn+1)
		}
		body += `,{"role":"assistant","content":"ok"},{"role":"user","content":"and again"}`
	}
}
