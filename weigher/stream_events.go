package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// responsesEvent reads one Responses streaming event
// (https://platform.openai.com/docs/api-reference/responses-streaming):
// every "*.delta" event with a string "delta" is streamed output (except
// response.audio.delta, base64 audio); response.completed,
// response.incomplete and response.failed end the stream with the response
// object, whose usage is final; "error" is an in-band error without usage.
func (s *Stream) responsesEvent(eventType, data []byte) StreamUpdate {
	root, ok := parseObject(data, s.maxDepth)
	if !ok {
		return StreamUpdate{}
	}
	typ := eventTypeOf(root, eventType)
	switch typ {
	case "response.completed", "response.incomplete", "response.failed":
		u := StreamUpdate{Done: true, Err: typ == "response.failed"}
		if usage, ok := responsesUsageOf(root.Get("response.usage")); ok {
			s.usage, s.hasUsage, s.final = usage, true, true
			u.HasUsage = true
		}
		return u
	case "error":
		return StreamUpdate{Err: true}
	case "response.audio.delta":
		return StreamUpdate{}
	}
	if strings.HasSuffix(typ, ".delta") {
		return StreamUpdate{Text: cloneText(root.Get("delta"))}
	}
	return StreamUpdate{}
}

// messagesEvent reads one Anthropic Messages streaming event
// (https://platform.claude.com/docs/en/build-with-claude/streaming):
// message_start carries message.usage (input and cache figures, a
// placeholder output), message_delta a cumulative usage, message_stop ends
// the stream (the usage is then final), content_block_delta carries
// text_delta / input_json_delta / thinking_delta output, "error" is an
// in-band error (e.g. overloaded_error).
func (s *Stream) messagesEvent(eventType, data []byte) StreamUpdate {
	root, ok := parseObject(data, s.maxDepth)
	if !ok {
		return StreamUpdate{}
	}
	switch eventTypeOf(root, eventType) {
	case "message_start":
		return s.anthropicUsage(root.Get("message.usage"))
	case "message_delta":
		return s.anthropicUsage(root.Get("usage"))
	case "message_stop":
		s.final = s.anth.has&hasOutput != 0
		return StreamUpdate{Done: true}
	case "content_block_delta":
		d := root.Get("delta")
		switch d.Get("type").String() {
		case "text_delta":
			return StreamUpdate{Text: cloneText(d.Get("text"))}
		case "input_json_delta":
			return StreamUpdate{Text: cloneText(d.Get("partial_json"))}
		case "thinking_delta":
			return StreamUpdate{Text: cloneText(d.Get("thinking"))}
		}
	case "content_block_start":
		b := root.Get("content_block")
		switch b.Get("type").String() {
		case "text":
			return StreamUpdate{Text: cloneText(b.Get("text"))}
		case "thinking":
			return StreamUpdate{Text: cloneText(b.Get("thinking"))}
		}
	case "error":
		return StreamUpdate{Err: true}
	}
	return StreamUpdate{}
}

// anthropicUsage folds a message_start or message_delta usage object in.
func (s *Stream) anthropicUsage(v gjson.Result) StreamUpdate {
	if !s.anth.merge(v) {
		return StreamUpdate{}
	}
	s.hasUsage = true
	return StreamUpdate{HasUsage: true}
}
