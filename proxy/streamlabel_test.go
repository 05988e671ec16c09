package proxy

import "testing"

// An answer is relayed as a stream when it is labelled text/event-stream
// in any case (adv26); any other is held, and read as a stream there when
// its body is one (settleHeldStream, TestSSEBody).
func TestStreamedAnswer(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                true,
		"TEXT/EVENT-STREAM; charset=utf-8": true,
		" Text/Event-Stream":               true,
		"text/plain; charset=utf-8":        false, // held; read as SSE when it is (settleHeldStream)
		"":                                 false,
		"application/octet-stream":         false,
		"application/json":                 false,
		"text/event":                       false,
	} {
		if got := streamedAnswer([]byte(ct)); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}

// TestSSEBody: a held body starts as an SSE stream when its first line,
// after whitespace and a byte order mark, is one of the format's fields or
// a comment; JSON and other text do not.
func TestSSEBody(t *testing.T) {
	for body, want := range map[string]bool{
		"data: {}\n\n": true, "\xef\xbb\xbf\r\n data:x\n\n": true, "event: message_start\n": true,
		": keep-alive\n\n": true, "id:1\n": true, "retry: 10\n": true, "data\n\n": true,
		`{"data": 1}`: false, "database: x\n": false, "": false, "  \n": false, "identity\n": false, "[1]": false,
	} {
		if got := sseBody([]byte(body)); got != want {
			t.Errorf("sseBody(%q) = %v, want %v", body, got, want)
		}
	}
}
