package weigher

import (
	"github.com/tidwall/gjson"
)

// answerOutput reads the output text a JSON answer of kind k carries and
// calls each with every piece of it, as the kind table's answerText reader
// for k finds it (chatAnswerText, responsesAnswerText,
// messagesAnswerText); a kind without one reads nothing. It is read only
// for an answer whose usage reports 0 output tokens (body already checked
// by ParseUsage), so that visible output is charged all the same. body is
// read in place, not copied (an answer may be up to max_response_bytes): a
// piece without escapes is a view of body, valid only while body is, so
// each must not keep it. It never panics.
func answerOutput(k Kind, body []byte, each func(piece string)) {
	read := k.row().answerText
	if read == nil {
		return
	}
	read(gjson.Parse(bodyString(body)), func(r gjson.Result) {
		if r.Type == gjson.String && r.Str != "" {
			each(r.Str)
		}
	})
}

// chatAnswerText reads a chat or legacy completions answer's output
// (https://platform.openai.com/docs/api-reference/chat/object): each
// choice's message content (a string, or the "text" of its parts),
// refusal, reasoning_content and reasoning (once when both hold the same
// string), each tool call's function name and
// arguments, and a legacy completion's "text"; add is called with each
// value that may be such a string.
func chatAnswerText(root gjson.Result, add func(gjson.Result)) {
	root.Get("choices").ForEach(func(_, c gjson.Result) bool {
		add(c.Get("text"))
		for _, m := range [...]gjson.Result{c.Get("message"), c.Get("delta")} {
			if !m.IsObject() {
				continue
			}
			content := m.Get("content")
			if content.IsArray() {
				content.ForEach(func(_, part gjson.Result) bool {
					add(part.Get("text"))
					return true
				})
			} else {
				add(content)
			}
			add(m.Get("refusal"))
			rc := m.Get("reasoning_content")
			add(rc)
			// vLLM's reasoning parsers (the member reasoning_content was
			// renamed to) and OpenRouter answer the reasoning here, as
			// their streams do in delta.reasoning (counted there). A
			// server that sends both names for one text generated it once
			// (vLLM kept reasoning_content beside reasoning from
			// vllm-project/vllm#27752 until v0.16; mlx-vlm keeps reasoning
			// as an alias, Blaizzy/mlx-vlm#1411): the same string is
			// counted once.
			if r := m.Get("reasoning"); r.Type != gjson.String || rc.Type != gjson.String || r.Raw != rc.Raw {
				add(r)
			}
			m.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
				add(call.Get("function.name"))
				add(call.Get("function.arguments"))
				return true
			})
			add(m.Get("function_call.name"))
			add(m.Get("function_call.arguments"))
		}
		return true
	})
}

// responsesAnswerText reads a Responses answer's output
// (https://platform.openai.com/docs/api-reference/responses/object, the
// "output" items): a message's output_text "text" and "refusal" parts, a
// function call's name and arguments, a custom tool call's name and
// input, an MCP call's name and arguments, and a reasoning item's summary
// and content "text": what the stream's *.delta events carry
// (responsesEvent).
func responsesAnswerText(root gjson.Result, add func(gjson.Result)) {
	root.Get("output").ForEach(func(_, it gjson.Result) bool {
		if !it.IsObject() {
			return true
		}
		add(it.Get("name"))
		add(it.Get("arguments"))
		add(it.Get("input"))
		for _, parts := range [...]gjson.Result{it.Get("content"), it.Get("summary")} {
			parts.ForEach(func(_, p gjson.Result) bool {
				add(p.Get("text"))
				add(p.Get("refusal"))
				return true
			})
		}
		return true
	})
}

// messagesAnswerText reads an Anthropic Messages answer's output
// (https://platform.claude.com/docs/en/api/messages, "content"): a text
// block's "text", a thinking block's "thinking", and a tool_use block's
// name and input (the object's JSON text, as its input_json_delta events
// stream it): what the stream's deltas carry (messagesEvent).
func messagesAnswerText(root gjson.Result, add func(gjson.Result)) {
	root.Get("content").ForEach(func(_, b gjson.Result) bool {
		if !b.IsObject() {
			return true
		}
		add(b.Get("text"))
		add(b.Get("thinking"))
		if b.Get("type").Str == "tool_use" {
			add(b.Get("name"))
			if in := b.Get("input"); in.IsObject() {
				add(gjson.Result{Type: gjson.String, Str: in.Raw})
			}
		}
		return true
	})
}
