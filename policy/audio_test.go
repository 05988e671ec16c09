package policy

import (
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// Audio tokens are priced at the audio rates, never below the text rates;
// cached tokens are taken as audio first, so no split of a cached figure
// between audio and text costs more than MicroUSD charges. The rates are
// gpt-4o-audio-preview's (text $2.50 / $10, audio $40 / $80 per million,
// its model page on developers.openai.com), cached text $1.25.
func TestMicroUSDAudio(t *testing.T) {
	p := USDPerMTok{Input: 2.5, CachedInput: 1.25, Output: 10, AudioInput: 40, AudioOutput: 80}.Price()
	for _, c := range []struct {
		name string
		u    spec.Usage
		want int64 // µUSD
	}{
		{"text only", spec.Usage{InputTokens: 1000, OutputTokens: 100}, 2500 + 1000},
		{"audio in and out", spec.Usage{InputTokens: 1000, AudioInputTokens: 600, OutputTokens: 1300, AudioOutputTokens: 1200},
			400*25/10 + 600*40 + 100*10 + 1200*80},
		{"audio figures past the totals are clamped", spec.Usage{InputTokens: 10, AudioInputTokens: 600, OutputTokens: 5, AudioOutputTokens: 99},
			10*40 + 5*80},
		{"cached tokens are audio first", spec.Usage{InputTokens: 1000, CachedInputTokens: 700, AudioInputTokens: 600},
			// 600 audio at 40; the 100 cached beyond them at 1.25; 300 text at 2.5.
			600*40 + (100*125+99)/100 + 300*25/10},
		{"negative audio reads as none", spec.Usage{InputTokens: 1000, AudioInputTokens: -5}, 2500},
	} {
		if got := p.MicroUSD(c.u); got != c.want {
			t.Errorf("%s: %d µUSD, want %d", c.name, got, c.want)
		}
		// Whatever part of the cached tokens is really audio (cached
		// audio at most the audio rate), the upstream bills no more.
		for audioCached := int64(0); audioCached <= min(c.u.CachedInputTokens, c.u.AudioInputTokens); audioCached += 50 {
			textCached := c.u.CachedInputTokens - audioCached
			text := c.u.InputTokens - max(c.u.AudioInputTokens, 0)
			bill := (textCached*1_250_000 + (text-textCached)*2_500_000 + max(c.u.AudioInputTokens, 0)*40_000_000) / 1_000_000
			if c.u.AudioInputTokens <= c.u.InputTokens && bill > p.MicroUSD(c.u) {
				t.Errorf("%s: %d cached audio tokens bill %d µUSD, above the %d charged", c.name, audioCached, bill, p.MicroUSD(c.u))
			}
		}
	}
	// Without audio prices, an audio token costs a text token's price.
	text := USDPerMTok{Input: 2.5, Output: 10}.Price()
	if got := text.MicroUSD(spec.Usage{InputTokens: 100, AudioInputTokens: 100, OutputTokens: 10, AudioOutputTokens: 10}); got != 250+100 {
		t.Errorf("no audio price: %d µUSD, want text rates (350)", got)
	}
	// In a long-context band whose rates pass the audio rates, audio costs
	// the band's.
	long := p
	long.LongAbove, long.Long = 10, Rates{Input: 50_000_000, CachedInput: 50_000_000, CacheWrite: 50_000_000, CacheWrite1h: 50_000_000, Output: 90_000_000}
	if got := long.MicroUSD(spec.Usage{InputTokens: 100, AudioInputTokens: 100, OutputTokens: 10, AudioOutputTokens: 10}); got != 100*50+10*90 {
		t.Errorf("band above the audio rates: %d µUSD, want %d", got, 100*50+10*90)
	}
}

// A request that sends or asks for audio is priced only by a price with
// both audio rates: otherwise Quote.ForAudio leaves it unpriced, naming the
// key that would price it (the model's, the alias target's, default_price's).
func TestQuoteForAudio(t *testing.T) {
	p := embedded(t, `prices_file: ""
models:
  talk: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, audio_input_usd_per_mtok: 40, audio_output_usd_per_mtok: 80}
  text: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10}
  my-text: {alias_of: text}
  my-talk: {alias_of: talk}
default_price: {input_usd_per_mtok: 50, output_usd_per_mtok: 200}
`)
	for _, c := range []struct {
		model, missing string
	}{
		{"talk", ""}, {"my-talk", ""}, {"talk-2025-06-03", ""},
		{"text", `models."text".audio_input_usd_per_mtok`},
		{"my-text", `models."text".audio_input_usd_per_mtok`},
		{"unknown", "default_price.audio_input_usd_per_mtok"},
	} {
		q := p.Quote(c.model, "").ForAudio()
		if q.Priced != (c.missing == "") || q.Missing != c.missing {
			t.Errorf("%s: priced %v missing %q, want missing %q", c.model, q.Priced, q.Missing, c.missing)
		}
		if q.Priced && (q.Price.AudioInput != 40_000_000 || q.Price.AudioOutput != 80_000_000) {
			t.Errorf("%s: audio rates %d/%d pico-USD", c.model, q.Price.AudioInput, q.Price.AudioOutput)
		}
	}
	// The priority tier keeps the standard audio rates when it sets none.
	pr := embedded(t, `models:
  talk: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, audio_input_usd_per_mtok: 40, audio_output_usd_per_mtok: 80, priority: {input_usd_per_mtok: 5, output_usd_per_mtok: 20}}
`)
	if q := pr.Quote("talk", "priority").ForAudio(); !q.Priced || q.Price.AudioOutput != 80_000_000 {
		t.Errorf("priority: %+v", q)
	}
}

// LiteLLM's audio fields (input_cost_per_audio_token,
// output_cost_per_audio_token) are read, and a models: entry that sets
// only text prices takes them from the file.
func TestParsePricesAudio(t *testing.T) {
	ms, err := config.ParsePrices([]byte(`{"gpt-4o-audio-preview": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05,
		"input_cost_per_audio_token": 4e-05, "output_cost_per_audio_token": 8e-05}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m := ms["gpt-4o-audio-preview"]; m.AudioInputUSDPerMTok != 40 || m.AudioOutputUSDPerMTok != 80 {
		t.Errorf("audio prices %v / %v, want 40 / 80", m.AudioInputUSDPerMTok, m.AudioOutputUSDPerMTok)
	}
}
