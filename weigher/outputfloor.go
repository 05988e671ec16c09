package weigher

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// outputFloor is what a chat or completions body asks of each completion's
// length through vLLM's sampling parameters
// (https://docs.vllm.ai/en/latest/api/vllm/sampling_params.html, also
// accepted by its OpenAI-compatible server as extra body fields):
// "min_tokens", the fewest tokens generated before an end-of-sequence
// token may stop the completion, and "ignore_eos", which makes the model
// go on past the end-of-sequence token until max_tokens, or until the
// context window when the body names no maximum; and OpenRouter's
// "reasoning": {"max_tokens"}, the reasoning budget of a thinking model
// (https://openrouter.ai/docs/use-cases/reasoning-tokens: "Directly
// specifies the maximum number of tokens to use for reasoning";
// "Reasoning tokens are considered output tokens and charged
// accordingly"), which a gateway may grant beside the answer's own
// maximum; and llama.cpp's "n_predict", its own name for the output
// maximum, which its server reads over the body's max_tokens on the chat
// and completions routes ("Exception: if "n_predict" is present, we
// overwrite the value specified earlier by "max_tokens"",
// oaicompat_chat_params_parse, tools/server/server-common.cpp) and which
// its Responses route passes on with every other member
// (server_chat_convert_responses_to_chatcmpl); -1 there generates until
// the end of sequence; and TabbyAPI's "max_length", an alias of
// max_tokens that its sampler request reads when max_tokens is absent
// (BaseSamplerRequest, common/sampling.py: AliasChoices("max_tokens",
// "max_length")), so that a body naming none by the OpenAI name gets the
// alias's maximum, not the model's default; and KoboldCpp's chat
// "adapter" object, whose "max_length" is the output maximum of a chat
// body naming neither max_tokens nor max_completion_tokens
// (transform_genparams, koboldcpp.py: default_max_tok =
// adapter_obj.get("max_length", 512) for the OpenAI chat route, read from
// the body's "adapter" before the server's own); and a Gemini thinking
// budget, extra_body.google.thinking_config.thinking_budget (or the same
// "google" object at the top level, as an OpenAI client's extra_body sends
// it) on Gemini's OpenAI-compatible endpoint
// (https://ai.google.dev/gemini-api/docs/openai, "Thinking"), which its
// thinking guide documents apart from the output maximum
// (https://ai.google.dev/gemini-api/docs/thinking: the model "might
// overflow or underflow the token budget"), and which is billed as output;
// and "reasoning_effort" sent to a Gemini model on that endpoint, which
// Google maps to thinking budgets of 1,024 ("low"), 8,192 ("medium") and
// 24,576 ("high") tokens (https://ai.google.dev/gemini-api/docs/openai,
// "Thinking": "low", "medium" and "high" map to 1K, 8K and 24K thinking
// token budgets; "none" turns thinking off), reserved as that budget
// (gemini). The zero value asks nothing.
type outputFloor struct {
	minTokens int64 // tokens; 0: none
	ignoreEOS bool
	reasoning int64 // tokens, reasoning.max_tokens; 0: none
	thinking  int64 // tokens, a positive Gemini thinking_budget; 0: none (-1, dynamic, names no budget)
	effort    int64 // tokens, the Gemini thinking budget of reasoning_effort (geminiEffortBudget); 0: none
	predict   int64 // tokens, a positive n_predict; 0: none
	maxLength int64 // tokens, a positive max_length; 0: none
	adapter   int64 // tokens, a positive adapter.max_length (KoboldCpp); 0: none
	// unbounded is set by an n_predict that is not a positive count
	// (-1, 0, a word): the body's maximum no longer bounds the output.
	unbounded bool
	// reasons is set by a body that asks for reasoning: a
	// reasoning_effort other than "none" (reasoningEffortAsks), a
	// reasoning object not turned off (reasoningAsks).
	reasons bool
}

// read takes the member k of value v into f when it is one of the floor's
// ("min_tokens", a count as tokenCount reads it; "ignore_eos", true as
// lenientTrue reads it, since vLLM's pydantic models coerce "true";
// "reasoning", an object's "max_tokens" as tokenCount reads it;
// extraBodyField and "google", a thinking budget as geminiThinkingBudget
// reads it; "n_predict", a count as tokenCount reads it, any other value but null,
// which llama.cpp reads as absent, unbounded; "max_length", a count as
// tokenCount reads it; "adapter", an object's "max_length" as tokenCount
// reads it).
func (f *outputFloor) read(k string, v gjson.Result) {
	switch k {
	case "n_predict":
		f.predict, _ = tokenCount(v)
		f.unbounded = f.predict == 0 && v.Type != gjson.Null
	case "max_length":
		f.maxLength, _ = tokenCount(v)
	case "min_tokens":
		f.minTokens, _ = tokenCount(v)
	case "ignore_eos":
		f.ignoreEOS = lenientTrue(v)
	case "reasoning":
		if v.IsObject() {
			f.reasoning, _ = tokenCount(v.Get("max_tokens"))
		}
		f.reasons = f.reasons || reasoningAsks(v)
	case "adapter":
		if v.IsObject() {
			f.adapter, _ = tokenCount(v.Get("max_length"))
		}
	case extraBodyField, "google":
		f.thinking = max(f.thinking, geminiThinkingBudget(k, v))
	case "reasoning_effort":
		f.effort = geminiEffortBudget(v)
		f.reasons = f.reasons || reasoningEffortAsks(v)
	}
}

