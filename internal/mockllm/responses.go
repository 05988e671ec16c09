package mockllm

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// The OpenAI Responses object
// (https://platform.openai.com/docs/api-reference/responses/object), as much
// of it as clients read.
type response struct {
	ID                 string         `json:"id"`
	Object             string         `json:"object"`
	CreatedAt          int64          `json:"created_at"`
	Status             string         `json:"status"`
	Background         bool           `json:"background"`
	Error              *responseError `json:"error"`
	IncompleteDetails  any            `json:"incomplete_details"`
	Instructions       any            `json:"instructions"`
	MaxOutputTokens    *int64         `json:"max_output_tokens"`
	Model              string         `json:"model"`
	Output             []any          `json:"output"`
	ParallelToolCalls  bool           `json:"parallel_tool_calls"`
	PreviousResponseID any            `json:"previous_response_id"`
	Reasoning          map[string]any `json:"reasoning"`
	Store              bool           `json:"store"`
	Temperature        float64        `json:"temperature"`
	Text               map[string]any `json:"text"`
	ToolChoice         string         `json:"tool_choice"`
	Tools              []any          `json:"tools"`
	TopP               float64        `json:"top_p"`
	Truncation         string         `json:"truncation"`
	Usage              *responseUsage `json:"usage"`
	ServiceTier        string         `json:"service_tier,omitempty"`
	User               any            `json:"user"`
	Metadata           map[string]any `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// messageItem is an assistant message output item.
type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputPart `json:"content"`
}

// reasoningItem is a reasoning output item (its text hidden, as for
// OpenAI's reasoning models without a summary).
type reasoningItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Summary []any  `json:"summary"`
}

// webSearchItem is a web_search_call output item: one web search tool
// call, billed per call and not in the usage.
type webSearchItem struct {
	Type   string            `json:"type"`
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Action map[string]string `json:"action"`
}

// webSearchItems are the k web_search_call items x-mock-web-searches asks for.
func webSearchItems(k int64) []any {
	var items []any
	for range min(k, 1000) {
		items = append(items, &webSearchItem{Type: "web_search_call", ID: newID("ws_"), Status: "completed",
			Action: map[string]string{"type": "search", "query": "news"}})
	}
	return items
}

// functionCallItem is a function_call output item: a call of one of the
// request's function tools, its arguments a JSON text.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type outputPart struct {
	Type        string `json:"type"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

// responseUsage is Responses usage, in tokens: InputTokens includes the
// cached, OutputTokens the reasoning tokens.
type responseUsage struct {
	InputTokens         int64            `json:"input_tokens"`
	InputTokensDetails  map[string]int64 `json:"input_tokens_details"`
	OutputTokens        int64            `json:"output_tokens"`
	OutputTokensDetails map[string]int64 `json:"output_tokens_details"`
	TotalTokens         int64            `json:"total_tokens"`
}

func newResponseUsage(in, out, reasoning int64) *responseUsage {
	return &responseUsage{
		InputTokens:         in,
		InputTokensDetails:  map[string]int64{"cached_tokens": 0},
		OutputTokens:        out + reasoning,
		OutputTokensDetails: map[string]int64{"reasoning_tokens": reasoning},
		TotalTokens:         in + out + reasoning,
	}
}

// responseEvent is one Responses streaming event; only the fields of its
// type are set.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *response       `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	Item           any             `json:"item,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Part           *outputPart     `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Logprobs       json.RawMessage `json:"logprobs,omitempty"`
}

// noLogprobs is the empty logprobs list of text events.
var noLogprobs = json.RawMessage("[]")

