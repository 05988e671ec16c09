package weigher

import (
	"bytes"
	"math"
	"strings"

	"github.com/tidwall/gjson"
)

// Hosted tools billed beside the tokens, other than searches and
// containers (searchfee.go, containerfee.go): OpenAI's Responses
// file_search and image_generation tools, Anthropic's code execution.

// codeExecutionReservedMinutes is the container-minutes a Messages request
// naming Anthropic's code execution tool (code_execution_*) is reserved
// and charged (Estimate.CodeExecutionMinutes): Anthropic bills $0.05 an
// hour per container, each execution at least 5 minutes, and its usage
// reports no execution time (its pricing page, "Code execution tool";
// usage.server_tool_use counts web searches and fetches only). One hour
// is taken for one request, whose server-side loop may run the tool
// several times: a non-streaming Messages request is cut after 10
// minutes, and an hour bounds a long stream. The organization's free
// monthly hours and the tool's being free beside web_search_20260209 or
// web_fetch_20260209 are not counted: high, never low.
const codeExecutionReservedMinutes = 60

// codeExecutionMinutes is the container-minutes a Messages request's tools
// reserve: codeExecutionReservedMinutes when one is Anthropic's code
// execution tool (a type starting "code_execution"), else 0.
func codeExecutionMinutes(tools gjson.Result) uint16 {
	found := false
	eachTool(tools, func(typ, _ string, _ gjson.Result) {
		found = found || strings.HasPrefix(typ, "code_execution")
	})
	if found {
		return codeExecutionReservedMinutes
	}
	return 0
}

// toolCallsAllowed is how many calls of one hosted tool a Responses
// request may make: its max_tool_calls (capped at maxWebSearchUses), else
// defaultWebSearchUses, as its web_search tool is reserved
// (responsesSearchCalls).
func toolCallsAllowed(maxCalls gjson.Result) int64 {
	n, ok := tokenCount(maxCalls)
	if !ok {
		return defaultWebSearchUses
	}
	return min(n, maxWebSearchUses)
}

// responsesFileSearchCalls is the file search calls a Responses request
// reserves (Estimate.FileSearches): toolCallsAllowed when its tools hold a
// file_search tool, else 0. OpenAI bills $2.50 per 1,000 calls (its
// pricing page, built-in tools).
func responsesFileSearchCalls(tools, maxCalls gjson.Result) int32 {
	found := false
	eachTool(tools, func(typ, _ string, _ gjson.Result) {
		found = found || typ == "file_search"
	})
	if !found {
		return 0
	}
	return int32(min(toolCallsAllowed(maxCalls), math.MaxInt32))
}

// imageGenTokens is the image output tokens a Responses request's
// image_generation tools may write (Estimate.ImageTokens): for each such
// tool, the tokens of one image of its size and quality (perImageTokens:
// the dearest for "auto", absent or unknown), plus partialImageTokens
// for each of its partial_images when the request streams (OpenAI's
// image generation guide, "Streaming"), times toolCallsAllowed (the model
// may call the tool more than once). At most math.MaxInt32.
func imageGenTokens(tools, maxCalls gjson.Result, stream bool) int32 {
	if !tools.IsArray() || !strings.Contains(tools.Raw, "image_generation") && !strings.Contains(tools.Raw, `\u`) {
		return 0
	}
	var per int64
	tools.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() || t.Get("type").String() != "image_generation" {
			return true
		}
		n := perImageTokens(t.Get("size").String(), t.Get("quality").String())
		if p, ok := tokenCount(t.Get("partial_images")); ok && stream {
			n += min(p, maxTokens/partialImageTokens) * partialImageTokens
		}
		per = min(per+n, maxTokens)
		return true
	})
	calls := toolCallsAllowed(maxCalls)
	if per == 0 {
		return 0
	}
	if calls > math.MaxInt32/per {
		return math.MaxInt32
	}
	return int32(per * calls)
}

// perImageTokens is the image output tokens of one image of size and
// quality (imageOutputTokens; a quality it lacks, "auto" or absent, at
// "high"; a size it lacks by its pixels, unlistedImageTokens, the largest
// for "auto" or absent).
func perImageTokens(size, quality string) int64 {
	if bySize, ok := imageOutputTokens[strings.ToLower(size)]; ok {
		if t, ok := bySize[strings.ToLower(quality)]; ok {
			return t
		}
		return bySize["high"]
	}
	return unlistedImageTokens(size)
}

// imageGenOf is the image output tokens a Responses answer shows its
// image_generation tool wrote (spec.Usage.ImageTokens): the larger of its
// output's image_generation_call items, each by its own size and quality
// (perImageTokens: the dearest when it names none), and its
// tool_usage.image_gen input_tokens plus output_tokens (the image model's
// input counted at the image output price: high, never low). At most
// math.MaxInt32.
func imageGenOf(output, toolUsage gjson.Result) int32 {
	var items int64
	output.ForEach(func(_, it gjson.Result) bool {
		items = min(items+imageItemTokens(it), maxTokens)
		return true
	})
	reported := int64(0)
	if g := toolUsage.Get("image_gen"); g.IsObject() {
		reported = min(usageCount(g.Get("input_tokens")), maxTokens) + min(usageCount(g.Get("output_tokens")), maxTokens)
	}
	return int32(min(max(items, reported), math.MaxInt32))
}

// imageItemTokens is the image output tokens of a Responses output item
// it when it is an image_generation_call (perImageTokens of its size and
// quality: the dearest when it names none), else 0.
func imageItemTokens(it gjson.Result) int64 {
	if !it.IsObject() || it.Get("type").String() != "image_generation_call" {
		return 0
	}
	return perImageTokens(it.Get("size").String(), it.Get("quality").String())
}

// toolUsageOf is a Responses answer's top-level tool_usage object (where
// OpenAI reports its image_generation tool's tokens, image_gen), read only
// when the answer names image_gen; a zero Result otherwise. body has
// passed the answer scan's strict check (no key twice).
func toolUsageOf(body []byte) gjson.Result {
	if !bytes.Contains(body, []byte("image_gen")) {
		return gjson.Result{}
	}
	return gjson.GetBytes(body, "tool_usage")
}
