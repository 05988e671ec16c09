package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// A body's "extra_body" member is not a field of the APIs llmguard weighs,
// but gateways read it: LiteLLM's proxy hands it to the OpenAI client,
// which merges its members into the body it sends over the top-level ones
// (so {"max_tokens": 10, "extra_body": {"max_tokens": 100000}} asks for
// 100,000), and Gemini's OpenAI-compatible endpoint reads its "google"
// object (thinking_config, cached_content:
// https://ai.google.dev/gemini-api/docs/openai). llmguard weighs the
// top-level members only, so a body whose extra_body holds anything but
// "google" is refused (FaultExtraBody), and a Gemini context cache named
// there is hidden context (geminiCachedContent).

// extraBodyField is the member whose members a gateway merges over the
// body's own.
const extraBodyField = "extra_body"

// isExtraBodyKey reports whether key is extraBodyField in any case.
func isExtraBodyKey(key string) bool {
	return len(key) == len(extraBodyField) && (key[0]|0x20) == 'e' && strings.EqualFold(key, extraBodyField)
}

// extraBodyRefused returns what to refuse in the top-level member key
// (extraBodyField in any case) of value v, a value as rawValue gives it:
// "" when v is null or an object whose only members are "google" objects
// (or null), which Gemini reads and llmguard weighs (geminiCachedContent);
// key for a case variant of extraBodyField (a case-blind decoder reads it
// as the field) or a value that is not an object; else "extra_body.<member>"
// naming the first other member.
func extraBodyRefused(key string, v gjson.Result) string {
	switch {
	case key != extraBodyField:
		return key
	case v.Type == gjson.Null:
		return ""
	case !v.IsObject():
		return key
	}
	bad := ""
	rawMembers(v.Raw, func(k string, m gjson.Result) bool {
		if k == "google" && (m.Type == gjson.Null || m.IsObject()) {
			return true
		}
		bad = key + "." + k
		return false
	})
	return bad
}

// geminiCachedContent reports whether the top-level member key of value v
// names a Gemini context cache, which enters the prompt the upstream bills
// (as cachedContentTokenCount within prompt_tokens) though the body does
// not hold it: "extra_body": {"google": {"cached_content": …}} on Gemini's
// OpenAI-compatible endpoint (its guide, "Context caching"), or the same
// "google" object at the top level, as an OpenAI client's extra_body
// sends it. A null cached_content names none.
func geminiCachedContent(key string, v gjson.Result) bool {
	var path string
	switch key {
	case extraBodyField:
		path = "google.cached_content"
	case "google":
		path = "cached_content"
	default:
		return false
	}
	c := gjson.Get(v.Raw, path)
	return c.Exists() && c.Type != gjson.Null
}

// geminiThinkingBudget is the thinking budget, in tokens, that the
// top-level member key of value v asks of Gemini's OpenAI-compatible
// endpoint: "extra_body": {"google": {"thinking_config":
// {"thinking_budget": N}}}, or the same "google" object at the top level
// (https://ai.google.dev/gemini-api/docs/openai, "Thinking"). Its
// lowerCamelCase spellings (thinkingConfig, thinkingBudget), which a
// protobuf JSON reader takes as the same fields, are read too, and the
// largest named is returned. A count as tokenCount reads it; 0 for none,
// for 0 (thinking off) and for -1 (dynamic thinking, which names no
// budget: the maximum bounds it as it bounds a body with none).
func geminiThinkingBudget(key string, v gjson.Result) int64 {
	var paths *[4]string
	switch key {
	case extraBodyField:
		paths = &thinkingPathsExtraBody
	case "google":
		paths = &thinkingPaths
	default:
		return 0
	}
	var n int64
	for _, p := range paths {
		t, _ := tokenCount(gjson.Get(v.Raw, p))
		n = max(n, t)
	}
	return n
}

// thinkingPaths are the paths of a thinking budget in a "google" object,
// both spellings of each name (geminiThinkingBudget); thinkingPathsExtraBody
// the same under extra_body. Built once, not per request.
var (
	thinkingPaths = [4]string{
		"thinking_config.thinking_budget", "thinking_config.thinkingBudget",
		"thinkingConfig.thinking_budget", "thinkingConfig.thinkingBudget",
	}
	thinkingPathsExtraBody = [4]string{
		"google." + thinkingPaths[0], "google." + thinkingPaths[1],
		"google." + thinkingPaths[2], "google." + thinkingPaths[3],
	}
)
