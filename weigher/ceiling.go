package weigher

import "math"

// DefaultCeilingWindow is [Options.CeilingWindow]'s default, in tokens:
// the context window the usage ceiling assumes for a model without a
// configured max_input_tokens (10,000,000: the largest context window a
// production model announces, Llama 4 Scout's,
// https://ai.meta.com/blog/llama-4-multimodal-intelligence/; Gemini's is
// 2,000,000, Claude's and GPT-4.1's 1,000,000).
const DefaultCeilingWindow = 10_000_000

// DefaultCostCeilingMicroUSD is [Options.CostCeilingMicroUSD]'s default:
// $100 for one request not weighed or billed per image. The calls such
// requests make cost dollars at most: OpenAI's price list bills audio by
// the minute ($0.006 for Whisper), an image at cents, and its dearest
// video, a Sora 2 Pro clip, at $0.50 a second of a clip of seconds
// (https://platform.openai.com/docs/pricing). A reported cost above it is
// a fault, not a bill; an operator whose gateway bills more per call
// (fine-tuning through a pass-through route) raises it.
const DefaultCostCeilingMicroUSD = 100_000_000

// ceilingServerTurns is how many model calls the usage ceiling allows a
// request that the upstream may run in a loop of its own
// (Estimate.ServerContext: tools the upstream runs, hidden context), each
// reading up to the whole window again: Anthropic's server-side sampling
// loop pauses after 10 iterations (stop_reason "pause_turn", its server
// tools guide); OpenAI documents no such bound for the Responses API's
// built-in tools (max_tool_calls is optional), so ten times Anthropic's
// is allowed. Beyond it only a tool budget a request names (its web
// searches) raises the count.
const ceilingServerTurns = 100

// ceilingSearchesPerTurn is how many web searches the ceiling allows each
// model call beyond the searches a request reserves: Anthropic runs
// several in one iteration (see defaultWebSearchUses); a search tool of a
// gateway (an ":online" model) names no budget at all.
const ceilingSearchesPerTurn = 10

// ceilingSearches is the fewest web searches (and file searches) the
// ceiling allows any request beyond those it reserves: the searches of
// ceilingServerTurns model calls (1,000). A model may search on its own
// whatever the body asks: Perplexity's Sonar models search on every
// request and Sonar Deep Research dozens of times (num_search_queries,
// billed per query, https://docs.perplexity.ai/getting-started/pricing:
// 74 in the call TestAdv23PerplexityUsageIsCharged replays), which a
// bound of 10 per model call charged as 10. At the dearest search price
// ($10 per 1,000) the bound holds a faulty answer's searches to $10.
const ceilingSearches = ceilingServerTurns * ceilingSearchesPerTurn

// ceilingImageTokensPerCall is the image output tokens the usage ceiling
// allows one image_generation call: the dearest image (perImageTokens of
// no size and quality: 6,240 tokens) and the most partial images a
// stream sends (3, partial_images' maximum in OpenAI's image generation
// guide) at partialImageTokens each.
var ceilingImageTokensPerCall = perImageTokens("", "") + 3*partialImageTokens

