package weigher

import "github.com/tidwall/gjson"

// ParseCompletionsUsage reads the usage of a legacy OpenAI completions JSON
// response (https://platform.openai.com/docs/api-reference/completions/object):
// the same usage object as chat (prompt_tokens, completion_tokens and their
// details), so it is [ParseChatUsage] under the flavor's name.
func ParseCompletionsUsage(body []byte) (Usage, bool) { return ParseChatUsage(body) }

// ParseEmbeddingsUsage reads the usage of an OpenAI embeddings JSON response
// (https://platform.openai.com/docs/api-reference/embeddings/object):
// usage.prompt_tokens is the input; total_tokens equals it and there is no
// output. ok is false when body is not JSON or its usage.prompt_tokens is
// not a positive number (or numeric string, as chat's figures): a missing,
// 0, negative or unreadable input is not taken as a free call, and the
// caller keeps its reservation. It never panics and never keeps body.
func ParseEmbeddingsUsage(body []byte) (Usage, bool) { return parseEmbeddingsUsage(body, 0) }

func parseEmbeddingsUsage(body []byte, maxDepth int) (Usage, bool) {
	usage, _, ok := upstreamMembers(body, maxDepth, "usage", "")
	if !ok {
		return Usage{}, false
	}
	in, ok := tokenCount(usage.Get("prompt_tokens"))
	if !ok {
		return Usage{}, false
	}
	return Usage{InputTokens: in}, true
}

// ParseResponsesUsage reads the usage of an OpenAI Responses JSON response
// (https://platform.openai.com/docs/api-reference/responses/object):
// usage.input_tokens (cached included), usage.output_tokens (reasoning
// included), usage.input_tokens_details.cached_tokens and
// usage.output_tokens_details.reasoning_tokens (with what a part larger
// than its figure, or a total_tokens above the two, shows was left out of
// it: withLeftOut), usage.input_tokens_details.cache_write_tokens (cache
// writes, as Azure AI Foundry's Responses usage reports them), and
// WebSearches and FileSearches the web_search_call and file_search_call
// items of its output (billed per call, not in the usage: toolCalls), and
// ServiceTier the tier it was served at (its top-level service_tier,
// https://platform.openai.com/docs/api-reference/responses/object).
// ok is false when body has no usage object whose input_tokens is a
// positive number and whose output_tokens is a non-negative one (0 is a
// valid usage: see reportedPair, and [Weigher.ParseUsage] for the text such
// an answer may still carry), or is not valid JSON; then u is zero and the
// caller keeps its reservation. Missing or negative detail figures read as 0. It never panics
// and never keeps body.
func ParseResponsesUsage(body []byte) (u Usage, ok bool) { return parseResponsesUsage(body, 0) }

func parseResponsesUsage(body []byte, maxDepth int) (Usage, bool) {
	usage, output, tier, ok := upstreamMembersTier(body, maxDepth, "usage", "output")
	if !ok {
		return Usage{}, false
	}
	u, ok := responsesUsageOf(usage)
	if ok {
		u.WebSearches, u.FileSearches = toolCalls(output)
		u.ImageTokens = imageGenOf(output, toolUsageOf(body))
		u.ServiceTier = tier
	}
	return u, ok
}

// toolCalls is how many web_search_call and file_search_call items a
// Responses output array holds: the built-in tool calls OpenAI bills per
// call on top of the tokens (web search $10 per 1,000 calls, file search
// $2.50 per 1,000, Responses API only: its pricing page, built-in tools),
// which its usage does not report.
func toolCalls(output gjson.Result) (web, file int64) {
	output.ForEach(func(_, it gjson.Result) bool {
		switch it.Get("type").String() {
		case "web_search_call":
			web++
		case "file_search_call":
			file++
		}
		return true
	})
	return web, file
}

// responsesUsageOf reads a Responses "usage" object, and what OpenRouter
// says it billed in it (cost, is_byok, cost_details: its Responses usage,
// OpenResponsesUsage, carries the chat usage's cost figures,
// https://openrouter.ai/docs/agent-sdk/typescript/models/openresponsesusage)
// as BilledMicroUSD (billedFigures).
func responsesUsageOf(v gjson.Result) (u Usage, ok bool) {
	if !v.IsObject() {
		return Usage{}, false
	}
	var in, out, total gjson.Result
	var billed billedFigures // OpenRouter's
	var write int64
	v.ForEach(func(k, f gjson.Result) bool {
		if billed.note(k.Str, f) {
			return true
		}
		switch k.Str {
		case "input_tokens":
			in = f
		case "output_tokens":
			out = f
		case "total_tokens":
			total = f
		case "input_tokens_details":
			u.CachedInputTokens = usageCount(f.Get("cached_tokens"))
			u.AudioInputTokens = usageCount(f.Get("audio_tokens")) // as chat's, should an upstream report it
			// Cache writes: Azure AI Foundry's Responses usage
			// (ResponseUsageInputTokensDetails.cache_write_tokens, "the
			// number of cache-write input tokens used", @azure/ai-projects;
			// OpenAI's own documents cached_tokens alone).
			write = usageCount(f.Get("cache_write_tokens"))
		case "output_tokens_details":
			u.ReasoningTokens = usageCount(f.Get("reasoning_tokens"))
			u.AudioOutputTokens = usageCount(f.Get("audio_tokens"))
		}
		return true
	})
	u.InputTokens, u.OutputTokens, ok = reportedPair(in, out)
	if !ok {
		return Usage{}, false
	}
	u = withLeftOut(u, apart{total: usageCount(total), cacheWrite: write})
	u.BilledMicroUSD = billed.microUSD()
	return u, true
}

