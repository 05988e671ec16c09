package weigher

import "github.com/tidwall/gjson"

// An assistant message of a chat body may carry the reasoning of an
// earlier turn, which OpenAI-compatible upstreams hand back to the model
// as context billed as input: OpenRouter's "reasoning_details" (items of
// type reasoning.text, reasoning.summary and reasoning.encrypted, passed
// on as the provider's thinking blocks:
// https://openrouter.ai/docs/use-cases/reasoning-tokens, "Preserving
// reasoning blocks") and "reasoning" (OpenRouter, Ollama's OpenAI
// compatibility), and "reasoning_content" (vLLM's and DeepSeek's reasoning
// parsers' field). reasoningTokens weighs them.

// maxReasoningDepth bounds how deep reasoningTokens looks into nested
// arrays and objects; deeper values weigh by their bytes.
const maxReasoningDepth = 8

// reasoningTokens counts v, the value (as rawValue gives it) of a chat
// message's reasoning member: a string by its text; an object's "text",
// "summary" and "content" strings by their text, its encrypted "data" (or
// "encrypted_content") at one token per unknownPartBytesPerToken bytes,
// as a Responses reasoning item's encrypted_content; an array or any other
// member by its values, recursively. Every string it holds is so weighed,
// so it counts no less than the text the upstream hands back.
func reasoningTokens(enc counter, v gjson.Result, depth int) int64 {
	switch {
	case v.Type == gjson.String:
		return countRaw(enc, v)
	case v.Type != gjson.JSON:
		return 0
	case depth >= maxReasoningDepth:
		return ceilDiv(int64(len(v.Raw)), unknownPartBytesPerToken)
	case v.IsArray():
		var n int64
		rawElements(v.Raw, func(e gjson.Result) bool {
			n += reasoningTokens(enc, e, depth+1)
			return true
		})
		return n
	}
	var n int64
	rawMembers(v.Raw, func(k string, m gjson.Result) bool {
		switch k {
		case "data", "encrypted_content", "signature":
			// Opaque base64: the upstream decrypts it into reasoning of
			// unknown length; a thinking block's signature is not billed
			// as text but is counted alike, never below.
			if m.Type == gjson.String {
				n += ceilDiv(int64(len(m.Raw)), unknownPartBytesPerToken)
				return true
			}
		case "type", "format", "id", "index":
			// The item's framing, not its text: nothing, unless it holds
			// more than any the API takes (definedMember).
			n += definedMember(enc, k, m)
			return true
		}
		n += reasoningTokens(enc, m, depth+1)
		return true
	})
	return n
}
