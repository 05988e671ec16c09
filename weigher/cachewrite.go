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
// when it does, the string "1h" (oneHour), escaped or not. Neither string
// holds a character JSON writes with a short escape (\" \\ \/ \b \f \n \r
// \t), so a string that decodes to one of them is either written plain or
// holds a \u escape: a body without "\u" is searched for the two strings'
// plain JSON text, one with it has each string of at most maxEscapedName
// bytes that holds a \u escape decoded and compared (escapedNames). It may
// take a text that holds those strings for a request (erring high); it
// never misses a request.
func asksCache(body string) (asked, oneHour bool) {
	asked = strings.Contains(body, `"cache_control"`)
	oneHour = strings.Contains(body, `"1h"`)
	if strings.Contains(body, `\u`) && !(asked && oneHour) {
		cc, h := escapedNames(body)
		asked, oneHour = asked || cc, oneHour || h
	}
	return asked, asked && oneHour
}

// escapedNames reports whether a string of the JSON text body that holds
// a \u escape and is at most maxEscapedName bytes long decodes to
// "cache_control" (cc) or "1h" (h). One pass over the bytes, strings
// found by their quotes and escapes.
func escapedNames(body string) (cc, h bool) {
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		start, unicode := i, false
		for i++; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' {
				i++
				unicode = unicode || i < len(body) && body[i] == 'u'
			}
		}
		// body[start:i+1] is the string, quotes included.
		if unicode && i-start+1 <= maxEscapedName && i < len(body) {
			switch gjson.Parse(body[start : i+1]).Str {
			case "cache_control":
				cc = true
			case "1h":
				h = true
			}
		}
	}
	return cc, h
}