// parseImagesUsage reads an image generation answer's usage
// (https://platform.openai.com/docs/api-reference/images/object): the
// Responses usage shape, except that its output figure must be positive
// (imagesUsageOf).
func parseImagesUsage(body []byte, maxDepth int) (Usage, bool) {
	u, ok := parseResponsesUsage(body, maxDepth)
	if !ok || u.OutputTokens == 0 {
		return Usage{}, false
	}
	return u, true
}

// imagesUsageOf reads an image generation "usage" object: as
// responsesUsageOf, but an output of 0 is unreadable, since an image's
// output is no text llmguard could count to floor it: the request keeps
// its output reservation.
func imagesUsageOf(v gjson.Result) (Usage, bool) {
	u, ok := responsesUsageOf(v)
	if !ok || u.OutputTokens == 0 {
		return Usage{}, false
	}
	return u, true
}

// ParseMessagesUsage reads the usage of an Anthropic Messages JSON response
// (https://platform.claude.com/docs/en/api/messages, "usage") and normalises
// it: Anthropic's input_tokens excludes both cache fields ("Total input
// tokens in a request is the summation of input_tokens,
// cache_creation_input_tokens, and cache_read_input_tokens", prompt-caching
// guide), so InputTokens = input_tokens + cache_creation_input_tokens +
// cache_read_input_tokens, CachedInputTokens = cache_read_input_tokens,
// CacheWriteTokens = cache_creation_input_tokens (at least the sum of its
// cache_creation breakdown, 5-minute and 1-hour), CacheWrite1hTokens =
// cache_creation.ephemeral_1h_input_tokens, OutputTokens = output_tokens
// (thinking included), WebSearches = server_tool_use.web_search_requests;
// each figure at least the sum over the usage's "iterations" (server-side
// compaction's extra sampling, which the top-level figures leave out:
// iterationFigures). ok is false when body has no usage object with
// input_tokens or output_tokens (an error body, a count_tokens answer), or
// is not valid JSON. An output_tokens of 0 is a valid usage (see
// reportedPair, and [Weigher.ParseUsage] for the text such an answer may
// still carry). It never panics and never keeps body.
func ParseMessagesUsage(body []byte) (u Usage, ok bool) { return parseMessagesUsage(body, 0) }

func parseMessagesUsage(body []byte, maxDepth int) (Usage, bool) {
	usage, _, ok := upstreamMembers(body, maxDepth, "usage", "")
	if !ok {
		return Usage{}, false
	}
	var a anthropicUsage
	a.merge(usage)
	if a.has&(hasInput|hasOutput) != hasInput|hasOutput { // both, as Anthropic always sends
		return Usage{}, false
	}
	return a.usage(), true
}

// anthropicUsage accumulates Anthropic usage fields as reported, before
// normalisation. Each field is a running maximum: a stream's message_delta
// repeats cumulative counts, so the last value is the largest, and a
// placeholder 0 never erases an earlier figure.
type anthropicUsage struct {
	input, cacheWrite, cacheRead, cache1h, output int64
	cache5m                                       int64 // cache_creation.ephemeral_5m_input_tokens
	searches                                      int64 // server_tool_use.web_search_requests
	// billed is the largest cost an OpenRouter usage of the answer
	// reported (its Messages API carries chat's cost, is_byok and
	// cost_details: billedMicroUSD), in micro-USD; 0 for none.
	billed int64
	has    uint8
}

const (
	hasInput uint8 = 1 << iota // input_tokens or a cache field reported
	hasOutput
)

