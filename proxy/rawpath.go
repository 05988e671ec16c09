package proxy

// plainPath reports whether raw, a request path as sent (before decoding),
// names one endpoint whatever server reads it: no segment that is "." or
// ".." (also with a ";params" part, which Tomcat, Spring and Jetty drop
// before resolving dot segments), no backslash (IIS and Windows-hosted
// servers read it as '/'), no control byte (C servers end a path at
// NUL), no '%' that starts no escape, and no percent-escape of '.', '/',
// '\\', '%' or a control byte (a server that decodes once more, or before
// resolving dot segments, reads another path), nor of '?' or '#' (the
// decoded path llmguard classifies ends there for weigher.Classify, while an
// upstream that decodes once and routes by suffix reads the whole path:
// ".../moderations%3F/chat/completions" would be weighed as a free call
// and served as a chat completion): decoded once, it holds no '%' left to
// decode. llmguard classifies the path fasthttp decodes and
// normalises but forwards raw: for any other path the two could name
// different endpoints, so that a request weighed as one (or counted as a
// free call) is served as another. No API llmguard fronts spells a path
// so, and its SDKs never do. It allocates nothing.
func plainPath(raw string) bool {
	segStart := 0
	for i := 0; i <= len(raw); i++ {
		if i == len(raw) || raw[i] == '/' {
			if dotSegment(raw[segStart:i]) {
				return false
			}
			segStart = i + 1
			continue
		}
		switch c := raw[i]; {
		case c == '\\', c < 0x20, c == 0x7f:
			return false
		case c == '%':
			if i+2 >= len(raw) || !unhexable(raw[i+1]) || !unhexable(raw[i+2]) {
				// Not an escape, read as it is: but "%2%65" decodes
				// once to "%2e", which a second decoding reads as '.'.
				return false
			}
			switch d := unhex(raw[i+1])<<4 | unhex(raw[i+2]); {
			case d == '.', d == '/', d == '\\', d == '%', d == '?', d == '#', d < 0x20, d == 0x7f:
				return false
			}
		}
	}
	return true
}

// dotSegment reports whether seg, with any ";params" part dropped, is "."
// or "..".
func dotSegment(seg string) bool {
	for i := 0; i < len(seg); i++ {
		if seg[i] == ';' {
			seg = seg[:i]
			break
		}
	}
	return seg == "." || seg == ".."
}

func unhexable(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
