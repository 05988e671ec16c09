package proxy

import (
	"bytes"
	"testing"
)

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
		// A field the format does not define opens a stream when data
		// lines follow; alone, "name: value" text is not one.
		"x-trace: abc\n\ndata: {}\n\n": true, "x.y_z-1:\r\ndata\r\n": true, "database: x\rdata: 1": true,
		"upstream_error: boom\n": false, "Error: boom\nsee data: below\n": false, "x y: 1\ndata: 1\n": false,
		`{"a":1}` + "\ndata: 1\n": false, ":x": true, "x-trace: abc\n\ndatabase: 1\n": false,
	} {
		if got := sseBody([]byte(body)); got != want {
			t.Errorf("sseBody(%q) = %v, want %v", body, got, want)
		}
	}
}

// FuzzSSEBody: sseBody never panics, never takes a body whose first byte
// (after whitespace and a byte order mark) opens JSON for a stream, and
// takes any body whose first line is a data line for one.
func FuzzSSEBody(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "x-trace: a\n\ndata: 1\n", ": c\n", `{"a":1}`, "x:\rdata", "id\n", "\xef\xbb\xbf data:"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := sseBody(b)
		rest := bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), " \t\r\n")
		if len(rest) > 0 && (rest[0] == '{' || rest[0] == '[') && got {
			t.Fatalf("%q: JSON taken for a stream", b)
		}
		if bytes.HasPrefix(rest, []byte("data:")) && !got {
			t.Fatalf("%q: a data line not taken for a stream", b)
		}
	})
}
