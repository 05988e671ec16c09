package weigher

import "github.com/tidwall/gjson"

// OpenAI's embeddings "input" is a string, a token array, or an array of
// strings or token arrays (promptTokens' shapes). OpenAI-compatible
// servers take more, and bill what they read: multimodal embedding APIs an
// object per input ({"text": …}, {"image": …}: Jina's
// https://jina.ai/embeddings, OpenRouter's content parts), and vLLM's
// chat-style embedding requests a "messages" list in place of input
// (EmbeddingChatRequest). embeddingsInputTokens weighs their text, and
// what it cannot weigh (an image, an unknown member) marks the estimate
// hidden context; embeddingsMessages weighs messages as chat's.

// embeddingsInputTokens counts an embeddings input p as promptTokens
// counts a prompt (a string by its text, a token by one) and, beyond its
// shapes: an object (the input or an element) by objectInputTokens; a
// string in an inner array by its text (at least one token). hidden is
// set when an object holds what objectInputTokens cannot weigh.
func embeddingsInputTokens(enc counter, p gjson.Result) (tokens int64, hidden bool) {
	switch {
	case p.Type == gjson.String:
		return countText(enc, p.Str), false
	case p.IsObject():
		return objectInputTokens(enc, p)
	case !p.IsArray():
		return 0, false
	}
	p.ForEach(func(_, e gjson.Result) bool {
		var n int64
		h := false
		switch {
		case e.Type == gjson.Number:
			n = 1
		case e.Type == gjson.String:
			n = countText(enc, e.Str)
		case e.IsObject():
			n, h = objectInputTokens(enc, e)
		case e.IsArray():
			n, h = innerInputTokens(enc, e)
		}
		tokens += n
		hidden = hidden || h
		return true
	})
	return min(tokens, maxTokens), hidden
}

// innerInputTokens counts an inner array of an input: a token array by its
// length, a string in it by its text (at least one token), an object by
// objectInputTokens.
func innerInputTokens(enc counter, a gjson.Result) (tokens int64, hidden bool) {
	a.ForEach(func(_, x gjson.Result) bool {
		switch {
		case x.Type == gjson.String:
			tokens += max(countText(enc, x.Str), 1)
		case x.IsObject():
			n, h := objectInputTokens(enc, x)
			tokens += n
			hidden = hidden || h
		default:
			tokens++
		}
		return true
	})
	return tokens, hidden
}

// objectInputTokens counts an input object: its "text" string by its
// text; its "type" is framing; any other member that is not null (an
// "image", an "image_url", nested content) it cannot weigh: hidden.
func objectInputTokens(enc counter, o gjson.Result) (tokens int64, hidden bool) {
	o.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "text" && v.Type == gjson.String:
			tokens += countText(enc, v.Str)
		case k.Str == "type" || v.Type == gjson.Null:
		default:
			hidden = true
		}
		return true
	})
	return tokens, hidden
}

// embeddingsMessages counts vLLM's chat-style embeddings "messages" as a
// chat body's messages (messageTokens); hidden as any message's.
func embeddingsMessages(enc counter, model string, messages gjson.Result) (tokens int64, hidden bool) {
	if messages.Type == gjson.Null || !messages.Exists() {
		return 0, false
	}
	if !messages.IsArray() {
		return 0, true // a shape llmguard cannot read
	}
	messages.ForEach(func(_, m gjson.Result) bool {
		t := messageTokens(enc, model, m)
		tokens += t.text
		hidden = hidden || t.hidden
		return true
	})
	return min(tokens, maxTokens), hidden
}
