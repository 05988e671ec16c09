package weigher

import (
	"github.com/tidwall/gjson"
)

// answerOutput reads the output text a chat or completions JSON answer's
// choices carry and calls each with every piece of it: each message's
// content (a string, or the "text" of its parts), refusal and
// reasoning_content, each tool call's function name and arguments, and a
// legacy completion's "text"; it returns the answer's "model" ("" when
// absent). It is read only for an answer whose usage reports
// completion_tokens 0 (body already checked by ParseUsage), so that
// visible output is charged all the same. body is read in place, not
// copied (an answer may be up to max_response_bytes): a piece without
// escapes is a view of body, valid only while body is, so each must not
// keep it. It never panics.
func answerOutput(body []byte, each func(piece string)) (model string) {
	root := gjson.Parse(bodyString(body))
	add := func(r gjson.Result) {
		if r.Type == gjson.String && r.Str != "" {
			each(r.Str)
		}
	}
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
	return model
}
