package weigher

import "testing"

// A GPT Image generation reserves its prompt and n images of the size and
// quality asked, in image tokens (the largest for auto or unknown values);
// DALL·E is not token-billed.
func TestImagesEstimate(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		body string
		out  int64
	}{
		{`{"model":"gpt-image-1","prompt":"a cat","size":"1024x1024","quality":"low"}`, 272},
		{`{"model":"gpt-image-1","prompt":"a cat","size":"1024x1024","quality":"high","n":3}`, 3 * 4160},
		{`{"model":"gpt-image-1","prompt":"a cat","size":"1536x1024","quality":"medium"}`, 1568},
		{`{"model":"gpt-image-1","prompt":"a cat","size":"1024x1536"}`, 6240},                      // quality auto: high
		{`{"model":"gpt-image-1","prompt":"a cat","size":"auto","quality":"low"}`, 6240},           // size auto: the largest
		{`{"model":"gpt-image-1","prompt":"a cat","size":"4096x4096","quality":"low"}`, 16 * 4160}, // unlisted: the largest rate by its pixels
		{`{"model":"gpt-image-1","prompt":"a cat","n":0}`, 6240},                                   // n 0 reads as unset
	} {
		e := w.Weigh(KindImages, []byte(tc.body))
		if !e.Parsed || e.OutputTokens != tc.out || e.InputTokens <= 0 {
			t.Errorf("%s: %+v, want output %d and the prompt's input", tc.body, e, tc.out)
		}
	}
	if !TokenBilledImages("gpt-image-1") || !TokenBilledImages("gpt-image-1-mini") || TokenBilledImages("dall-e-3") {
		t.Error("TokenBilledImages tells GPT Image from DALL·E wrongly")
	}
	if !KindImages.OutputUncountable() || KindChat.OutputUncountable() {
		t.Error("an image's output is not text to count; a chat's is")
	}
	u, ok := ParseUsage(KindImages, []byte(`{"created":1,"data":[{"b64_json":"x"}],"usage":{"input_tokens":12,"output_tokens":4160,"total_tokens":4172,"input_tokens_details":{"text_tokens":12,"image_tokens":0}}}`))
	if !ok || u.InputTokens != 12 || u.OutputTokens != 4160 {
		t.Errorf("usage %+v, %v", u, ok)
	}
	s := NewStream(KindImages)
	s.Event([]byte("image_generation.partial_image"), []byte(`{"type":"image_generation.partial_image","b64_json":"x"}`))
	up := s.Event(nil, []byte(`{"type":"image_generation.completed","b64_json":"x","usage":{"input_tokens":12,"output_tokens":272,"total_tokens":284}}`))
	if !up.HasUsage {
		t.Fatal("the completed event's usage was not read")
	}
	if got, src := s.Settle(Estimate{InputTokens: 12, OutputTokens: 272}, 0); src != SourceReported || got.OutputTokens != 272 {
		t.Errorf("stream settled %+v from %v", got, src)
	}
}

// A streamed generation's partial images are reserved: 100 image output
// tokens each, per image asked (adversarial pass of 2026-12-03: n 2 with 3
// partials reserved 544 against up to 1144 billed). Without stream they
// are not sent, and reserve nothing.
func TestPartialImagesReserved(t *testing.T) {
	w := testWeigher(t)
	body := func(extra string) []byte {
		return []byte(`{"model":"gpt-image-1","prompt":"a cat","size":"1024x1024","quality":"low","n":2` + extra + `}`)
	}
	plain := w.Weigh(KindImages, body(`,"stream":true`))
	partial := w.Weigh(KindImages, body(`,"stream":true,"partial_images":3`))
	if want := plain.OutputTokens + 2*3*100; partial.OutputTokens != want {
		t.Errorf("partial_images 3, n 2: output reserved %d, want %d", partial.OutputTokens, want)
	}
	if got := w.Weigh(KindImages, body(`,"partial_images":3`)); got.OutputTokens != plain.OutputTokens {
		t.Errorf("partial_images without stream: %d, want %d", got.OutputTokens, plain.OutputTokens)
	}
	if got := w.Weigh(KindImages, body(`,"stream":true,"partial_images":1e300`)); got.OutputTokens != maxTokens || !got.Parsed {
		t.Errorf("partial_images 1e300: %+v, want the cap %d", got, int64(maxTokens))
	}
	// partial_images at the cap and n at 10000: their product would wrap
	// past int64 and weigh the request negative.
	huge := []byte(`{"model":"gpt-image-1","prompt":"a cat","size":"1024x1024","quality":"low","n":10000,"stream":true,"partial_images":1e300}`)
	if got := w.Weigh(KindImages, huge); got.OutputTokens != maxTokens {
		t.Errorf("n 10000 and partial_images 1e300: output %d, want the cap %d", got.OutputTokens, int64(maxTokens))
	}
}
