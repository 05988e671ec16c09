package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// koboldAdapterTokens is the input, in tokens, that KoboldCpp's chat
// adapter adds to a conversation of messages messages: its OpenAI chat
// route writes the conversation as one prompt, each message between the
// adapter's "<role>_start" and "<role>_end" strings (system, user,
// assistant, tools), after its "chat_start" and before its
// "assistant_gen" (transform_genparams, koboldcpp.py,
// https://github.com/LostRuins/koboldcpp). A caller's adapter may make
// those strings as long as it likes, and they are repeated per message,
// so the adapter's text once (every string it holds: chat_start,
// assistant_gen, and one start and end of each role) is not a bound.
//
// The bound here: the adapter's key and value once, plus, per message,
// the longest "…_start" string and the longest "…_end" string (at least
// any one role's pair; a value that is not a string by its JSON text). A non-object adapter is weighed
// by its text alone (KoboldCpp reads no role string from it). At most
// maxTokens.
func koboldAdapterTokens(enc counter, adapter, messages gjson.Result) int64 {
	once := unknownMember(enc, "adapter", adapter)
	if !adapter.IsObject() || !messages.IsArray() {
		return once
	}
	var n int64
	messages.ForEach(func(_, _ gjson.Result) bool {
		n++
		return true
	})
	if n == 0 {
		return once
	}
	// The longest start plus the longest end: at least any one role's
	// pair, with no table of roles (an adapter of a million keys would
	// make one ten times its bytes).
	var start, end int64
	rawMembers(adapter.Raw, func(k string, v gjson.Result) bool {
		switch {
		case strings.HasSuffix(k, "_start"):
			start = max(start, countValue(enc, v))
		case strings.HasSuffix(k, "_end"):
			end = max(end, countValue(enc, v))
		}
		return true
	})
	most := min(start+end, maxTokens)
	return min(once+mulCap(most, n), maxTokens)
}
