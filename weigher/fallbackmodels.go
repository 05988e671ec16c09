package weigher

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// FallbackModelFields are the top-level members of a request body that
// name models, beside its "model", which a gateway may serve (and bill)
// when that model fails: OpenRouter's "models" on its chat, completions
// and Responses endpoints and "fallbacks" on its Messages endpoint
// (https://openrouter.ai/docs/guides/routing/model-fallbacks: "Requests
// are priced using the model that was ultimately used"); LiteLLM proxy's
// client-side "fallbacks", "context_window_fallbacks" and
// "content_policy_fallbacks"
// (https://docs.litellm.ai/docs/proxy/client_side_fallbacks,
// https://docs.litellm.ai/docs/completion/reliable_completions); the
// "fallbacks" and "fallback_config" of gateways such as AssemblyAI's
// (https://www.assemblyai.com/docs/llm-gateway/fallback); OpenRouter's
// "preset", a saved configuration that can set the model and its
// fallbacks (https://openrouter.ai/docs/features/presets), which a
// "model" of "@preset/<name>" names too; LiteLLM's "user_config", a
// request-level router configuration whose model list may route the call
// to any model or deployment it names
// (https://docs.litellm.ai/docs/proxy/clientside_auth: "You can pass a
// litellm.RouterConfig as user_config"); NanoGPT's "advisor", a second
// model the request's model may consult, billed at that model's rates
// (https://docs.nano-gpt.com/api-reference/miscellaneous/advisor);
// LiteLLM proxy's "prompt_id", a stored prompt its prompt management
// (Langfuse, dotprompt, a prompt API…) fetches on chat and Responses
// calls, whose template becomes the messages and whose model and
// parameters (max_tokens…) replace the request's
// (https://docs.litellm.ai/docs/proxy/prompt_management: "change the
// specific model … from your prompt management tool"), input, model and
// output maximum the body does not show; OpenRouter's "route", whose
// "fallback" lets it serve the call with a fallback model of its own
// choosing when the body names no "models" ("OpenRouter will try to pick
// the most appropriate fallback model for you", its routing schema,
// @openrouter/schemas), and whose object form configures its dynamic
// routing.
// None of them is
// a field of the OpenAI or Anthropic endpoints llmguard weighs (chat,
// Responses, completions, embeddings, image generation, Messages), so a
// body holding one, in any case, is refused (FaultModelOutsideBody)
// rather than priced as its "model" alone. An immutable table.
var FallbackModelFields = []string{"models", "fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "fallback_config", "preset",
	"user_config", "advisor", "prompt_id", "route"}

// fallbackModelsKey returns the first top-level member of d whose key is
// one of FallbackModelFields in any case (as sent), with
// FaultModelOutsideBody, or what extraBodyRefused refuses in an
// "extra_body" member (whose members a gateway merges over the body's),
// with FaultExtraBody; "" and FaultNone when there is neither. A "model"
// naming an OpenRouter preset ("@preset/<name>", any case) counts as a
// fallback field, returned as "model"; so does a "tools" list holding an
// advisor tool (advisorTools), returned as "tools".
func fallbackModelsKey(d doc) (key string, f Fault) {
	d.walkKeys(true, func(k string) bool {
		return isFallbackModelField(k) || k == "model" || k == "tools" || isExtraBodyKey(k) || isGatewayRetryField(k)
	}, func(k string, v gjson.Result, _ elements) bool {
		key, f = fallbackMember(k, v)
		return f == FaultNone
	})
	return key, f
}

// fallbackMember returns what fallbackModelsKey refuses in the top-level
// member k of value v (raw or decoded), and why: a FallbackModelFields key
// in any case, a "model" naming a preset or "tools" holding an advisor
// tool (FaultModelOutsideBody), or
// what extraBodyRefused names in an "extra_body" (FaultExtraBody); "" and
// FaultNone when the member is none of them.
func fallbackMember(k string, v gjson.Result) (key string, f Fault) {
	switch {
	case k == "model":
		if m := rawString(v); len(m) >= len("@preset/") && strings.EqualFold(m[:len("@preset/")], "@preset/") {
			return k, FaultModelOutsideBody
		}
	case k == "tools":
		if advisorTools(v) {
			return k, FaultModelOutsideBody
		}
	case isExtraBodyKey(k):
		if bad := extraBodyRefused(k, v); bad != "" {
			return bad, FaultExtraBody
		}
	case isFallbackModelField(k):
		return k, FaultModelOutsideBody
	case isGatewayRetryField(k):
		if n, ok := tokenCount(parsed(v)); ok && n > 0 {
			return k, FaultGatewayRetries
		}
	}
	return "", FaultNone
}

// GatewayRetryFields are the top-level members of a request body with
// which a client asks LiteLLM's proxy to retry a failed or timed-out call
// itself ("num_retries", and "max_retries" handed to the OpenAI client it
// calls with: per-request parameters of litellm.completion,
// https://docs.litellm.ai/docs/completion/reliable_completions): with a
// short "timeout" each attempt runs, and is billed, upstream while the
// gateway gives up on it, and llmguard, which sees one answer, reserves
// and settles one. Neither is a field of the endpoints llmguard weighs, so
// a body giving one a positive count (in any case, a number or a numeric
// string) is refused (FaultGatewayRetries); 0, null or a value that is no
// count passes. An immutable table.
var GatewayRetryFields = []string{"num_retries", "max_retries"}