// hiddenReasoning reports whether a request whose body asked f, of a model
// of family (as Weigher.family gives it), may reason in tokens its stream
// does not show (Estimate.HiddenReasoning): the body asks for reasoning
// (reasons), names a Gemini thinking budget or a Gemini reasoning_effort
// (thinking, effort), or the family reasons unseen by default
// (hiddenReasoningFamily).
func (f *outputFloor) hiddenReasoning(family string) bool {
	return f.asksReasoning() || hiddenReasoningFamily(family)
}

// asksReasoning reports whether the body asked f for reasoning: a
// reasoning or reasoning_effort member that asks for it, or a Gemini
// thinking budget or reasoning_effort (hiddenReasoning less the family's
// own default, which a chat body takes from its model's chatRules).
func (f *outputFloor) asksReasoning() bool {
	return f.reasons || f.thinking > 0 || f.effort > 0
}

// hiddenReasoningFamily reports whether family (a model name as
// Weigher.family gives it: an alias's target, an Azure deployment's mapped
// model) names a model that reasons by default in tokens billed as output
// that its answer does not show. The name is read as canonicalModel
// strips it (any case, a provider or route path before the last '/',
// Bedrock's vendor, OpenAI's "ft:" fine-tune prefix), so that
// "ft:o4-mini-2025-04-16:org::id" and "OpenAI/O3" are o-series models:
//
//   - OpenAI's o-series and gpt-5 and later (reasoningFamily: "reasoning
//     tokens are not visible via the API",
//     https://platform.openai.com/docs/guides/reasoning);
//   - Gemini's (geminiFamily: 2.5 and later models think by default, and
//     the OpenAI-compatible endpoint streams no thoughts unless asked,
//     https://ai.google.dev/gemini-api/docs/thinking). A Gemini model
//     that does not think is so taken for one that does: only a stream
//     without a usage is charged more for it;
//   - xAI's grok-4 and later (xaiHiddenReasoning).
//
// Not listed, as their reasoning is visible text the answer carries and
// llmguard counts (reasoning_content, a thinking block or chunk):
// DeepSeek's deepseek-reasoner and R1, Qwen's QwQ and qwen3 thinking
// models, xAI's grok-3-mini, Mistral's magistral; Claude reasons only when
// the body asks (thinking), which the body marks. docs/hostile-input.md
// (adv53) holds the sources.
func hiddenReasoningFamily(family string) bool {
	c := canonicalModel(family)
	return reasoningFamily(c) || geminiFamily(c) || xaiHiddenReasoning(c)
}

