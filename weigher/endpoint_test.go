package weigher

import (
	"strings"
	"testing"
)

// Every spelling of a weighed endpoint an upstream might serve is that
// endpoint; the families that spend without being weighed are unmetered
// whatever their API root; reads and deletes spend nothing.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         Kind
	}{
		{"POST", "/v1/chat/completions", KindChat},
		{"POST", "/chat/completions", KindChat},
		{"POST", "/openai/v1/chat/completions", KindChat},
		{"POST", "/openai/deployments/d/chat/completions", KindChat},
		{"POST", "/openai/deployments/d/extensions/chat/completions", KindChat},
		{"POST", "/models/chat/completions", KindChat},
		{"POST", "/engines/m/chat/completions", KindChat},
		{"POST", "/V1//Chat/Completions//", KindChat},
		{"PATCH", "/v1/chat/completions", KindChat},
		{"POST", "/v1/chat/completions?x=1", KindChat},
		{"POST", "/v1/chat/completions#frag", KindChat},
		{"POST", "/v1/completions", KindCompletions},
		{"POST", "/completions", KindCompletions},
		{"POST", "/v1/embeddings", KindEmbeddings},
		{"POST", "/openai/v1/embeddings", KindEmbeddings},
		{"POST", "/v1/responses", KindResponses},
		{"POST", "/openai/responses", KindResponses},
		{"POST", "/v1/messages", KindMessages},
		{"POST", "/messages", KindMessages},
		{"POST", "/v1/messages/count_tokens", KindCountTokens},
		{"POST", "/v1/messages/batches", KindUnmetered},
		{"POST", "/v1/messages/batches/b1/cancel", KindUnmetered},
		{"POST", "/v1/batches", KindUnmetered},
		{"POST", "/batches", KindUnmetered},
		{"POST", "/v1/images/generations", KindImages}, // weighed for token-billed models, else unmetered by the proxy
		{"POST", "/openai/deployments/dall-e/images/generations", KindImages},
		{"POST", "/v1/images/edits", KindUnmetered},
		{"POST", "/v1/audio/transcriptions", KindUnmetered},
		{"POST", "/v1/audio/speech", KindUnmetered},
		{"POST", "/v1/realtime/sessions", KindUnmetered},
		{"POST", "/v1/threads/runs", KindUnmetered},
		{"POST", "/v1/threads/t1/messages", KindUnmetered}, // not Anthropic's /v1/messages
		{"POST", "/v1/threads/t1/runs", KindUnmetered},
		{"POST", "/v1/assistants", KindUnmetered},
		{"POST", "/v1/fine_tuning/jobs", KindUnmetered},
		{"POST", "/v1/files", KindUnmetered},
		{"POST", "/v1/uploads", KindUnmetered},
		{"POST", "/v1/vector_stores", KindUnmetered},
		{"POST", "/openai/v1/files", KindUnmetered},
		{"GET", "/v1/files", KindOther},
		{"HEAD", "/v1/chat/completions", KindOther},
		{"DELETE", "/v1/files/f1", KindOther},
		{"GET", "/v1/models", KindOther},
		{"POST", "/v1/models", KindOther},
		{"POST", "/v1/moderations", KindOther},
		{"POST", "/v1/chat/completions/c1", KindOther}, // updates a stored completion's metadata
		{"POST", "/v1/responses/resp_1/cancel", KindOther},
		{"POST", "/v1/responses/input_tokens", KindOther},
		// Anything else an upstream may bill: unmetered.
		{"POST", "/v1/chat/completionsX", KindUnmetered},
		{"POST", "/", KindUnmetered},
		{"POST", "", KindUnmetered},
		{"POST", "/api/chat", KindUnmetered},     // Ollama
		{"POST", "/api/generate", KindUnmetered}, // Ollama
		{"POST", "/generate", KindUnmetered},     // TGI
		{"POST", "/v1/rerank", KindUnmetered},
		{"POST", "/v1/openai/images/generations", KindImages}, // DeepInfra's root
		{"POST", "/api/v1/audio/speech", KindUnmetered},
		{"POST", "/v1beta/models/gemini-pro:generateContent", KindUnmetered},
		{"POST", "/v1/chat/completions.", KindUnmetered},
		// ;params are dropped, as servlet containers do before routing.
		{"POST", "/v1/chat/completions;x=1", KindChat},
		{"POST", "/v1/chat;x/completions", KindChat},
		{"POST", "/v1/images;x/generations", KindImages},
		{"POST", "/v1/images;x/variations", KindUnmetered},
	} {
		if got := Classify(tc.method, tc.path); got != tc.want {
			t.Errorf("Classify(%s %q) = %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
}

// CanonicalPath lowers, cuts the query, collapses slashes and drops the
// trailing one, and leaves a clean path as it is, without allocating.
func TestCanonicalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/chat/completions": "/v1/chat/completions", "/V1//Chat/": "/v1/chat", "/x?y=/Z": "/x", "": "/", "/": "/", "//": "/",
		"/v1/chat;a=b/completions;c": "/v1/chat/completions", "/;x/;y/v1": "/v1",
	} {
		if got := CanonicalPath(in); got != want {
			t.Errorf("CanonicalPath(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { CanonicalPath("/v1/chat/completions") }); n != 0 {
		t.Errorf("%v allocations for a clean path, want 0", n)
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"/v1/chat/completions", "/openai/deployments/x/y", "//", "/V1/Messages/Batches/"} {
		f.Add("POST", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		k := Classify(method, path)
		if k >= numKinds {
			t.Fatalf("Classify(%q, %q) = %d, no kind", method, path, k)
		}
		if c := CanonicalPath(path); Classify(method, c) != k || CanonicalPath(c) != c {
			t.Fatalf("%q: classified %s, but its canonical form %q is %s (or not canonical)", path, k, c, Classify(method, c))
		}
	})
}

// OffProxy names the Realtime API's POSTs, whatever their spelling, and
// nothing else: reads and other families. A segment that starts with
// realtime is one (Azure's realtimeapi and realtimertc; adv53).
func TestOffProxy(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/v1/realtime/client_secrets", true},
		{"POST", "/v1/realtime/sessions", true},
		{"POST", "/v1/realtime/transcription_sessions", true},
		{"POST", "/v1/realtime/calls", true},
		{"POST", "/v1/realtime", true},
		{"post", "/V1//Realtime/Client_Secrets/", true},
		{"PUT", "/openai/v1/realtime/client_secrets?x=1", true},
		{"POST", "/openai/deployments/d/realtime/sessions", true},
		{"GET", "/v1/realtime/client_secrets", false},
		{"POST", "/v1/realtimex/client_secrets", true},
		{"POST", "/openai/realtimeapi/sessions?api-version=2025-04-01-preview", true},
		{"POST", "/v1/realtimertc", true},
		{"POST", "/v1/realtime./calls", true},
		{"POST", "/v1/realtime /calls", true},
		{"POST", "/api/v1/realtime/client_secrets", true},
		{"PATCH", "/v1/realtime/client_secrets;x", true},
		{"POST", "/openai/deployments/realtime-prod/audio/speech", false},
		{"POST", "/openai/deployments/realtime-prod", false},
		{"POST", "/v1/files", false},
		{"POST", "/", false},
		{"POST", "", false},
		{"HEAD", "/v1/realtime/calls", false},
		{"POST", "/v1/audio/speech", false},
		{"POST", "/v1/chat/completions", false},
		{"POST", "/v1/responses", false},
	} {
		if got := OffProxy(tc.method, tc.path); got != tc.want {
			t.Errorf("OffProxy(%s, %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

// OffProxy reads a path as Classify does: the canonical form answers the
// same, a read method is never off-proxy, and a path with a segment
// starting "realtime" (after any deployment) is, in any case, after
// any prefix (adv53).
func FuzzOffProxy(f *testing.F) {
	for _, s := range []string{"/v1/realtime/client_secrets", "/openai/realtimeapi/sessions?api-version=x", "/v1/realtime./calls",
		"/openai/deployments/realtime/x", "/api/v1/Realtime;p/calls", "//", ""} {
		f.Add("POST", s, "")
	}
	f.Fuzz(func(t *testing.T, method, path, prefix string) {
		got := OffProxy(method, path)
		if c := CanonicalPath(path); OffProxy(method, c) != got {
			t.Fatalf("OffProxy(%q, %q) = %v, but its canonical form %q answers %v", method, path, got, c, !got)
		}
		if got && ReadMethod(method) {
			t.Fatalf("OffProxy(%q, %q): a read method is off-proxy", method, path)
		}
		if ReadMethod(method) || strings.ContainsAny(prefix, "?#;") || strings.Contains(strings.ToLower(prefix), "openai") {
			return
		}
		p := "/" + prefix + "/RealTime/" + path
		if strings.ContainsAny(path, "?#") {
			return
		}
		if !OffProxy(method, p) {
			t.Fatalf("OffProxy(%q, %q) = false, want true", method, p)
		}
	})
}