// isGatewayRetryField reports whether key is one of GatewayRetryFields in
// any case.
func isGatewayRetryField(key string) bool {
	if len(key) < len("max_retries") || len(key) > 2*len("num_retries") {
		return false
	}
	for _, f := range GatewayRetryFields {
		if strings.EqualFold(key, f) {
			return true
		}
	}
	return false
}

// advisorTools reports whether tools (a request's "tools" array, raw or
// decoded) holds an advisor tool: one whose "type" names "advisor" in any
// case, as Anthropic's "advisor_20260301"
// (https://platform.claude.com/docs/en/agents-and-tools/tool-use/advisor-tool),
// OpenRouter's "openrouter:advisor"
// (https://openrouter.ai/blog/announcements/advisor-server-tool/) and
// other gateways' ("orq:advisor") do. Such a tool names a second model
// that reads the whole conversation and writes advice, billed at its own
// rates, which llmguard never priced: the body is refused as one naming
// a model outside "model". A list that cannot name one (no "advisor" in
// its bytes in any ASCII case, and no \u escape that could spell it) is
// not walked.
func advisorTools(tools gjson.Result) bool {
	if !tools.IsArray() || !strings.Contains(tools.Raw, `\u`) && !containsAdvisorFold(tools.Raw) {
		return false
	}
	found := false
	tools.ForEach(func(_, t gjson.Result) bool {
		typ := t.Get("type")
		found = t.IsObject() && typ.Type == gjson.String && containsAdvisorFold(typ.Str)
		return !found
	})
	return found
}

// containsAdvisorFold reports whether s holds "advisor" in any ASCII case
// (each byte of s compared with a letter of the word after its 0x20 bit is
// set, as strings.EqualFold does for ASCII letters). Every such word holds
// a 'v' or a 'V': each is looked for with strings.IndexByte (vector
// instructions, 32 bytes a step), the word compared around every one
// found; a text with more than maxAdvisorHits of them, where a call a
// 'v' would cost more, is searched a word at a time (containsAdvisorWords).
// advisorTools' look at the load benchmark's cold 1 KiB chat body's
// tools list cost about 2,400 instructions a request with the
// word-at-a-time search, about 700 now (callgrind, issue #13; a byte at
// a time it was 11,700). TestContainsAdvisorFoldSameAsBytewise and
// FuzzContainsAdvisorFold compare it with the byte-at-a-time search.
func containsAdvisorFold(s string) bool {
	const word, at = "advisor", 2 // word[at] is its 'v'
	hits := 0
	for _, v := range [...]byte{'v', 'V'} {
		for i := 0; i < len(s); {
			j := strings.IndexByte(s[i:], v)
			if j < 0 {
				break
			}
			if foldedAt(s, i+j-at, word) {
				return true
			}
			if hits++; hits > maxAdvisorHits {
				return containsAdvisorWords(s)
			}
			i += j + 1
		}
	}
	return false
}

// maxAdvisorHits is how many 'v's and 'V's containsAdvisorFold finds by
// IndexByte before it searches the text a word at a time: a text of many
// (a hostile run of them) costs a call each, about 30 instructions, where
// the word-at-a-time search costs about 2 a byte.
const maxAdvisorHits = 32

// containsAdvisorWords is containsAdvisorFold searching eight bytes at a
// time for the word's 'v' (the "has a zero byte" test on the word, 0x20
// set in every byte, xored with 'v': only 'v' and 'V' become 0x76 so),
// and comparing the word around each one found; a flagged byte that is no
// 'v' (a borrow flags a 0x01 above a zero) fails that compare.
func containsAdvisorWords(s string) bool {
	const word, at = "advisor", 2 // word[at] is its 'v'
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:]) | ones*0x20 ^ ones*'v'
		for m := (x - ones) &^ x & msb; m != 0; m &= m - 1 {
			if foldedAt(s, i+bits.TrailingZeros64(m)/8-at, word) {
				return true
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i]|0x20 == 'v' && foldedAt(s, i-at, word) {
			return true
		}
	}
	return false
}

// foldedAt reports whether s holds word (lower-case ASCII letters) at i,
// in any ASCII case; false when word would not fit there.
func foldedAt(s string, i int, word string) bool {
	if i < 0 || i > len(s)-len(word) {
		return false
	}
	for j := 0; j < len(word); j++ {
		if s[i+j]|0x20 != word[j] {
			return false
		}
	}
	return true
}

// isFallbackModelField reports whether key is one of FallbackModelFields
// in any case.
func isFallbackModelField(key string) bool {
	// Every name is 5 to 24 bytes long (32 with the non-ASCII letters that fold to its "s" and "k") and starts with 'm', 'f', 'c', 'p', 'u', 'a' or 'r'.
	if len(key) < 5 || len(key) > 32 {
		return false
	}
	switch key[0] | 0x20 {
	case 'm', 'f', 'c', 'p', 'u', 'a', 'r':
	default:
		return false
	}
	switch len(key) {
	case 5, 6, 7, 9, 11, 15, 24: // the names' own lengths
	default:
		// Only a non-ASCII letter that folds to an ASCII one makes a
		// variant of another length ("messages", "max_tokens" are not).
		if !hasNonASCII(key) {
			return false
		}
	}
	for _, f := range FallbackModelFields {
		if strings.EqualFold(key, f) {
			return true
		}
	}
	return false
}

// hasNonASCII reports whether s holds a byte of 0x80 or above.
func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}
