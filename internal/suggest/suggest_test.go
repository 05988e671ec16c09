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

// TestClosestPrefersTheNearest: an enum whose values begin one another
// (store.backend's redis and redis_cluster). trial23: "redis_clustr" was
// offered redis (its prefix, found first) and "Redis" redis_cluster (which
// it begins), each the other value than the one meant.
func TestClosestPrefersTheNearest(t *testing.T) {
	backends := []string{"memory", "redis", "redis_cluster"}
	for _, tc := range []struct{ in, want string }{
		{"redis_clustr", "redis_cluster"}, // one letter off, though redis is its prefix
		{"Redis", "redis"},                // a case off, though it begins redis_cluster
		{"REDIS_CLUSTER", "redis_cluster"},
		{"redis_cluster_tls", "redis_cluster"}, // run on: the longer prefix is nearer
		{"redi", "redis"},                      // cut short: nearer redis than redis_cluster
		{"memroy", "memory"},
		{"postgres", ""},
	} {
		if got := Closest(tc.in, backends); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
