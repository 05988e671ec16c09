package mockllm

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/weigher"
)

// maxJSONDepth is the nesting the mock accepts in a request body, checked by
// a flat scan (a real upstream has some limit too; encoding/json's is 10000).
const maxJSONDepth = 10000

// bytesPerToken is the input a [Options.ByteCountedChat] mock reports: one
// token per 4 bytes of body, OpenAI's rule of thumb for English text
// (https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them).
const bytesPerToken = 4

// chatEstimate is the weigher's estimate of a chat body, or, for a mock
// with [Options.ByteCountedChat], the same fields read with gjson and the
// input taken as len(body)/bytesPerToken tokens.
func (s *Server) chatEstimate(body []byte) weigher.Estimate {
	if !s.byteCounted {
		return s.w.Chat(body)
	}
	f := gjson.GetManyBytes(body, "model", "stream", "stream_options.include_usage", "max_completion_tokens", "max_tokens")
	out := int64(16)
	if f[3].Exists() {
		out = f[3].Int()
	} else if f[4].Exists() {
		out = f[4].Int()
	}
	return weigher.Estimate{Parsed: true, Model: f[0].String(), Stream: f[1].Bool(), IncludeUsage: f[2].Bool(),
		InputTokens: int64(len(body) / bytesPerToken), OutputTokens: out}
}

