package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Anthropic bills the input it writes to the prompt cache above its input
// price: 1.25× for a 5-minute write, 2× for a 1-hour write
// (https://platform.claude.com/docs/en/build-with-claude/prompt-caching#pricing).
// A body asks for writes with "cache_control" (on a block, a tool, a
// message, or at the top level for automatic caching), the 1-hour TTL
// with "ttl": "1h". Which of its tokens are written is the upstream's
// choice (a prefix long enough to cache, not yet cached), so a body that
// asks is reserved as if all its input were written at the dearest TTL it
// names (Estimate.CacheWrite, CacheWrite1h); the reported usage settles it.

// maxEscapedName bounds, in bytes, the JSON text of a string asksCache
// decodes to compare it: "cache_control" with every byte escaped (\uXXXX)
// and its quotes.
const maxEscapedName = 6*len("cache_control") + 2

// asksCache reports whether a request body (a JSON text that passed
// parseRequest's check) holds the string "cache_control" or
// "cache_control_injection_points" (asked) and,
// when it does, the string "1h" (oneHour), escaped or not. Neither string
// holds a character JSON writes with a short escape (\" \\ \/ \b \f \n \r
// \t), so a string that decodes to one of them is either written plain,
// found by a search for its JSON text, or holds a \u escape
// (escapedNames). It may take a text that holds those strings for a
// request (erring high); it never misses a request.
func asksCache(body string) (asked, oneHour bool) {
	asked = namesCacheControl(body)
	escaped := false // escapedNames has run
	if !asked {
		asked, oneHour = escapedNames(body)
		escaped = true
	}
	if !asked {
		return false, false
	}
	oneHour = oneHour || strings.Contains(body, `"1h"`)
	if !oneHour && !escaped {
		_, oneHour = escapedNames(body)
	}
	return asked, oneHour
}

// escapedNames reports whether a string of the JSON text body that holds
// a \u escape and is at most maxEscapedName bytes long decodes to
// "cache_control" (cc) or "1h" (h). Only the strings that hold "\u" are
// looked at, each once: a \u lies inside a string (JSON has no backslash
// elsewhere), whose opening quote is the nearest unescaped quote before
// it and whose closing quote the nearest after it. A body without \u
// costs one vector search.
func escapedNames(body string) (cc, h bool) {
	for i := 0; i < len(body); {
		p := strings.Index(body[i:], `\u`)
		if p < 0 {
			break
		}
		p += i
		start := -1
		for b := p - 1; b >= 0 && b >= p-maxEscapedName; b-- {
			if body[b] == '"' && !escapedAt(body, b) {
				start = b
				break
			}
		}
		end := -1
		for j := p + 1; j < len(body); {
			k := strings.IndexByte(body[j:], '"')
			if k < 0 {
				break
			}
			if j += k; !escapedAt(body, j) {
				end = j
				break
			}
			j++
		}
		if end < 0 {
			break
		}
		if start >= 0 && end-start+1 <= maxEscapedName {
			switch gjson.Parse(body[start : end+1]).Str {
			case "cache_control":
				cc = true
			case "1h":
				h = true
			}
		}
		i = end + 1
	}
	return cc, h
}

// escapedAt reports whether the byte at s[i] follows an odd run of
// backslashes (is escaped).
func escapedAt(s string, i int) bool {
	n := 0
	for b := i - 1; b >= 0 && s[b] == '\\'; b-- {
		n++
	}
	return n%2 == 1
}

// namesCacheControl reports whether body holds the JSON string
// "cache_control" or LiteLLM's "cache_control_injection_points", which
// has its proxy add cache_control to the messages it names before it calls
// the upstream (https://docs.litellm.ai/docs/tutorials/prompt_caching).
// It looks only at the underscores of body, found by a vector search, each
// the one after "cache: a search for the whole name (strings.Contains of
// 15 bytes) cost a 1 KiB body some 9,000 instructions, this some 300.
func namesCacheControl(body string) bool {
	const head, tail = `"cache_control`, `_injection_points"`
	for i := 0; ; {
		j := strings.IndexByte(body[i:], '_')
		if j < 0 {
			return false
		}
		j += i
		if at := j - len(`"cache`); at >= 0 && strings.HasPrefix(body[at:], head) {
			rest := body[at+len(head):]
			if strings.HasPrefix(rest, `"`) || strings.HasPrefix(rest, tail) {
				return true
			}
		}
		i = j + 1
	}
}
