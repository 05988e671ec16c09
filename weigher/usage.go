package weigher

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// ParseChatUsage reads the usage of an OpenAI chat completion JSON response
// (https://platform.openai.com/docs/api-reference/chat/object):
// usage.prompt_tokens (cached tokens included), usage.completion_tokens
// (reasoning tokens included), usage.prompt_tokens_details.cached_tokens and
// usage.completion_tokens_details.reasoning_tokens. ok is false when body has
// no usage object whose prompt_tokens and completion_tokens are both
// non-negative numbers (numeric strings accepted), or is not valid JSON
// nested at most [DefaultMaxDepth] levels (checked by a flat scan before
// anything parses it); then u is zero and the caller keeps its reservation.
// Missing or negative detail figures (cached, reasoning) read as 0. It never
// panics and never keeps body.
func ParseChatUsage(body []byte) (u Usage, ok bool) { return parseChatUsage(body, 0) }

func parseChatUsage(body []byte, maxDepth int) (Usage, bool) {
	s, ok := upstreamDoc(body, maxDepth)
	if !ok {
		return Usage{}, false
	}
	return usageOf(gjson.Get(s, "usage"))
}

// usageOf reads an OpenAI chat "usage" object.
func usageOf(v gjson.Result) (u Usage, ok bool) {
	if !v.IsObject() {
		return Usage{}, false
	}
	var prompt, completion gjson.Result
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			prompt = f
		case "completion_tokens":
			completion = f
		case "prompt_tokens_details":
			u.CachedInputTokens = usageCount(f.Get("cached_tokens"))
		case "completion_tokens_details":
			u.ReasoningTokens = usageCount(f.Get("reasoning_tokens"))
		}
		return true
	})
	u.InputTokens, u.OutputTokens, ok = usagePair(prompt, completion)
	if !ok {
		return Usage{}, false
	}
	return u, true
}

// usagePair reads the input and output figures of a usage object. Both must
// be non-negative numbers (or numeric strings): a usage with either missing,
// null, negative or not a number is unreadable, and the caller keeps the
// reservation or its local count rather than take it as a free call.
func usagePair(in, out gjson.Result) (input, output int64, ok bool) {
	input, okIn := tokenCount(in)
	output, okOut := tokenCount(out)
	if !okIn || !okOut {
		return 0, 0, false
	}
	return input, output, true
}

func usageCount(r gjson.Result) int64 {
	n, _ := tokenCount(r)
	return n
}

// Chunk is what one SSE "data:" payload of a streamed OpenAI chat completion
// (https://platform.openai.com/docs/api-reference/chat-streaming) says. The
// zero value is a payload with nothing of interest.
type Chunk struct {
	// Usage is the chunk's usage, in tokens, when HasUsage.
	Usage Usage
	// HasUsage is true when the chunk carries a usage object whose input and
	// output figures are readable (see usagePair); an unreadable one is not
	// taken as the stream's final usage.
	HasUsage bool
	// UsageOnly is true for the extra chunk stream_options.include_usage
	// adds: "choices" is an empty array and a usage object is present. The proxy drops
	// it when it asked for usage on the client's behalf.
	UsageOnly bool
	// Text is the streamed output of the chunk, for local counting: every
	// choice's delta.content, delta.refusal and
	// delta.tool_calls[].function.arguments (and legacy
	// delta.function_call.arguments), concatenated. It does not alias data.
	Text string
	// Done is true when the payload is the terminating "[DONE]".
	Done bool
	// Err is true for an {"error": …} payload.
	Err bool
}

var doneMarker = []byte("[DONE]")

// ParseChatChunk reads one SSE data payload (the bytes after "data:") of a
// streamed chat completion. Garbage yields the zero Chunk; it never panics
// and never keeps data.
func ParseChatChunk(data []byte) Chunk { return parseOpenAIChunk(data, false, 0) }

// parseOpenAIChunk reads a chat (completions false) or legacy completions
// chunk nested at most maxDepth levels (0: DefaultMaxDepth).
func parseOpenAIChunk(data []byte, completions bool, maxDepth int) Chunk {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneMarker) {
		return Chunk{Done: true}
	}
	root, ok := parseObject(data, maxDepth)
	if !ok {
		return Chunk{}
	}
	var c Chunk
	var text textJoiner
	emptyChoices, usageObject := false, false
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "error":
			c.Err = v.Type != gjson.Null
		case "usage":
			c.Usage, c.HasUsage = usageOf(v)
			usageObject = v.IsObject()
		case "choices":
			if !v.IsArray() {
				break
			}
			count := 0
			v.ForEach(func(_, ch gjson.Result) bool {
				count++
				if completions {
					text.add(ch.Get("text"))
					return true
				}
				d := ch.Get("delta")
				if !d.IsObject() {
					return true
				}
				text.add(d.Get("content"))
				text.add(d.Get("refusal"))
				d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
					text.add(tc.Get("function.arguments"))
					return true
				})
				text.add(d.Get("function_call.arguments"))
				return true
			})
			emptyChoices = count == 0
		}
		return true
	})
	// The chunk include_usage adds is recognised (and dropped when llmguard
	// asked for it) by its shape, whether or not its figures are readable.
	c.UsageOnly = usageObject && emptyChoices
	c.Text = text.String()
	return c
}

// textJoiner concatenates JSON string values, allocating only for the
// result (one clone for a single piece, a builder for several).
type textJoiner struct {
	first string
	b     strings.Builder
	n     int
}

func (j *textJoiner) add(r gjson.Result) {
	if r.Type != gjson.String || r.Str == "" {
		return
	}
	switch j.n {
	case 0:
		j.first = r.Str
	case 1:
		j.b.WriteString(j.first)
		j.b.WriteString(r.Str)
	default:
		j.b.WriteString(r.Str)
	}
	j.n++
}

func (j *textJoiner) String() string {
	switch j.n {
	case 0:
		return ""
	case 1:
		return strings.Clone(j.first)
	default:
		return j.b.String()
	}
}
