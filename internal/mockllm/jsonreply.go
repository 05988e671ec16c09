package mockllm

import (
	"slices"

	"github.com/tidwall/gjson"
)

// A request that asks for JSON output gets its reply words as the JSON
// object {"text":"<the reply words>"}, so that an SDK's structured-output
// helper (openai's chat.completions.parse, responses.parse) reads an answer
// it can decode; before, it got the words alone and the SDK failed with
// "Unexpected token" (trial20). The object does not follow the request's
// schema: the mock has no model to fill one in. Usage is unchanged (the
// reply's words), and a forced tool call is answered as before.
const (
	jsonReplyOpen  = `{"text":"`
	jsonReplyClose = `"}`
)

// wantsJSONReply reports whether body asks for JSON output: a
// response_format (chat), text.format (Responses), output_config.format or
// output_format (Messages' structured outputs) whose type is json_object or
// json_schema.
func wantsJSONReply(body []byte) bool {
	for _, f := range gjson.GetManyBytes(body, "response_format.type", "text.format.type", "output_config.format.type", "output_format.type") {
		if f.Type == gjson.String && (f.Str == "json_object" || f.Str == "json_schema") {
			return true
		}
	}
	return false
}

// asJSONReply is parts with jsonReplyOpen before the first and
// jsonReplyClose after the last, so that they join (and stream) as one JSON
// object; parts is not changed. The words hold no character JSON escapes.
func asJSONReply(parts []string) []string {
	if len(parts) == 0 {
		return []string{jsonReplyOpen + jsonReplyClose}
	}
	out := slices.Clone(parts)
	out[0] = jsonReplyOpen + out[0]
	out[len(out)-1] += jsonReplyClose
	return out
}
