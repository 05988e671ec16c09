package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Image generation (POST /v1/images/generations,
// https://platform.openai.com/docs/api-reference/images/create) is weighed
// for the models billed in tokens: the GPT Image models, whose output is
// image tokens by size and quality (OpenAI's image generation guide, "Cost
// and latency"; their per-image prices divided by the $40 per million image
// output price give the same figures: $0.011, $0.042, $0.167 for a square
// image). Models billed per image (dall-e-2, dall-e-3) are not weighed:
// [TokenBilledImages] tells them apart, and the proxy keeps them unmetered.

// imageOutputTokens are the image tokens of one generated image, by size
// and quality; "auto" (or absent) size and quality take the largest.
var imageOutputTokens = map[string]map[string]int64{
	"1024x1024": {"low": 272, "medium": 1056, "high": 4160},
	"1024x1536": {"low": 408, "medium": 1584, "high": 6240},
	"1536x1024": {"low": 400, "medium": 1568, "high": 6208},
}

// maxImageOutputTokens is the most image tokens one image may take: the
// largest size at high quality.
const maxImageOutputTokens = 6240

// partialImageTokens are the image output tokens each partial image of a
// streamed generation adds ("partial_images": 0–3): 100, per OpenAI's image
// generation guide, "Streaming"
// (https://developers.openai.com/api/docs/guides/image-generation).
const partialImageTokens = 100

// TokenBilledImages reports whether an image model is billed in tokens
// (the GPT Image family, "gpt-image-*"), so that a generation request for
// it can be weighed; per-image-billed models (DALL·E) are not.
func TokenBilledImages(model string) bool { return strings.HasPrefix(model, "gpt-image-") }

// images is the weigher of an image generation request weighed as the model as resolves
// the body's model to (nil: the body's own): InputTokens is the prompt's text, OutputTokens n
// (default 1) images of the size and quality asked (a size the table lacks
// by its pixels: unlistedImageTokens; the largest for "auto" or anything
// unknown), each with its stream's partial images.
func (w *Weigher) images(body []byte, as func(string) string) Estimate {
	d, fallback, ok := w.parseRequest(body, imagesFields)
	if !ok {
		fallback.OutputTokens = maxImageOutputTokens
		return fallback
	}
	defer d.close()
	var model, prompt, n, size, quality, partial gjson.Result
	est := Estimate{Parsed: true}
	d.members(func(k string, v gjson.Result, elems elements) bool {
		switch k {
		case "model":
			model = v
		case "prompt":
			prompt = v
		case "n":
			n = v
		case "size":
			size = v
		case "quality":
			quality = v
		case "stream":
			est.Stream = lenientTrue(v)
		case "partial_images":
			partial = v
		}
		return true
	})
	est.Model = modelNamed(model, as, w.names)
	est.IncludeUsage = est.Stream // image_generation.completed carries it
	est.InputTokens = w.scaled(est.Model, min(countText(w.encoder(est.Model), stringOf(prompt)), maxTokens))
	per := perImageTokens(stringOf(size), stringOf(quality))
	count := int64(1)
	if c, ok := tokenCount(n); ok {
		count = c
	}
	if p, ok := tokenCount(partial); ok && est.Stream {
		// Each partial image of a stream costs partialImageTokens more,
		// taken as per image of the n asked.
		per += min(p, maxTokens/partialImageTokens) * partialImageTokens
	}
	// per and count are each at most maxTokens (1e15): their product could
	// pass int64's range and wrap negative, so it saturates instead.
	est.OutputTokens = maxTokens
	if count <= maxTokens/per {
		est.OutputTokens = min(per*count, maxTokens)
	}
	est.Images = count
	est.ImageSize, est.ImageQuality = shortLower(stringOf(size)), shortLower(stringOf(quality))
	return est
}

// imagesEvent reads one image generation streaming event
// (https://platform.openai.com/docs/api-reference/images-streaming):
// image_generation.completed ends the stream with the usage; partial
// images carry no text to count.
func (s *Stream) imagesEvent(eventType, data []byte) StreamUpdate {
	root, ok := parseObject(data, s.maxDepth)
	if !ok {
		return StreamUpdate{Unread: true}
	}
	switch eventTypeOf(root, eventType) {
	case "image_generation.completed":
		u := StreamUpdate{Done: true}
		if usage, ok := imagesUsageOf(lastGet(root, "usage")); ok {
			s.usage, s.has, s.final = usage, hasInput|hasOutput, true
			u.HasUsage = true
		}
		return u
	case "error":
		return StreamUpdate{Err: true}
	}
	return StreamUpdate{}
}

// shortLower is s lowercased, or "" when longer than 32 bytes (no size or
// quality is), in memory of its own: strings.ToLower returns s itself when
// it has no upper case, and s is a view of the body, which the proxy
// reuses for a later request once this one is forwarded, while the
// estimate lives on until settlement.
func shortLower(s string) string {
	if len(s) > 32 {
		return ""
	}
	return strings.Clone(strings.ToLower(s))
}
