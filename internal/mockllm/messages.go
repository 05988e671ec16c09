package mockllm

import (
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// anthropicStreamError is the in-band error event of an Anthropic stream.
const anthropicStreamError = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

// claudeInput is the whole input, in tokens, the mock reports for a Messages
// body: the weigher's estimate without the default 1.2 safety factor,
// rounded down.
func (s *Server) claudeInput(body []byte) int64 {
	return s.w.Messages(body).InputTokens * 5 / 6
}

// claudeUsage is an Anthropic usage object, or "" under x-mock-no-usage.
// input is the whole input; the cache fields take their share of it.
func claudeUsage(st steer, input, output int64) string {
	if st.noUsage {
		return ""
	}
	uncached := max(input-st.cacheRead-st.cacheWrite, 0)
	tools := ""
	if st.searches > 0 {
		tools = fmt.Sprintf(`,"server_tool_use":{"web_search_requests":%d}`, st.searches)
	}
	return fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d},"output_tokens":%d,"service_tier":"standard"%s}`,
		uncached, st.cacheWrite, st.cacheRead, st.cacheWrite-st.cacheWrite1h, st.cacheWrite1h, output, tools)
}

// withUsage is `,"usage":u`, or "" when u is.
func withUsage(u string) string {
	if u == "" {
		return ""
	}
	return `,"usage":` + u
}

// messages answers Anthropic's /v1/messages
// (https://docs.anthropic.com/en/api/messages and, streamed,
// https://docs.anthropic.com/en/docs/build-with-claude/streaming).
func (s *Server) messages(ctx *fasthttp.RequestCtx) {
	body := ctx.Request.Body()
	if !jsonscan.Valid(body, maxJSONDepth) {
		anthropicError(ctx, fasthttp.StatusBadRequest, "invalid_request_error", "There was an issue with the format or content of your request.")
		return
	}
	st := steerOf(&ctx.Request.Header)
	est := s.w.Messages(body)
	input := s.claudeInput(body)
	n := st.outputTokens(est.OutputTokens)
	parts := replyWords(n)
	id := newID("msg_")
	ctx.Response.Header.Set("request-id", newID("req_"))
	// A forced tool gets a tool_use block instead of the text
	// (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use),
	// its input {"input":"<the words>"}, streamed as input_json_delta pieces.
	tool := messagesTool(body, &ctx.Request.Header)
	if tool == "" && wantsJSONReply(body) {
		parts = asJSONReply(parts)
	}
	block, stopReason := `{"type":"text","text":`+js(strings.Join(parts, ""))+`}`, "end_turn"
	startBlock := `{"type":"text","text":""}`
	piece := func(p string) string { return `{"type":"text_delta","text":` + js(p) + `}` }
	if tool != "" {
		toolID := newID("toolu_")
		block = `{"type":"tool_use","id":` + js(toolID) + `,"name":` + js(tool) + `,"input":` + toolArgsOpen + strings.Join(parts, "") + toolArgsClose + `}`
		startBlock = `{"type":"tool_use","id":` + js(toolID) + `,"name":` + js(tool) + `,"input":{}}`
		piece = func(p string) string { return `{"type":"input_json_delta","partial_json":` + js(p) + `}` }
		stopReason = "tool_use"
	}

	if !est.Stream {
		jsonBody(ctx, st, fmt.Sprintf(`{"id":%s,"type":"message","role":"assistant","model":%s,"content":[%s],"stop_reason":%s,"stop_sequence":null%s}`,
			js(id), js(est.Model), block, js(stopReason), withUsage(claudeUsage(st, input, n))))
		return
	}

	s.stream(ctx, st, func(o *sse) end {
		start := fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null%s}}`,
			js(id), js(est.Model), withUsage(claudeUsage(st, input, min(n, 1))))
		if !o.event("message_start", start) ||
			!o.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+startBlock+`}`) ||
			!o.event("ping", `{"type": "ping"}`) {
			return endAborted
		}
		blockDelta := func(d string) bool {
			return o.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+d+`}`)
		}
		if tool != "" && !blockDelta(piece(toolArgsOpen)) {
			return endAborted
		}
		stop, how, early := st.stopAt(len(parts))
		for i, p := range parts {
			if early && i == stop {
				break
			}
			o.pause()
			if !blockDelta(piece(p)) {
				return endAborted
			}
		}
		if early {
			if how == endErrored && !o.event("error", anthropicStreamError) {
				return endAborted
			}
			return how
		}
		if tool != "" && !blockDelta(piece(toolArgsClose)) {
			return endAborted
		}
		if !o.event("content_block_stop", `{"type":"content_block_stop","index":0}`) {
			return endAborted
		}
		delta := func(stopReason string, out int64) bool {
			u := ""
			if !st.noUsage {
				u = fmt.Sprintf(`,"usage":{"output_tokens":%d}`, out)
			}
			return o.event("message_delta", `{"type":"message_delta","delta":{"stop_reason":`+stopReason+`,"stop_sequence":null}`+u+`}`)
		}
		if st.splitDelta && !delta("null", n/2) {
			return endAborted
		}
		if !delta(js(stopReason), n) || !o.event("message_stop", `{"type":"message_stop"}`) {
			return endAborted
		}
		return endCompleted
	})
}

// countTokens answers Anthropic's /v1/messages/count_tokens
// (https://docs.anthropic.com/en/api/messages-count-tokens) with the whole
// input /v1/messages reports for the same body.
func (s *Server) countTokens(ctx *fasthttp.RequestCtx) {
	body := ctx.Request.Body()
	if !jsonscan.Valid(body, maxJSONDepth) {
		anthropicError(ctx, fasthttp.StatusBadRequest, "invalid_request_error", "There was an issue with the format or content of your request.")
		return
	}
	ctx.Response.Header.Set("request-id", newID("req_"))
	jsonBody(ctx, steerOf(&ctx.Request.Header), fmt.Sprintf(`{"input_tokens":%d}`, s.claudeInput(body)))
}
