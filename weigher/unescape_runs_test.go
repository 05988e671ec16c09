package weigher

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// appendUnescapedRuns is appendUnescaped as it was before it wrote in
// place a word at a time: each run between escapes found with
// strings.IndexByte and appended whole. The reference of
// TestAppendUnescapedSameAsRuns and FuzzAppendUnescapedSameAsRuns.
func appendUnescapedRuns(b []byte, s string, i int) []byte {
	for i >= 0 {
		b = append(b, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return b // not valid JSON: gjson stops here too
		}
		switch c := s[1]; c {
		case '"', '\\', '/':
			b, s = append(b, c), s[2:]
		case 'b':
			b, s = append(b, '\b'), s[2:]
		case 'f':
			b, s = append(b, '\f'), s[2:]
		case 'n':
			b, s = append(b, '\n'), s[2:]
		case 'r':
			b, s = append(b, '\r'), s[2:]
		case 't':
			b, s = append(b, '\t'), s[2:]
		case 'u':
			if len(s) < 6 {
				return b
			}
			r := hex4(s[2:6])
			s = s[6:]
			if utf16.IsSurrogate(r) && len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
				r = utf16.DecodeRune(r, hex4(s[2:6]))
				s = s[6:]
			}
			b = utf8.AppendRune(b, r)
		default:
			return b
		}
		i = strings.IndexByte(s, '\\')
	}
	return append(b, s...)
}

// unescapeSamples are strings (between the quotes) with escapes at every
// place a word of appendUnescaped can hold them, runs shorter and longer
// than unescapeWordRun, and the inputs that are not valid JSON it stops at.
func unescapeSamples() []string {
	out := []string{
		`\n`, `a\n`, `\nb`, `\\`, `\"\"\"`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ude00x`, `\ud83d\u0041`,
		`\ud83d\\`, `x\u0000y`, `\u12`, `\`, `ab\`, `\x`, `\uZZZZ`, `\ud83d\uZZZZ`, `\ud83d\ud83d`,
		"caf\xc3\xa9\\t\xff\xfe\\r", `\/\b\f\r\t`,
	}
	for n := range 80 {
		run := strings.Repeat("abcdefghij", 8)[:n]
		out = append(out, `\n`+run+`\t`+run, run+`\\`+run+`\"`, `\u00e9`+run+`\ud83d\ude00`+run+`\`, `\"`+run)
	}
	return out
}

// TestAppendUnescapedSameAsRuns: the in-place decoder gives what the
// decoder of runs gives, from the first backslash on, after any prefix
// already in the buffer.
func TestAppendUnescapedSameAsRuns(t *testing.T) {
	for _, s := range unescapeSamples() {
		sameUnescaped(t, s)
	}
}

// FuzzAppendUnescapedSameAsRuns: as TestAppendUnescapedSameAsRuns, for
// any bytes with a backslash (valid JSON or not).
func FuzzAppendUnescapedSameAsRuns(f *testing.F) {
	for _, s := range unescapeSamples() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameUnescaped(t, s)
	})
}

// sameUnescaped compares the two decoders on s, with and without bytes
// already in the buffer.
func sameUnescaped(t *testing.T, s string) {
	t.Helper()
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return
	}
	for _, pre := range []string{"", "prefix already there "} {
		want := appendUnescapedRuns([]byte(pre), s, i)
		got := appendUnescaped([]byte(pre), s, i)
		if string(got) != string(want) {
			t.Fatalf("%q after %q: %q, the runs' decoder %q", s, pre, got, want)
		}
	}
}
