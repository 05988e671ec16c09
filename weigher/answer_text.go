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
// each must not keep it. hidden reports whether the answer also holds
// output that is not text (the reader's hidden). It never panics.
func answerOutput(k Kind, body []byte, each func(piece string)) (hidden bool) {
	read := k.row().answerText
	if read == nil {
		return false
	}
	return read(gjson.Parse(bodyString(body)), func(r gjson.Result) {
		if r.Type == gjson.String && r.Str != "" {
			each(r.Str)
		}
	})
}

// chatAnswerText reads a chat or legacy completions answer's output
// (https://platform.openai.com/docs/api-reference/chat/object): each
// choice's message content (a string, or the "text" of its parts),
// refusal, reasoning_content, and reasoning or reasoning_details
// (addReasoning; reasoning once when reasoning_content holds the same
// string), each tool call's function name and
// arguments, an audio answer's transcript, and a legacy completion's
// "text"; add is called with each
// value that may be such a string. hidden is set by a reasoning_details
// item of type reasoning.encrypted with data (addReasoning).
func chatAnswerText(root gjson.Result, add func(gjson.Result)) (hidden bool) {
	choice := func(_, c gjson.Result) bool {
		if c.Type == gjson.String { // a choice sent as its text (review20)
			add(c)
			return true
		}
		add(c.Get("text"))
		for _, m := range [...]gjson.Result{c.Get("message"), c.Get("delta")} {
			if m.Type == gjson.String { // a message or delta sent as its text (review20)
				add(m)
				continue
			}
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
			// their streams do in delta.reasoning (counted there);
			// OpenRouter in reasoning_details too, often the same text
			// twice: the longer of the two is counted. A server that
			// sends reasoning and reasoning_content for one text
			// generated it once (vLLM kept reasoning_content beside
			// reasoning from vllm-project/vllm#27752 until v0.16; mlx-vlm
			// keeps reasoning as an alias, Blaizzy/mlx-vlm#1411): the same
			// string is counted once.
			r := m.Get("reasoning")
			same := r.Type == gjson.String && rc.Type == gjson.String && r.Raw == rc.Raw
			hidden = addReasoning(r, m.Get("reasoning_details"), func(v gjson.Result) {
				if !same || v.Index != r.Index || v.Raw != r.Raw {
					add(v)
				}
			}) || hidden
			m.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
				add(call.Get("function.name"))
				add(call.Get("function.arguments"))
				return true
			})
			add(m.Get("function_call.name"))
			add(m.Get("function_call.arguments"))
			// An audio answer's transcript (gpt-4o-audio's message.audio,
			// a stream's delta.audio,
			// https://platform.openai.com/docs/guides/audio): the words
			// its audio speaks, which the model generated with it and the
			// usage bills within completion_tokens (text_tokens beside
			// audio_tokens; each second of speech is several audio
			// tokens, more than its words' text tokens: not verified
			// offline), so counting it never charges above the bill.
			add(m.Get("audio.transcript"))
		}
		return true
	}
	choices := root.Get("choices")
	if !choices.IsObject() {
		choices.ForEach(choice)
		return hidden
	}
	// choices as an object, not the array the API sends: a lenient
	// upstream's one choice sent bare, or its choices keyed by index
	// ({"0": {…}}). Both are read: the object as a choice, and each of
	// its object members as one (the paths the two readings count
	// differ: no string is counted twice).
	choice(gjson.Result{}, choices)
	choices.ForEach(func(k, c gjson.Result) bool {
		if c.IsObject() {
			choice(k, c)
		}
		return true
	})
	return hidden
}

// addReasoning calls add with a chat answer message's reasoning: its
// "reasoning" string r, or the text of its "reasoning_details" items d
// when theirs is the longer. OpenRouter answers both, reasoning_details
// as items of type reasoning.text ("text"), reasoning.summary ("summary")
// and reasoning.encrypted ("data", opaque: not counted here, an answer
// without usage keeps at least its output reservation, one whose usage
// leaves nothing for it is charged it: hidden, Weigher.ParseUsage)
// (https://openrouter.ai/docs/use-cases/reasoning-tokens), the plain
// string often repeating the items' text: counting both would charge the
// reasoning twice, counting only the string would charge nothing for
// details sent alone. hidden reports an item of type reasoning.encrypted
// whose "data" is a non-empty string.
func addReasoning(r, d gjson.Result, add func(gjson.Result)) (hidden bool) {
	var n int
	d.ForEach(func(_, e gjson.Result) bool {
		if e.Get("type").Str == "reasoning.encrypted" && nonEmptyString(e.Get("data")) {
			hidden = true
		}
		for _, t := range [...]gjson.Result{e.Get("text"), e.Get("summary")} {
			if t.Type == gjson.String {
				n += len(t.Str)
			}
		}
		return true
	})
	if r.Type == gjson.String && len(r.Str) >= n {
		add(r)
		return hidden
	}
	d.ForEach(func(_, e gjson.Result) bool {
		add(e.Get("text"))
		add(e.Get("summary"))
		return true
	})
	return hidden
}

// responsesAnswerText reads a Responses answer's output
// (https://platform.openai.com/docs/api-reference/responses/object, the
// "output" items): a message's output_text "text" and "refusal" parts, a
// function call's name and arguments, a custom tool call's name and
// input, an MCP call's name and arguments, and a reasoning item's summary
// and content "text", and the code or commands of the calls
// responsesOutputFields lists: what the stream's *.delta events carry
// (responsesEvent). hidden is set by a reasoning item's non-empty
// encrypted_content.
func responsesAnswerText(root gjson.Result, add func(gjson.Result)) (hidden bool) {
	root.Get("output").ForEach(func(_, it gjson.Result) bool {
		hidden = responsesItemText(it, add) || hidden
		return true
	})
	return hidden
}

