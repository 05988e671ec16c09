package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
)

// audioPrices is a LiteLLM-format price file for gpt-4o-audio-preview as
// its model page lists it (developers.openai.com/api/docs/models/gpt-4o-audio-preview):
// text $2.50 / $10, audio $40 / $80 per million tokens, i.e. 2.5, 10, 40
// and 80 µUSD per token.
const audioPrices = `{"gpt-4o-audio-preview": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05,
  "input_cost_per_audio_token": 4e-05, "output_cost_per_audio_token": 8e-05, "max_input_tokens": 128000}}`

// startAudio runs llmguard with the audio price file, a usd quota of usd
// dollars and a ledger; models adds entries under models:.
func startAudio(t *testing.T, usd int, models string) (*harness, string) {
	t.Helper()
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(prices, []byte(audioPrices), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ledger.jsonl")
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	return startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
prices_file: %q
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
%s
limits:
  - {name: acme-dollars, scope: tenant, unit: usd, quota: %d, period: month}
ledger: {file: %q}
`, mock.URL, testKey, prices, models, usd, file)), file
}

// audioPart is a chat input_audio content part (a few bytes of "wav").
const audioPart = `{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=","format":"wav"}}`

// Audio tokens are priced at the model's audio rates when the answer is
// settled, JSON and stream alike: gpt-4o-audio-preview bills 600 audio
// input tokens at $40 and 1,200 audio output tokens at $80 per million,
// $0.12 where text rates would have charged $0.0135 (9× less).
func TestAudioTokensPricedAtAudioRates(t *testing.T) {
	h, file := startAudio(t, 100, "")
	body := `{"model":"gpt-4o-audio-preview","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},` +
		`"max_completion_tokens":2000,"messages":[{"role":"user","content":[{"type":"text","text":"say hi"},` + audioPart + `]}]}`
	for _, stream := range []bool{false, true} {
		b := body
		if stream {
			b = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
		}
		resp, got := h.do("/v1/chat/completions", b, "x-mock-completion-tokens", "10",
			"x-mock-audio-input-tokens", "600", "x-mock-audio-output-tokens", "1200")
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: %d %s", stream, resp.StatusCode, got)
		}
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil || len(recs) != 2 {
		t.Fatalf("ledger %+v, %v", recs, err)
	}
	for i, r := range recs {
		text := r.InputTokens - 600
		// µUSD: text input 2.5, audio input 40, text output 10, audio output 80 per token.
		want := (text*25+9)/10 + 600*40 + 10*10 + 1200*80
		if r.OutputTokens != 1210 || r.CostMicroUSD != want {
			t.Errorf("record %d: input %d output %d cost %d µUSD, want output 1210 and %d µUSD (audio at audio rates)",
				i, r.InputTokens, r.OutputTokens, r.CostMicroUSD, want)
		}
	}
}

// A request that sends or asks for audio is refused under a usd limit when
// its model has no audio prices (here the config prices the model's text
// only and no file does), naming the key that prices it; the same model's
// text requests pass. Every way of asking counts: an input_audio part,
// "modalities" with audio, "audio" alone, an earlier audio answer by id.
func TestAudioWithoutAudioPricesRefused(t *testing.T) {
	h, _ := startAudio(t, 100, "  gpt-audio-house: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10}")
	before := h.mock.Requests.Load()
	for name, body := range map[string]string{
		"input_audio part": `{"model":"gpt-audio-house","messages":[{"role":"user","content":[` + audioPart + `]}],"max_tokens":10}`,
		"modalities":       `{"model":"gpt-audio-house","modalities":["text","audio"],"messages":[{"role":"user","content":"hi"}],"max_tokens":10}`,
		"audio":            `{"model":"gpt-audio-house","audio":{"voice":"alloy","format":"mp3"},"messages":[{"role":"user","content":"hi"}],"max_tokens":10}`,
		"earlier audio":    `{"model":"gpt-audio-house","messages":[{"role":"user","content":"hi"},{"role":"assistant","audio":{"id":"audio_abc"}},{"role":"user","content":"again"}],"max_tokens":10}`,
	} {
		resp, got := h.do("/v1/chat/completions", body)
		if resp.StatusCode != 400 || !strings.Contains(got, `"code":"model_not_priced"`) ||
			!strings.Contains(got, `models.\"gpt-audio-house\".audio_input_usd_per_mtok`) || !strings.Contains(got, "no audio price") {
			t.Errorf("%s: %d %s, want 400 model_not_priced naming the audio price key", name, resp.StatusCode, got)
		}
	}
	if n := h.mock.Requests.Load() - before; n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	resp, got := h.do("/v1/chat/completions", `{"model":"gpt-audio-house","modalities":["text"],"messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)
	if resp.StatusCode != 200 {
		t.Errorf("text request: %d %s, want 200", resp.StatusCode, got)
	}
}

// An audio request's reservation is priced at the audio rates: 100,000
// output tokens reserve $8 at $80 per million (text rates: $1), so a $5
// quota refuses it before anything is forwarded.
func TestAudioReservationPricedAtAudioRates(t *testing.T) {
	h, _ := startAudio(t, 5, "")
	before := h.mock.Requests.Load()
	body := `{"model":"gpt-4o-audio-preview","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},` +
		`"max_completion_tokens":100000,"messages":[{"role":"user","content":"tell a long story"}]}`
	resp, got := h.do("/v1/chat/completions", body)
	if resp.StatusCode == 200 || h.mock.Requests.Load() != before {
		t.Errorf("an $8 audio reservation under a $5 quota: %d %s, want refused and not forwarded", resp.StatusCode, got)
	}
	// The same reservation in text fits.
	resp, got = h.do("/v1/chat/completions", strings.Replace(body, `"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},`, "", 1))
	if resp.StatusCode != 200 {
		t.Errorf("a $1 text reservation under a $5 quota: %d %s, want 200", resp.StatusCode, got)
	}
}

// An assistant message that refers to an earlier audio answer by id pulls
// that audio into the input the upstream bills, which the body does not
// hold: it is reserved as hidden context (x-llmguard-estimate: partial).
func TestEarlierAudioAnswerIsHiddenContext(t *testing.T) {
	h, _ := startAudio(t, 100, "")
	resp, got := h.do("/v1/chat/completions", `{"model":"gpt-4o-audio-preview","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},`+
		`"messages":[{"role":"user","content":"hi"},{"role":"assistant","audio":{"id":"audio_abc"}},{"role":"user","content":"again"}],"max_completion_tokens":10}`)
	if resp.StatusCode != 200 || resp.Header.Get("x-llmguard-estimate") != "partial" {
		t.Errorf("%d estimate %q %s, want 200 with x-llmguard-estimate: partial", resp.StatusCode, resp.Header.Get("x-llmguard-estimate"), got)
	}
}
