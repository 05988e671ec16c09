package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// depthConfig is the harness config with the default body limit (8 MiB),
// an OpenAI and an Anthropic upstream on the mock, and slowTPM.
func depthConfig(mockURL string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: mock, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys:
  - {key: %[2]s, user: alice, tenant: acme}
  - {key: sk-test-bob, user: bob, tenant: acme}
models:
  gpt-4o-mini: {encoding: o200k_base, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, default_max_output_tokens: 256}
%[3]s`, mockURL, testKey, slowTPM)
}

// send posts body to path with key as the flavor's credential.
func send(t *testing.T, url, path, key string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v (did the process die?)", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// heapInUse is the live heap after a full collection, in bytes.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestBracketFloodIs400NotACrash: 6 MB of '[' (under the 8 MiB body limit)
// used to overflow the goroutine stack in the recursive JSON validator — a
// fatal error that killed the whole process — and bodies of 4–5 MB of that
// shape took seconds of CPU and a gigabyte of memory. Now it is refused
// with 400 json_too_deep in the flavor's shape, never forwarded, never
// charged; the process stays up and its heap comes back.
func TestBracketFloodIs400NotACrash(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	h := startConfig(t, mock, depthConfig(mock.URL))
	if h.app.Config.MaxBodyBytes != 8<<20 || h.app.Config.MaxJSONDepth != 128 {
		t.Fatalf("limits: body %d, depth %d", h.app.Config.MaxBodyBytes, h.app.Config.MaxJSONDepth)
	}

	// Warm up (first request's pools and buffers), then measure the heap.
	if resp, b := send(t, h.url, "/v1/chat/completions", "sk-test-bob", []byte(hiBody)); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d %s", resp.StatusCode, b)
	}
	before := heapInUse()

	flood := bytes.Repeat([]byte("["), 6<<20)
	objects := []byte(strings.Repeat(`{"a":`, (6<<20)/5))
	for _, tc := range []struct {
		name, path string
		body       []byte
	}{
		{"openai brackets", "/v1/chat/completions", flood},
		{"openai objects", "/v1/responses", objects},
		{"openai just over the limit", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"x":` + strings.Repeat("[", 128) + strings.Repeat("]", 128) + `}`)},
		{"anthropic brackets", "/v1/messages", flood},
	} {
		resp, b := send(t, h.url, tc.path, testKey, tc.body)
		if resp.StatusCode != 400 {
			t.Fatalf("%s: status %d %.200s", tc.name, resp.StatusCode, b)
		}
		if strings.HasPrefix(tc.path, "/v1/messages") {
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
				!strings.Contains(e.Error.Message, "max_json_depth") {
				t.Errorf("%s: Anthropic error shape: %s (%v)", tc.name, b, err)
			}
			continue
		}
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != "json_too_deep" || e.Error.Type != "invalid_request_error" ||
			!strings.Contains(e.Error.Message, "max_json_depth") {
			t.Errorf("%s: OpenAI error shape: %s (%v)", tc.name, b, err)
		}
	}
	if n := mock.Requests.Load(); n != 1 { // the warm-up only
		t.Errorf("the upstream saw %d requests, want only the warm-up's", n)
	}

	// Alive, and nothing was charged: alice's bucket, after four refused
	// floods, pays a normal request exactly as bob's did on his first.
	respA, b := send(t, h.url, "/v1/chat/completions", testKey, []byte(hiBody))
	if respA.StatusCode != 200 {
		t.Fatalf("normal request after the floods: %d %s", respA.StatusCode, b)
	}
	if a := remainingTokens(t, respA.Header); a != 10000-(hiInput+100) {
		t.Errorf("alice's remaining tokens %d after the floods and one request, want %d: a flood was charged", a, 10000-(hiInput+100))
	}

	// The heap is back: the floods left nothing behind but pooled buffers
	// (fasthttp keeps a request body buffer per connection for reuse).
	flood, objects = nil, nil
	after := heapInUse()
	if limit := before + 3*(6<<20); after > limit {
		t.Errorf("live heap %d MiB after the floods, %d MiB before: over the bound of %d MiB", after>>20, before>>20, limit>>20)
	}
	t.Logf("live heap: %d MiB before, %d MiB after", before>>20, after>>20)
	if !strings.Contains(h.metrics(), `outcome="invalid"`) {
		t.Error("the refusals are not counted as outcome invalid")
	}
}

// TestUpstreamTooDeepIsRelayedNotRead: an upstream answer nested past
// max_json_depth is relayed to the client byte for byte, but its usage is
// not read (the flat scan refuses it before gjson would): a JSON answer
// keeps its reservation, and so does a stream (its input estimate and at
// least its output reservation: the unread event may have carried output
// or a usage larger than the text counted). The same answer within the
// limit is read, which shows the test would see the difference.
func TestUpstreamTooDeepIsRelayedNotRead(t *testing.T) {
	const reportedIn, reportedOut = 999, 999
	// extra nests the "extra" field so that the document is depth deep.
	extra := func(depth int) string { return strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) }
	var mu sync.Mutex
	var lastSent []byte
	sent := func(b string) {
		mu.Lock()
		lastSent = []byte(b)
		mu.Unlock()
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		depth, _ := strconv.Atoi(r.Header.Get("x-test-depth"))
		if r.URL.Path != "/v1/chat/completions" || depth < 1 {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[]}`) // GET /v1/models, polled below
			return
		}
		usage := fmt.Sprintf(`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, reportedIn, reportedOut, reportedIn+reportedOut)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			out := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello world"}}]}` + "\n\n" +
				`data: {"id":"c","object":"chat.completion.chunk","choices":[],"extra":` + extra(depth) + `,` + usage + `}` + "\n\n" +
				"data: [DONE]\n\n"
			sent(out)
			io.WriteString(w, out)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		out := `{"id":"c","object":"chat.completion","extra":` + extra(depth) + `,"choices":[{"index":0,"message":{"role":"assistant","content":"hello world"},"finish_reason":"stop"}],` + usage + `}`
		sent(out)
		io.WriteString(w, out)
	}))
	t.Cleanup(up.Close)

	for _, tc := range []struct {
		name   string
		stream bool
		depth  int
		want   int64 // tokens settled
	}{
		{"json within the limit: usage read", false, 128, reportedIn + reportedOut},
		{"json too deep: the reservation stands", false, 129, hiInput + 100},
		{"stream within the limit: usage read", true, 128, reportedIn + reportedOut},
		// hello world is 2 tokens counted locally, under the 100 reserved.
		{"stream too deep: the output reservation stands", true, 129, hiInput + 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startWith(t, nil, up.URL, slowTPM)
			body := hiBody
			if tc.stream {
				body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`
			}
			resp, got := h.post(testKey, body, "x-test-depth", strconv.Itoa(tc.depth))
			mu.Lock()
			want := string(lastSent)
			mu.Unlock()
			if resp.StatusCode != 200 || got != want {
				t.Fatalf("status %d; the client got %q, the upstream sent %q", resp.StatusCode, got, want)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				r, err := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
				if err != nil {
					t.Fatal(err)
				}
				r.Header.Set("Authorization", "Bearer "+testKey)
				g, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				g.Body.Close()
				rem := remainingTokens(t, g.Header)
				if rem == 10000-tc.want {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("remaining tokens %d, want %d (settled %d tokens)", rem, 10000-tc.want, tc.want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