// Ceiling is the most the request e estimates can plausibly be billed, in
// tokens per figure (InputTokens, OutputTokens, ImageTokens; WebSearches
// and FileSearches in searches; BilledMicroUSD below; the other figures 0: they are parts of those
// two and bounded by them, or a fee charged once, SearchContext).
// An upstream answer reporting more (prompt_tokens 1e300, a gateway's
// 9e18) is not a bill but a fault: settlement charges it at the ceiling
// (meter.Settlement.Ceiling), so that one answer cannot put a caller into a
// debt it never repays. The ceiling is never below the reservation.
//
// Why no legitimate bill is above it. Let W be the model's context window
// (its configured max_input_tokens, or the larger window the request's
// headers grant (Estimate.LongContext: Anthropic's 1M-context beta,
// LongContextInputTokens), plus max_output_tokens: the price table's or
// the config's; else [Options.CeilingWindow], 10M by default, or the
// granted window if larger),
// n the request's choices (a chat request's n), T its model calls: 1, or
// for a request with ServerContext max(100, web searches + 1) (see
// ceilingServerTurns).
//   - Input. One model call reads at most W tokens, cached and
//     cache-written tokens included (they are parts of the input, as is
//     audio); a body with no server context is all the input, which the
//     estimate counts exactly or errs high (an upper bound, Claude's
//     safety factor), so twice it covers another tokenizer's count and
//     batches (an embeddings or completions list of inputs, each up to
//     W). An OpenAI-compatible server may bill the prompt once per
//     choice. So input ≤ T × n × max(W, 2 × estimated input).
//   - Output. One completion writes at most W tokens (its maximum output
//     is within the window), reasoning and audio tokens included (parts of
//     the output, as every flavor reports them: completion_tokens_details,
//     output_tokens_details; Anthropic's output_tokens hold its thinking);
//     n completions per call, plus a Predicted Outputs prediction's
//     rejected tokens. The reservation (max_tokens × n × prompts for
//     completions) is a bound too. So output ≤ T × max(n × W +
//     prediction, reserved output).
//   - Web searches ≤ the searches reserved + 10 per model call, and at
//     least + 1,000 (ceilingSearches: a model may search on its own);
//     file searches ≤ max(10 per model call, 1,000).
//   - Image tokens (the Responses image_generation tool's) ≤ the
//     reservation, and at least as many calls as file searches of the
//     dearest image with its partial images (ceilingImageTokensPerCall:
//     6.54M tokens, $262 at gpt-image-1's $40 per million, where a
//     faulty tool_usage.image_gen was charged up to 2^31 tokens, $86,000).
//
// BilledMicroUSD is [Options.CostCeilingMicroUSD]: the least bound of a
// cost the upstream reports, and the only one where these token figures
// price none.
//
// Figures saturate at 1e15 tokens. e must not be nil; it is read, never
// kept or changed (a pointer: the 240-byte Estimate passed by value cost
// each settled request about 130 instructions of copying, perf22).
func (w *Weigher) Ceiling(e *Estimate) Usage {
	win, granted := w.ceiling, int64(0) // granted: the input window the headers grant
	if e.LongContext {
		granted = LongContextInputTokens
	}
	var maxIn, maxOut int64
	var set bool
	if r := w.heldChatRules(e.Model); r != nil {
		// A chat model's configuration, held with its rules.
		maxIn, maxOut, set = r.maxIn, r.maxOut, r.windowSet
	} else if m, ok := w.configured(e.Model); ok && m.MaxInputTokens > 0 {
		maxIn, maxOut, set = m.MaxInputTokens, m.MaxOutputTokens, true
	}
	if set {
		win = min(max(maxIn, granted)+max(maxOut, 0), maxTokens)
	} else {
		win = max(win, granted)
	}
	turns := int64(1)
	if e.ServerContext {
		turns = max(ceilingServerTurns, min(e.WebSearches, maxTokens)+1)
	}
	n := max(e.Choices, 1)
	in := mulCap(turns, mulCap(n, max(win, mulCap(2, max(e.InputTokens, 0)))))
	out := mulCap(turns, max(min(mulCap(n, win)+max(e.PredictionTokens, 0), maxTokens), max(e.OutputTokens, 0)))
	unasked := max(mulCap(turns, ceilingSearchesPerTurn), ceilingSearches) // searches no reservation names
	searches := min(max(e.WebSearches, 0)+unasked, maxTokens)
	images := int32(min(max(int64(e.ImageTokens), mulCap(unasked, ceilingImageTokensPerCall)), math.MaxInt32))
	return Usage{InputTokens: in, OutputTokens: out, WebSearches: searches, FileSearches: unasked, ImageTokens: images,
		BilledMicroUSD: w.costCeiling}
}