// openAIStreamError is the in-band error chunk of OpenAI's chat and
// completions streams.
const openAIStreamError = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`

// chat answers /v1/chat/completions
// (https://platform.openai.com/docs/api-reference/chat) and its Azure paths.
// An Azure stream (fl == flavorAzure) opens with the prompt's content-filter
// chunk, which has no choices (see azurePromptFilterChunk). The answer has
// the body's n choices (see chatShapeOf), each a text reply or, when the
// request forces a function tool, a call to it.
func (s *Server) chat(ctx *fasthttp.RequestCtx, fl flavor) {
	body := ctx.Request.Body()
	if !jsonscan.Valid(body, maxJSONDepth) {
		badJSON(ctx)
		return
	}
	st := steerOf(&ctx.Request.Header)
	est := s.chatEstimate(body)
	est.InputTokens = st.inputTokens(est.InputTokens)
	model := est.Model
	shape := chatShapeOf(body, &ctx.Request.Header)
	// The weigher's output estimate is n completions' (and a prediction's);
	// each choice gets its share.
	n := st.outputTokens(est.OutputTokens / int64(shape.n))
	parts := replyWords(n)
	if shape.tool == "" && wantsJSONReply(body) {
		parts = asJSONReply(parts)
	}
	// Audio and rejected prediction tokens are billed on top of the text
	// (x-mock-audio-*, x-mock-rejected-prediction-tokens).
	in, out := est.InputTokens+st.audioIn, n*int64(shape.n)+st.audioOut+st.rejected
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":%d},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":%d,"accepted_prediction_tokens":0,"rejected_prediction_tokens":%d}}`,
		in, out, in+out, st.audioIn, st.audioOut, st.rejected)
	id := "chatcmpl-mock" + strconv.FormatInt(time.Now().UnixNano(), 36)
	created := time.Now().Unix()
	finish := "stop"
	if shape.tool != "" {
		finish = "tool_calls"
	}

	if !est.Stream {
		text, _ := jsonString(strings.Join(parts, ""))
		choices := make([]string, shape.n)
		for c := range choices {
			msg := `"content":` + text
			if shape.tool != "" {
				args, _ := jsonString(toolArgsOpen + strings.Join(parts, "") + toolArgsClose)
				msg = `"content":null,"tool_calls":[{"id":` + js(shape.callID(c)) + `,"type":"function","function":{"name":` + js(shape.tool) + `,"arguments":` + args + `}}]`
			}
			choices[c] = fmt.Sprintf(`{"index":%d,"message":{"role":"assistant",%s,"refusal":null},"logprobs":null,"finish_reason":%q}`, c, msg, finish)
		}
		u := `,"usage":` + usage
		if st.noUsage {
			u = ""
		}
		jsonBody(ctx, st, fmt.Sprintf(`{"id":%q,"object":"chat.completion","created":%d,"model":%q,"choices":[%s]%s%s,"system_fingerprint":"fp_mock"}`,
			id, created, model, strings.Join(choices, ","), u, st.tierField()))
		return
	}

	includeUsage := est.IncludeUsage && !st.noUsage
	s.stream(ctx, st, func(o *sse) end {
		chunk := func(index int, delta, finish, u string) bool {
			fin := "null"
			if finish != "" {
				fin = strconv.Quote(finish)
			}
			choices := `[{"index":` + strconv.Itoa(index) + `,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fin + `}]`
			if u != "" {
				choices = "[]"
			}
			usageField := ""
			if includeUsage {
				usageField = `,"usage":null`
				if u != "" {
					usageField = `,"usage":` + u
				}
			}
			return o.event("", fmt.Sprintf("{\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":%d,\"model\":%q%s,\"system_fingerprint\":\"fp_mock\",\"choices\":%s%s}",
				id, created, model, st.tierField(), choices, usageField))
		}
		// toolDelta is a delta of the call's arguments (OpenAI streams a
		// call's id, type and name once, then its arguments in pieces).
		toolDelta := func(args string) string {
			a, _ := jsonString(args)
			return `{"tool_calls":[{"index":0,"function":{"arguments":` + a + `}}]}`
		}
		if fl == flavorAzure && !o.event("", azurePromptFilterChunk(includeUsage)) {
			return endAborted
		}
		for c := range shape.n {
			first := `{"role":"assistant","content":"","refusal":null}`
			if shape.tool != "" {
				first = `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":` + js(shape.callID(c)) + `,"type":"function","function":{"name":` + js(shape.tool) + `,"arguments":""}}],"refusal":null}`
			}
			if !chunk(c, first, "", "") {
				return endAborted
			}
			if shape.tool != "" && !chunk(c, toolDelta(toolArgsOpen), "", "") {
				return endAborted
			}
		}
		stop, how, early := st.stopAt(len(parts))
		for i, p := range parts {
			if early && i == stop {
				break
			}
			o.pause()
			for c := range shape.n {
				d, _ := jsonString(p)
				d = `{"content":` + d + `}`
				if shape.tool != "" {
					d = toolDelta(p)
				}
				if !chunk(c, d, "", "") {
					return endAborted
				}
			}
		}
		if early {
			return openAIStop(o, how)
		}
		for c := range shape.n {
			if shape.tool != "" && !chunk(c, toolDelta(toolArgsClose), "", "") {
				return endAborted
			}
			if !chunk(c, `{}`, finish, "") {
				return endAborted
			}
		}
		if includeUsage {
			chunk(0, "", "", usage)
		}
		if !o.event("", "[DONE]") {
			return endAborted
		}
		return endCompleted
	})
}

// maxChoices is the most choices the mock answers; a larger n reads as it.
const maxChoices = 128

// chatShape is the form of a chat answer the body asks for: its number of
// choices, and the function each calls ("" for a text reply).
type chatShape struct {
	n    int
	tool string
	id   string // the answer's call id stem
}

// callID is choice c's tool call id.
func (sh chatShape) callID(c int) string { return sh.id + "_" + strconv.Itoa(c) }

// chatShapeOf reads n (1 when absent or below 1, at most maxChoices) and
// the function to call (chatTool).
func chatShapeOf(body []byte, h *fasthttp.RequestHeader) chatShape {
	sh := chatShape{n: 1, tool: chatTool(body, h)}
	if n := gjson.GetBytes(body, "n"); n.Type == gjson.Number {
		sh.n = int(max(1, min(n.Int(), maxChoices)))
	}
	if sh.tool != "" {
		sh.id = newID("call_")
	}
	return sh
}

// openAIStop ends a chat or completions stream early: the in-band error
// chunk, or nothing before a cut.
func openAIStop(o *sse, how end) end {
	if how == endErrored && !o.event("", openAIStreamError) {
		return endAborted
	}
	return how
}