// responsesItemText reads one Responses output item's text as
// responsesAnswerText reads each of an answer's: add is called with each
// value that may be such a string; hidden is set by a reasoning item's
// non-empty encrypted_content. An item that is not an object reads
// nothing.
func responsesItemText(it gjson.Result, add func(gjson.Result)) (hidden bool) {
	return responsesOutputFields(it, func(r gjson.Result, _ bool) { add(r) })
}

// responsesOutputFields is responsesItemText that also tells add whether
// each value is of a field the stream's *.delta events carry
// or one no delta carries (see below). The item is walked once
// (each member the first of its name, as gjson's Get finds it), its
// parts once each: an item's text may be long, and a stream reads each
// of its items (itemMemo).
func responsesOutputFields(it gjson.Result, add func(r gjson.Result, streamed bool)) (hidden bool) {
	if !it.IsObject() {
		return false
	}
	var typ, encrypted, name, arguments, input, code, action, operation, content, summary gjson.Result
	it.ForEach(func(k, v gjson.Result) bool {
		var f *gjson.Result
		switch k.Str {
		case "type":
			f = &typ
		case "encrypted_content":
			f = &encrypted
		case "name":
			f = &name
		case "arguments":
			f = &arguments
		case "input":
			f = &input
		case "code":
			f = &code
		case "action":
			f = &action
		case "operation":
			f = &operation
		case "content":
			f = &content
		case "summary":
			f = &summary
		default:
			return true
		}
		if !f.Exists() {
			*f = v
		}
		return true
	})
	hidden = typ.Str == "reasoning" && nonEmptyString(encrypted)
	add(name, false)
	add(arguments, true)
	add(input, true)
	// The call text (see below), each value a string or an array of
	// them.
	for _, c := range [...]struct {
		v        gjson.Result
		streamed bool
	}{{code, true}, {action.Get("command"), false}, {action.Get("commands"), false}, {operation.Get("diff"), true}, {operation.Get("path"), false}} {
		if c.v.IsArray() {
			c.v.ForEach(func(_, e gjson.Result) bool {
				add(e, c.streamed)
				return true
			})
		} else {
			add(c.v, c.streamed)
		}
	}
	for _, parts := range [...]gjson.Result{content, summary} {
		parts.ForEach(func(_, p gjson.Result) bool {
			var text, refusal gjson.Result
			p.ForEach(func(k, v gjson.Result) bool {
				switch {
				case k.Str == "text" && !text.Exists():
					text = v
				case k.Str == "refusal" && !refusal.Exists():
					refusal = v
				}
				return true
			})
			add(text, true)
			add(refusal, true)
			return true
		})
	}
	return hidden
}

// The call text of a Responses output item, beside its name, arguments
// and input: the members that hold text the model wrote
// (https://platform.openai.com/docs/api-reference/responses/object), read
// by responsesOutputFields in this order: a code_interpreter_call's
// "code" (streamed in response.code_interpreter_call_code.delta events),
// a local_shell_call's action.command and a shell_call's action.commands
// (arrays of strings, in no delta), and an apply_patch_call's
// operation.diff (streamed in
// response.apply_patch_call_operation_diff.delta events) and its path (in
// no delta). A custom_tool_call's text is its "input", read with the
// others. Content and summary text, arguments and input are streamed too
// (output_text, refusal, reasoning_text, reasoning_summary_text,
// function_call_arguments, mcp_call_arguments and custom_tool_call_input
// deltas); an item's name is not
// (https://platform.openai.com/docs/api-reference/responses-streaming).

// messagesAnswerText reads an Anthropic Messages answer's output
// (https://platform.claude.com/docs/en/api/messages, "content"): a text
// block's "text", a thinking block's "thinking", and a tool_use block's
// name and input (the object's JSON text, as its input_json_delta events
// stream it): what the stream's deltas carry (messagesEvent). hidden is
// set by a redacted_thinking block with data (encrypted thinking, billed
// as output).
func messagesAnswerText(root gjson.Result, add func(gjson.Result)) (hidden bool) {
	return messagesBlocksText(root.Get("content"), add)
}

// messagesBlocksText reads each block of content, a Messages content list
// (an answer's, or a stream's message_start content), with
// messagesBlockText. hidden: a block is a redacted_thinking block with data.
func messagesBlocksText(content gjson.Result, add func(gjson.Result)) (hidden bool) {
	content.ForEach(func(_, b gjson.Result) bool {
		hidden = messagesBlockText(b, add) || hidden
		return true
	})
	return hidden
}

// messagesBlockText reads one content block b of a Messages answer as
// messagesAnswerText reads each (a stream's message_start content and a
// content_block_start block holding output whole are read so too:
// messagesEvent). hidden: b is a redacted_thinking block with data.
func messagesBlockText(b gjson.Result, add func(gjson.Result)) (hidden bool) {
	if !b.IsObject() {
		return false
	}
	hidden = b.Get("type").Str == "redacted_thinking" && nonEmptyString(b.Get("data"))
	add(b.Get("text"))
	add(b.Get("thinking"))
	if b.Get("type").Str == "tool_use" {
		add(b.Get("name"))
		if in := b.Get("input"); in.IsObject() {
			add(gjson.Result{Type: gjson.String, Str: in.Raw})
		}
	}
	return hidden
}
