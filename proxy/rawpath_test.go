package proxy

import (
	"strings"
	"testing"
)

func TestPlainPath(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		plain bool
	}{
		{"/v1/chat/completions", true},
		{"/", true},
		{"", true},
		{"/v1/models/gpt-3.5-turbo", true},
		{"/v1/models/ft%3Agpt-4o-mini%3Aorg", true},
		{"/v1/chat/c%6Fmpletions", true},
		{"/v1/chat/completions;x=1", true}, // no dot segment: classified with ;params dropped
		{"/v1/chat/completions/.../x", true},
		{"/v1/chat/completions/..x", true},
		{"/v1/chat/completions/%zz", false}, // not an escape
		{"/v1/chat/completions/%2", false},
		{"/v1/chat/completions/x%2%66..", false}, // decoded once: x%2f..
		{"/%0%61", false},
		{"/v1/chat/completions/..", false},
		{"/v1/chat/completions/.", false},
		{"/v1/./chat/completions", false},
		{"/v1/chat/completions/..;/completions", false},
		{"/v1/chat/completions/.;x", false},
		{"/v1/chat/completions/x\\..", false},
		{"/v1/chat/completions/x%5C..", false},
		{"/v1/chat/completions/x%5c..", false},
		{"/v1/chat/completions/x%2f..", false},
		{"/v1/chat/completions/x%2F..", false},
		{"/v1/chat/completions/%2e%2e", false},
		{"/v1/chat/completions/%2E", false},
		{"/v1/chat/completions/x%252f..", false},
		{"/v1/chat/completions%00/x", false},
		{"/v1/chat/completions%7f", false},
		{"/v1/chat/completions\x00", false},
		{"/v1/chat/completions\t", false},
		// An escaped '?' or '#' ends the path Classify reads, not the one
		// an upstream that decodes once reads.
		{"/openai/deployments/x/moderations%3F/chat/completions", false},
		{"/openai/deployments/x/moderations%3f/chat/completions", false},
		{"/v1/models%23/chat/completions", false},
	} {
		if got := plainPath(tc.raw); got != tc.plain {
			t.Errorf("plainPath(%q) = %v, want %v", tc.raw, got, tc.plain)
		}
	}
}

// FuzzPlainPath: a path plainPath accepts decodes, once, to a path with no
// '%', '\\' or control byte left and no dot segment (";params" dropped),
// so a server that decodes it again, reads '\\' as '/', or resolves dot
// segments before or after decoding, reads the same segments.
func FuzzPlainPath(f *testing.F) {
	for _, s := range []string{"/v1/chat/completions", "/v1/chat/completions/..;/completions", "/a/%2e%2E/b", "/x%25%32%66", "/%5c", "/a;b/.;c", "/%", "/%0%61", "/x%2%66.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !plainPath(raw) {
			return
		}
		d := decodeOnce(raw)
		if strings.ContainsAny(d, "%\\?#") || strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("plainPath(%q), decoded %q", raw, d)
		}
		for _, seg := range strings.Split(d, "/") {
			if i := strings.IndexByte(seg, ';'); i >= 0 {
				seg = seg[:i]
			}
			if seg == "." || seg == ".." {
				t.Fatalf("plainPath(%q), decoded %q has a dot segment", raw, d)
			}
		}
	})
}

// decodeOnce decodes the %XX escapes of s, leaving anything else (a '%'
// not followed by two hex digits) as it is, as fasthttp does.
func decodeOnce(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && unhexable(s[i+1]) && unhexable(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