func (s *Server) responses(ctx *fasthttp.RequestCtx) {
	body := ctx.Request.Body()
	if !jsonscan.Valid(body, maxJSONDepth) {
		badJSON(ctx)
		return
	}
	st := steerOf(&ctx.Request.Header)
	est := s.w.Responses(body)
	est.InputTokens = st.inputTokens(est.InputTokens)
	n := st.outputTokens(est.OutputTokens)
	parts := replyWords(n)
	tool := responsesTool(body, &ctx.Request.Header)
	if tool == "" && wantsJSONReply(body) {
		parts = asJSONReply(parts)
	}
	text := strings.Join(parts, "")
	r := &response{
		ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "completed",
		Model: est.Model, ParallelToolCalls: true, Store: true, Temperature: 1, TopP: 1,
		Reasoning:  map[string]any{"effort": nil, "summary": nil},
		Text:       map[string]any{"format": map[string]string{"type": "text"}},
		ToolChoice: "auto", Tools: []any{}, Truncation: "disabled", Metadata: map[string]any{},
		Output: []any{}, ServiceTier: st.tier,
	}
	if m := gjson.GetBytes(body, "max_output_tokens"); m.Type == gjson.Number {
		v := m.Int()
		r.MaxOutputTokens = &v
	}
	if in := gjson.GetBytes(body, "instructions"); in.Type == gjson.String {
		r.Instructions = in.Str
	}
	var reasoning *reasoningItem
	if st.reasoning > 0 {
		reasoning = &reasoningItem{Type: "reasoning", ID: newID("rs_"), Summary: []any{}}
	}
	msg := messageItem{Type: "message", ID: newID("msg_"), Status: "completed", Role: "assistant",
		Content: []outputPart{{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: text}}}
	var call *functionCallItem
	if tool != "" {
		call = &functionCallItem{Type: "function_call", ID: newID("fc_"), CallID: newID("call_"), Name: tool,
			Arguments: toolArgsOpen + text + toolArgsClose, Status: "completed"}
	}
	usage := newResponseUsage(est.InputTokens, n, st.reasoning)
	if st.noUsage {
		usage = nil
	}

	searches := webSearchItems(st.searches)
	if !est.Stream {
		if reasoning != nil {
			r.Output = append(r.Output, reasoning)
		}
		r.Output = append(r.Output, searches...)
		if call != nil {
			r.Output = append(r.Output, call)
		} else {
			r.Output = append(r.Output, msg)
		}
		r.Usage = usage
		jsonBody(ctx, st, mustJSON(r))
		return
	}

	s.stream(ctx, st, func(o *sse) end {
		seq := 0
		emit := func(e responseEvent) bool {
			e.SequenceNumber = seq
			seq++
			return o.event(e.Type, mustJSON(e))
		}
		snapshot := func(status string) *response {
			c := *r
			c.Status = status
			if status == "in_progress" && c.ServiceTier != "" {
				c.ServiceTier = "auto" // the tier asked; the served one comes at the end
			}
			c.Output = append([]any{}, r.Output...)
			return &c
		}
		if !emit(responseEvent{Type: "response.created", Response: snapshot("in_progress")}) ||
			!emit(responseEvent{Type: "response.in_progress", Response: snapshot("in_progress")}) {
			return endAborted
		}
		idx := 0
		if reasoning != nil {
			if !emit(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: reasoning}) ||
				!emit(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: reasoning}) {
				return endAborted
			}
			r.Output = append(r.Output, reasoning)
			idx++
		}
		for _, ws := range searches {
			if !emit(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: ws}) {
				return endAborted
			}
			r.Output = append(r.Output, ws)
			idx++
		}
		if call != nil {
			return streamCall(o, st, emit, idx, call, parts, func(status string) *response {
				c := snapshot(status)
				c.Output = append(c.Output, call)
				c.Usage = usage
				return c
			})
		}
		zero := 0
		empty := ""
		open := messageItem{Type: "message", ID: msg.ID, Status: "in_progress", Role: "assistant", Content: []outputPart{}}
		if !emit(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &open}) ||
			!emit(responseEvent{Type: "response.content_part.added", ItemID: msg.ID, OutputIndex: &idx, ContentIndex: &zero,
				Part: &outputPart{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: empty}}) {
			return endAborted
		}
		stop, how, early := st.stopAt(len(parts))
		sent := 0
		for i, p := range parts {
			if early && i == stop {
				break
			}
			o.pause()
			if !emit(responseEvent{Type: "response.output_text.delta", ItemID: msg.ID, OutputIndex: &idx, ContentIndex: &zero,
				Delta: &p, Logprobs: noLogprobs}) {
				return endAborted
			}
			sent++
		}
		if early {
			if how == endCut {
				return endCut
			}
			f := snapshot("failed")
			f.Error = &responseError{Code: "server_error", Message: "The model failed to generate a response."}
			if st.errorUsage {
				f.Usage = newResponseUsage(est.InputTokens, int64(sent), st.reasoning)
			}
			if !emit(responseEvent{Type: "response.failed", Response: f}) {
				return endAborted
			}
			return endErrored
		}
		done := msg.Content[0]
		if !emit(responseEvent{Type: "response.output_text.done", ItemID: msg.ID, OutputIndex: &idx, ContentIndex: &zero,
			Text: &text, Logprobs: noLogprobs}) ||
			!emit(responseEvent{Type: "response.content_part.done", ItemID: msg.ID, OutputIndex: &idx, ContentIndex: &zero, Part: &done}) ||
			!emit(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: &msg}) {
			return endAborted
		}
		r.Output = append(r.Output, msg)
		final := snapshot("completed")
		final.Usage = usage
		if !emit(responseEvent{Type: "response.completed", Response: final}) {
			return endAborted
		}
		return endCompleted
	})
}

// streamCall streams a function_call output item at index idx, as OpenAI
// does (https://platform.openai.com/docs/api-reference/responses-streaming):
// the item added with empty arguments, the arguments in pieces (the
// opening, one per reply word, the closing), the arguments done, the item
// done, then response.completed with final("completed"), whose output
// holds the call and whose usage is final. An early stop (x-mock-stream-error,
// -cut) ends after K words as a text reply's does, without usage.
func streamCall(o *sse, st steer, emit func(responseEvent) bool, idx int, call *functionCallItem, parts []string,
	final func(status string) *response) end {
	open := *call
	open.Status, open.Arguments = "in_progress", ""
	if !emit(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &open}) {
		return endAborted
	}
	delta := func(d string) bool {
		return emit(responseEvent{Type: "response.function_call_arguments.delta", ItemID: call.ID, OutputIndex: &idx, Delta: &d})
	}
	if !delta(toolArgsOpen) {
		return endAborted
	}
	stop, how, early := st.stopAt(len(parts))
	for i, p := range parts {
		if early && i == stop {
			break
		}
		o.pause()
		if !delta(p) {
			return endAborted
		}
	}
	if early {
		if how == endCut {
			return endCut
		}
		f := final("failed")
		f.Output, f.Usage = f.Output[:len(f.Output)-1], nil
		f.Error = &responseError{Code: "server_error", Message: "The model failed to generate a response."}
		if !emit(responseEvent{Type: "response.failed", Response: f}) {
			return endAborted
		}
		return endErrored
	}
	if !delta(toolArgsClose) ||
		!emit(responseEvent{Type: "response.function_call_arguments.done", ItemID: call.ID, OutputIndex: &idx, Arguments: &call.Arguments}) ||
		!emit(responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: call}) ||
		!emit(responseEvent{Type: "response.completed", Response: final("completed")}) {
		return endAborted
	}
	return endCompleted
}