// xaiHiddenReasoning reports whether c, a model name as canonicalModel
// gives it, is one of xAI's grok-4 or later models that reason unseen:
// xAI's reasoning guide (https://docs.x.ai/docs/guides/reasoning) says
// grok-4 and grok-4-fast-reasoning return no reasoning_content in Chat
// Completions, their usage counting reasoning_tokens apart, and grok-4's
// reasoning cannot be turned off. A name that says "non-reasoning"
// (grok-4-fast-non-reasoning, grok-4-1-fast-non-reasoning) is that model
// with reasoning disabled. grok-3 does not reason, and grok-3-mini shows
// its reasoning as reasoning_content.
func xaiHiddenReasoning(c string) bool {
	rest, ok := strings.CutPrefix(c, "grok-")
	if !ok || strings.Contains(c, "non-reasoning") {
		return false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	v, err := strconv.Atoi(rest[:n])
	return err == nil && v >= 4
}

// reasoningEffortAsks reports whether a reasoning_effort v asks the model
// to reason: any value but null and "none" (read ignoring case and
// surrounding space; OpenAI's "none" turns reasoning off on the models
// that take it, https://platform.openai.com/docs/api-reference/chat/create),
// a value llmguard does not know included, which an upstream may read as
// its default effort.
func reasoningEffortAsks(v gjson.Result) bool {
	if !v.Exists() || v.Type == gjson.Null {
		return false
	}
	return v.Type != gjson.String || !strings.EqualFold(strings.TrimSpace(v.Str), "none")
}

// reasoningAsks reports whether a "reasoning" member v (OpenRouter's chat
// and Responses object, https://openrouter.ai/docs/use-cases/reasoning-tokens;
// OpenAI's Responses reasoning configuration) asks the model to reason:
// any value but null and false, unless an object turns it off ("enabled":
// false, or an "effort" of "none": reasoningEffortAsks; a null effort
// leaves the upstream's default). One with "exclude": true asks for
// reasoning whose tokens the answer leaves out.
func reasoningAsks(v gjson.Result) bool {
	switch {
	case !v.Exists() || v.Type == gjson.Null || v.Type == gjson.False:
		return false
	case v.IsObject():
		if e := v.Get("enabled"); e.Type == gjson.False {
			return false
		}
		if e := v.Get("effort"); e.Type == gjson.String && !reasoningEffortAsks(e) {
			return false // "none"; a null effort is the upstream's default
		}
	}
	return true
}

// gemini folds the budget of a reasoning_effort (effort) into the thinking
// budget when family, the request's model family, is a Gemini model
// (geminiFamily): its OpenAI-compatible endpoint thinks that budget on top
// of the answer, billed as output, as it does a thinking_budget (the
// larger when both are named). Other models bound their reasoning by the
// body's maximum (OpenAI's reasoning models count it within
// max_completion_tokens), so their reasoning_effort reserves nothing more.
func (f *outputFloor) gemini(family string) {
	if f.effort > 0 && geminiFamily(family) {
		f.thinking = max(f.thinking, f.effort)
	}
}

// geminiEffortBudget is the thinking budget, in tokens, that Gemini's
// OpenAI-compatible endpoint gives a reasoning_effort v
// (https://ai.google.dev/gemini-api/docs/openai, "Thinking"): 1,024 for
// "low", 8,192 for "medium", 24,576 for "high" (read ignoring case and
// surrounding space); 0 for "none", any other value, or none.
func geminiEffortBudget(v gjson.Result) int64 {
	if v.Type != gjson.String {
		return 0
	}
	switch strings.ToLower(strings.TrimSpace(v.Str)) {
	case "low":
		return 1024
	case "medium":
		return 8192
	case "high":
		return 24576
	}
	return 0
}

// geminiFamily reports whether family (a model name as Weigher.family
// gives it) names a Gemini model: "gemini" in it, in any case
// ("gemini-2.5-flash", "google/gemini-2.5-pro", "models/gemini-2.0-flash").
func geminiFamily(family string) bool {
	return strings.Contains(strings.ToLower(family), "gemini")
}

// apply is the output reservation of one completion of model, in
// tokens, given out, what the body's maximum (or, when defaulted, the
// model's default) reserves: at least min_tokens, and, for a body that
// ignores the end of sequence with no maximum of its own, the model's
// whole context window (window); plus the reasoning budget (OpenRouter's
// or Gemini's thinking budget, the larger when both are named), which the
// answer's maximum may not hold (an upstream that counts reasoning within
// it is over-reserved by at most the budget, which reconciliation gives
// back). An n_predict replaces the maximum on llama.cpp, which other
// servers ignore, and a max_length stands for it on TabbyAPI: the largest
// is reserved, and an unbounded one reserves at least the model's
// default, as a body naming no maximum does (and lets ignore_eos run to
// the window). A KoboldCpp adapter.max_length is reserved, at least the
// model's default, when the body names no maximum (defaulted). defaulted is whether the reservation is
// still the model's default, which a learned reservation may replace: a
// floor the body sets makes it fixed, since a learned figure below it
// would be beaten by every such request. At most maxTokens.
func (f outputFloor) apply(w *Weigher, model string, out int64, defaulted bool) (int64, bool) {
	noMax := defaulted || f.unbounded
	if defaulted && f.adapter > 0 {
		// KoboldCpp's default in place of the model's: a cap that adds
		// max_completion_tokens bounds it, so it does not pin.
		out, defaulted = max(out, f.adapter), false
	}
	if f.predict > 0 || f.maxLength > 0 {
		out, defaulted = max(out, f.predict, f.maxLength), false
	}
	if f.unbounded && !defaulted {
		out = max(out, w.defaultOutput(model))
	}
	if f.ignoreEOS && noMax {
		out, defaulted = max(out, w.window(model)), false
	}
	if f.minTokens > 0 {
		out, defaulted = max(out, f.minTokens), false
	}
	if budget := max(f.reasoning, f.thinking); budget > 0 {
		// Two gateways' names for one thinking budget: the larger.
		out, defaulted = min(out, maxTokens)+budget, false
	}
	return min(out, maxTokens), defaulted
}

// pins reports whether the body asks for output its maximum does not
// bound (Estimate.OutputPinned): a reasoning or thinking budget, a min_tokens, an
// n_predict (which llama.cpp reads in place of the maximum a cap would
// lower) or a max_length (which TabbyAPI reads when the body has no
// max_tokens, as after a cap that adds max_completion_tokens).
func (f outputFloor) pins() bool {
	return f.reasoning > 0 || f.thinking > 0 || f.minTokens > 0 || f.predict > 0 || f.unbounded || f.maxLength > 0
}

// window is model's whole context window, in tokens: its largest input
// (maxInput: Model.MaxInputTokens, the context window less the output,
// else Options.DefaultMaxInputTokens) plus its documented maximum output
// (Model.MaxOutputTokens, 0 when unknown). A completion that ignores the
// end of sequence with no maximum runs until the prompt and the output
// fill it (vLLM: max_tokens defaults to the context length less the
// prompt).
func (w *Weigher) window(model string) int64 {
	n := w.maxInput(model)
	if m, ok := w.configured(model); ok {
		n += m.MaxOutputTokens
	}
	return min(n, maxTokens)
}
