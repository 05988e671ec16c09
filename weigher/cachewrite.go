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
// parseRequest's check) holds the string "cache_control" (asked) and,
// when it does, the string "1h" (oneHour), escaped or not. A body without
// a \u escape is searched for the two strings' plain JSON text; one with
// escapes has each string of at most maxEscapedName bytes that holds a
// backslash decoded and compared. It may take a text that holds those
// strings for a request (erring high); it never misses a request.
func asksCache(body string) (asked, oneHour bool) {
	if !strings.Contains(body, `\u`) {
		asked = strings.Contains(body, `"cache_control"`)
		return asked, asked && strings.Contains(body, `"1h"`)
	}
	for i := 0; i < len(body); {
		q := strings.IndexByte(body[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end := skipString(body, start)
		if end <= start { // not reached on a checked body
			break
		}
		raw := body[start:end]
		if len(raw) <= maxEscapedName {
			s := raw[1 : len(raw)-1]
			if strings.IndexByte(s, '\\') >= 0 {
				s = gjson.Parse(raw).Str
			}
			asked = asked || s == "cache_control"
			oneHour = oneHour || s == "1h"
		}
		i = end
	}
	return asked, asked && oneHour
}
