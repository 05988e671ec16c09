package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0}} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages"}
	for _, tc := range []struct{ in, want string }{
		{"/v1/chat/completion", "/v1/chat/completions"}, // cut short
		{"/v1/chat/completionss", "/v1/chat/completions"},
		{"/v1/chat/compleitons", "/v1/chat/completions"}, // two letters swapped
		{"/V1/Messages", "/v1/messages"},
		{"/v1/messages", "/v1/messages"}, // itself: callers ask only of unknown names
		{"/v1/files", ""},                // nothing near
		{"/v1/embedding", "/v1/embeddings"},
		{string(make([]byte, MaxLen+1)), ""}, // too long to try
	} {
		if got := Closest(tc.in, paths); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
