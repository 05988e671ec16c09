package weigher

import (
	"strings"
	"unicode/utf8"
)

// validText returns text as string([]rune(text)) gives it — each byte
// that does not start a valid UTF-8 sequence replaced by U+FFFD, as Go's
// string-to-rune conversion and tiktoken-go read it — without the []rune
// copy (4 bytes a byte) the conversion makes first. An upstream answer
// held whole (up to max_response_bytes, 64 MiB by default) with one bad
// byte made the count allocate 7× the answer outside
// max_inflight_response_bytes: a 60 MiB answer took the heap 465 MiB up
// (TestAdv46InvalidUTF8AnswerCountedWithinItsSize). The result takes at
// most 3 bytes for each bad byte and the valid ones' own; valid text is
// returned as it is.
func validText(text string) string {
	bad := 0
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			bad++
		}
		i += size
	}
	if bad == 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + 2*bad) // U+FFFD is 3 bytes in UTF-8
	start := 0
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(text[start:i])
			b.WriteString("\uFFFD")
			start = i + 1
		}
		i += size
	}
	b.WriteString(text[start:])
	return b.String()
}
