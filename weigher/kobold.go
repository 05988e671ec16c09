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
// the largest pair of one role's start and end (by key prefix; a value
// that is not a string by its JSON text). A non-object adapter is weighed
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
	var pairs map[string]int64 // role prefix → tokens of its start and end
	var most int64
	rawMembers(adapter.Raw, func(k string, v gjson.Result) bool {
		role, ok := strings.CutSuffix(k, "_start")
		if !ok {
			role, ok = strings.CutSuffix(k, "_end")
		}
		if !ok {
			return true
		}
		if pairs == nil {
			pairs = make(map[string]int64)
		}
		t := min(pairs[role]+countValue(enc, v), maxTokens)
		pairs[role] = t
		most = max(most, t)
		return true
	})
	return min(once+mulCap(most, n), maxTokens)
}
