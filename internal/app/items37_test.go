package app

// Socket tests of items37 (2026-12-06): Responses input parts that send
// audio were weighed and priced as text.

import (
	"strings"
	"testing"
)

// responsesAudioParts are Responses input parts that send audio, each as
// an upstream that maps them onto its audio input reads them.
var responsesAudioParts = map[string]string{
	"input_file audio data": `{"type":"input_file","filename":"a","file_data":"data:audio/wav;base64,UklGRiQAAABXQVZF"}`,
	"input_file audio name": `{"type":"input_file","filename":"talk.mp3","file_data":"data:application/octet-stream;base64,UklGRiQAAABXQVZF"}`,
	"input_audio":           `{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}}`,
	"input_image audio":     `{"type":"input_image","image_url":"data:audio/wav;base64,UklGRiQAAABXQVZF"}`,
}

// TestItems37ResponsesAudioWithoutAudioPricesRefused: a Responses request
// whose input sends audio is refused under a usd limit when its model has
// no audio prices, as the same chat request is
// (TestAudioWithoutAudioPricesRefused), and nothing reaches the upstream;
// its text request passes. Before, each was forwarded and priced as text.
func TestItems37ResponsesAudioWithoutAudioPricesRefused(t *testing.T) {
	h, _ := startAudio(t, 100, "  gpt-audio-house: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10}")
	before := h.mock.Requests.Load()
	for name, part := range responsesAudioParts {
		body := `{"model":"gpt-audio-house","max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_text","text":"Transcribe this."},` + part + `]}]}`
		resp, got := h.do("/v1/responses", body)
		if resp.StatusCode != 400 || !strings.Contains(got, `"code":"model_not_priced"`) || !strings.Contains(got, "no audio price") {
			t.Errorf("%s: %d %.300s, want 400 model_not_priced", name, resp.StatusCode, got)
		}
	}
	if n := h.mock.Requests.Load() - before; n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	resp, got := h.do("/v1/responses", `{"model":"gpt-audio-house","max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`)
	if resp.StatusCode != 200 {
		t.Errorf("text request: %d %.300s, want 200", resp.StatusCode, got)
	}
}

// TestItems37ResponsesAudioReservedAtAudioRates: a Responses request to
// gpt-4o-audio-preview sending an audio file, with 100,000 output tokens
// reserved: $8 at the audio rate ($80 per million), $1 at the text rate.
// A $5 quota refuses it before anything is forwarded (before: admitted,
// priced as text); the same request with a PDF in its stead passes.
func TestItems37ResponsesAudioReservedAtAudioRates(t *testing.T) {
	h, _ := startAudio(t, 5, "")
	before := h.mock.Requests.Load()
	body := `{"model":"gpt-4o-audio-preview","max_output_tokens":100000,"input":[{"role":"user","content":[{"type":"input_text","text":"Transcribe this."},` +
		responsesAudioParts["input_file audio data"] + `]}]}`
	resp, got := h.do("/v1/responses", body)
	if resp.StatusCode == 200 || h.mock.Requests.Load() != before {
		t.Errorf("an $8 audio reservation under a $5 quota: %d %.300s, want refused and not forwarded", resp.StatusCode, got)
	}
	resp, got = h.do("/v1/responses", strings.Replace(body, "data:audio/wav", "data:text/plain", 1))
	if resp.StatusCode != 200 {
		t.Errorf("a $1 text reservation under a $5 quota: %d %.300s, want 200", resp.StatusCode, got)
	}
}
