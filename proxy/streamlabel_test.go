package proxy

import "testing"

// An answer is read as a stream when it is labelled text/event-stream in
// any case, or when a stream request's 2xx answer names no JSON type
// (fasthttp gives "text/plain; charset=utf-8" for none); a JSON answer,
// an error status or a request that did not ask to stream keep the JSON
// path (adv26).
func TestStreamedAnswer(t *testing.T) {
	for _, tc := range []struct {
		ct     string
		asked  bool
		status int
		want   bool
	}{
		{"text/event-stream", false, 200, true},
		{"TEXT/EVENT-STREAM; charset=utf-8", false, 200, true},
		{" Text/Event-Stream", false, 500, true},
		{"text/plain; charset=utf-8", true, 200, true},
		{"", true, 200, true},
		{"application/octet-stream", true, 206, true},
		{"application/json", true, 200, false},
		{"Application/JSON; charset=utf-8", true, 200, false},
		{"application/problem+json", true, 200, false},
		{"text/plain; charset=utf-8", true, 400, false},
		{"text/plain; charset=utf-8", false, 200, false},
		{"text/event", false, 200, false},
	} {
		if got := streamedAnswer([]byte(tc.ct), tc.asked, tc.status); got != tc.want {
			t.Errorf("%q, stream asked %v, status %d: %v, want %v", tc.ct, tc.asked, tc.status, got, tc.want)
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
