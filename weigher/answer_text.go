package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// answerOutputText returns the "model" of a chat or completions JSON answer
// and the output text its choices carry, joined by newlines: each
// message's content (a string, or the "text" of its parts), refusal and
// reasoning_content, each tool call's function name and arguments, and a
// legacy completion's "text". It is read only for an answer whose usage
// reports completion_tokens 0 (body already checked by ParseUsage), so
// that visible output is charged all the same. Empty when there is none;
// it never panics and never keeps body.
func answerOutputText(body []byte) (model, text string) {
	root := gjson.ParseBytes(body)
	var b strings.Builder
	add := func(r gjson.Result) {
		if r.Type == gjson.String && r.Str != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(r.Str)
		}
	}
	root.Get("choices").ForEach(func(_, c gjson.Result) bool {
		add(c.Get("text"))
		for _, m := range []gjson.Result{c.Get("message"), c.Get("delta")} {
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
			add(m.Get("reasoning_content"))
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
	if m := root.Get("model"); m.Type == gjson.String {
		model = m.Str
	}
	return model, b.String()
}
