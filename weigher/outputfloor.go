package weigher

import "github.com/tidwall/gjson"

// outputFloor is what a chat or completions body asks of each completion's
// length through vLLM's sampling parameters
// (https://docs.vllm.ai/en/latest/api/vllm/sampling_params.html, also
// accepted by its OpenAI-compatible server as extra body fields):
// "min_tokens", the fewest tokens generated before an end-of-sequence
// token may stop the completion, and "ignore_eos", which makes the model
// go on past the end-of-sequence token until max_tokens, or until the
// context window when the body names no maximum. The zero value asks
// nothing.
type outputFloor struct {
	minTokens int64 // tokens; 0: none
	ignoreEOS bool
}

// read takes the member k of value v into f when it is one of the floor's
// ("min_tokens", a count as tokenCount reads it; "ignore_eos", true as
// lenientTrue reads it, since vLLM's pydantic models coerce "true").
func (f *outputFloor) read(k string, v gjson.Result) {
	switch k {
	case "min_tokens":
		f.minTokens, _ = tokenCount(v)
	case "ignore_eos":
		f.ignoreEOS = lenientTrue(v)
	}
}

// apply is the output reservation of one completion of model, in
// tokens, given out, what the body's maximum (or, when defaulted, the
// model's default) reserves: at least min_tokens, and, for a body that
// ignores the end of sequence with no maximum of its own, the model's
// whole context window (window). defaulted is whether the reservation is
// still the model's default, which a learned reservation may replace: a
// floor the body sets makes it fixed, since a learned figure below it
// would be beaten by every such request. At most maxTokens.
func (f outputFloor) apply(w *Weigher, model string, out int64, defaulted bool) (int64, bool) {
	if f.ignoreEOS && defaulted {
		out, defaulted = max(out, w.window(model)), false
	}
	if f.minTokens > 0 {
		out, defaulted = max(out, f.minTokens), false
	}
	return min(out, maxTokens), defaulted
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