// merge folds an Anthropic usage object into a and reports whether it held
// an input or output figure.
func (a *anthropicUsage) merge(v gjson.Result) bool {
	if !v.IsObject() {
		return false
	}
	read := false
	var top, all, extra iterationFigures // v's own figures; its iterations' sums (all, and those not of type "message")
	var iterations gjson.Result
	var billed billedFigures // OpenRouter's
	v.ForEach(func(k, f gjson.Result) bool {
		if billed.note(k.Str, f) {
			return true
		}
		switch k.Str {
		case "cache_creation":
			top.cache1h = usageCount(f.Get("ephemeral_1h_input_tokens"))
			a.cache1h = max(a.cache1h, top.cache1h)
			a.cache5m = max(a.cache5m, usageCount(f.Get("ephemeral_5m_input_tokens")))
			return true
		case "server_tool_use":
			a.searches = max(a.searches, usageCount(f.Get("web_search_requests")))
			return true
		case "iterations":
			iterations = f
			return true
		}
		// A figure that is not a non-negative number is not a report: a
		// negative output must not make the answer free. An output of 0
		// is one (an answer stopped at once: see reportedPair); an input
		// figure of 0 adds nothing and reports nothing.
		count := tokenCount
		if k.Str == "output_tokens" {
			count = outputCount
		}
		n, ok := count(f)
		if f.Type != gjson.Number || !ok {
			return true
		}
		switch k.Str {
		case "input_tokens":
			top.input = n
			a.input, a.has = max(a.input, n), a.has|hasInput
		case "cache_creation_input_tokens":
			top.cacheWrite = n
			a.cacheWrite, a.has = max(a.cacheWrite, n), a.has|hasInput
		case "cache_read_input_tokens":
			top.cacheRead = n
			a.cacheRead, a.has = max(a.cacheRead, n), a.has|hasInput
		case "output_tokens":
			top.output = n
			a.output, a.has = max(a.output, n), a.has|hasOutput
		default:
			return true
		}
		read = true
		return true
	})
	a.billed = max(a.billed, billed.microUSD())
	if iterations.IsArray() {
		iterations.ForEach(func(_, it gjson.Result) bool {
			var f iterationFigures
			f.read(it)
			all.add(f)
			if it.Get("type").String() != "message" {
				extra.add(f)
			}
			return true
		})
		// Billed: the sum over every iteration; at least the top-level
		// figures plus the iterations that are not the message's own
		// (compaction), should a list leave the message's out.
		top.add(extra)
		a.input = max(a.input, all.input, top.input)
		a.cacheWrite = max(a.cacheWrite, all.cacheWrite, top.cacheWrite)
		a.cacheRead = max(a.cacheRead, all.cacheRead, top.cacheRead)
		a.cache1h = max(a.cache1h, all.cache1h, top.cache1h)
		a.output = max(a.output, all.output, top.output)
	}
	return read
}

// iterationFigures are the token figures of one Anthropic usage object or
// of one entry of its "iterations" list, as reported (a figure that is not
// a non-negative number: 0), or the sum of several, each saturating at
// maxTokens.
//
// A Messages request with server-side compaction (context_management's
// "compact_20260112" edit, https://platform.claude.com/docs/en/build-with-claude/compaction-threshold)
// samples twice: a compaction iteration that reads the whole conversation
// and writes its summary, then the message. Its usage reports each
// sampling in "iterations" ({"type":"compaction"|"message",
// "input_tokens", "output_tokens", "cache_creation_input_tokens",
// "cache_read_input_tokens"}), and its top-level figures leave the
// compaction iteration out: the bill is the sum over the iterations (the
// guide's example: top-level 23,000 input and 1,000 output, a compaction
// iteration of 180,000 and 3,500 beside them).
type iterationFigures struct {
	input, cacheWrite, cacheRead, cache1h, output int64
}

// read sets f to the figures of the usage object it (zero when it is not
// an object).
func (f *iterationFigures) read(it gjson.Result) {
	*f = iterationFigures{}
	if !it.IsObject() {
		return
	}
	f.input = usageCount(it.Get("input_tokens"))
	f.cacheWrite = usageCount(it.Get("cache_creation_input_tokens"))
	f.cacheRead = usageCount(it.Get("cache_read_input_tokens"))
	f.cache1h = usageCount(it.Get("cache_creation.ephemeral_1h_input_tokens"))
	if n, ok := outputCount(it.Get("output_tokens")); ok {
		f.output = n
	}
}

// add adds g's figures to f's, each saturating at maxTokens.
func (f *iterationFigures) add(g iterationFigures) {
	f.input = min(f.input+g.input, maxTokens)
	f.cacheWrite = min(f.cacheWrite+g.cacheWrite, maxTokens)
	f.cacheRead = min(f.cacheRead+g.cacheRead, maxTokens)
	f.cache1h = min(f.cache1h+g.cache1h, maxTokens)
	f.output = min(f.output+g.output, maxTokens)
}

// usage normalises a to OpenAI semantics (see ParseMessagesUsage).
func (a *anthropicUsage) usage() Usage {
	// cache_creation's breakdown is the parts of cache_creation_input_tokens
	// (prompt-caching guide: "ephemeral_5m_input_tokens" and
	// "ephemeral_1h_input_tokens"); a breakdown summing above the total,
	// or sent without it, was written and billed all the same, so the
	// writes are at least its sum.
	write := max(a.cacheWrite, min(a.cache5m+a.cache1h, maxTokens))
	return Usage{
		InputTokens:        min(a.input+write+a.cacheRead, 3*maxTokens),
		CachedInputTokens:  a.cacheRead,
		CacheWriteTokens:   write,
		CacheWrite1hTokens: min(a.cache1h, write),
		OutputTokens:       a.output,
		WebSearches:        a.searches,
		BilledMicroUSD:     a.billed,
	}
}
