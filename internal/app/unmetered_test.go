package app

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/weigher"
)

// Endpoints that spend tokens or money upstream but that llmguard does not
// weigh are refused (403 unmetered_endpoint, in the caller's flavor, never
// forwarded) to a caller under a token or dollar limit, whatever their
// spelling; reads pass; an endpoint the operator lists in unmetered_paths
// passes as one request, marked unmetered in the ledger.
func TestUnmeteredEndpoints(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf(`ledger: {file: %q}
unmetered_paths: ["/v1/images/*"]
`, file))
	tokens := h.tokensLeft()
	lastURI := func() string { return lastUpstreamURI(h) }
	before := lastURI()
	for _, tc := range []struct{ path, shape string }{
		{"/v1/batches", `"code":"unmetered_endpoint"`},
		{"/V1/Batches/", `"code":"unmetered_endpoint"`},
		{"/v1/audio/speech", `"code":"unmetered_endpoint"`},
		{"/v1/threads/runs", `"code":"unmetered_endpoint"`},
		{"/v1/threads/t1/messages", `"code":"unmetered_endpoint"`},
		{"/v1/fine_tuning/jobs", `"code":"unmetered_endpoint"`},
		{"/openai/v1/files", `"code":"unmetered_endpoint"`},
		{"/v1/messages/batches", `"type":"permission_error"`}, // Anthropic's shape
	} {
		resp, body := h.do(tc.path, `{"model":"gpt-4o-mini","input":"x"}`)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, tc.shape) || !strings.Contains(body, "user-tpm") {
			t.Errorf("POST %s: %d %s, want 403 with %s naming the limit", tc.path, resp.StatusCode, body, tc.shape)
		}
	}
	if got := lastURI(); got != before {
		t.Errorf("an unmetered call reached the upstream: %s", got)
	}

	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/files", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden || lastURI() != "/v1/files" {
		t.Errorf("GET /v1/files: %d, upstream saw %q; a read must pass", resp.StatusCode, lastURI())
	}

	resp, body := h.do("/v1/images/generations", `{"model":"dall-e-3","prompt":"a cat"}`)
	if resp.StatusCode == http.StatusForbidden || lastURI() != "/v1/images/generations" {
		t.Fatalf("allowed unmetered path: %d %s, upstream saw %q", resp.StatusCode, body, lastURI())
	}
	if got := h.tokensLeft(); got != tokens {
		t.Errorf("%d tokens left, want %d: unmetered calls cost no tokens", got, tokens)
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	var marked int
	for _, r := range recs {
		if r.Unmetered {
			marked++
		}
	}
	if marked != 1 {
		t.Errorf("%d records marked unmetered, want 1 (the allowed images call): %+v", marked, recs)
	}
}

// A rule on an endpoint's path holds whatever the request's spelling of
// that endpoint: once it is spent, no variant gets through.
func TestPathRulesHoldForEverySpelling(t *testing.T) {
	h := startFlavors(t, `  - {name: chat-hourly, scope: user, unit: requests, rate: 1, per: 1h, paths: ["/v1/chat/completions"]}`)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	if resp, b := h.do("/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	for _, p := range []string{"/v1/chat/completions/", "/v1/Chat/Completions", "/V1/CHAT/COMPLETIONS", "/v1//chat/completions",
		"/chat/completions", "/openai/v1/chat/completions"} {
		if resp, b := h.do(p, body); resp.StatusCode != 429 {
			t.Errorf("POST %s: %d %s, want 429 from chat-hourly", p, resp.StatusCode, b)
		}
	}
	// An escaped '?' is refused before any rule: a suffix-routing upstream
	// reads past it (TestEscapedQueryMarkInPathRefused).
	if resp, b := h.do("/v1/chat/completions%3Fx=1", body); resp.StatusCode != 400 || !strings.Contains(b, "invalid_path") {
		t.Errorf("POST /v1/chat/completions%%3Fx=1: %d %s, want 400 invalid_path", resp.StatusCode, b)
	}
}

// Image generation is weighed for the models billed in tokens (GPT Image:
// the prompt plus n images in image tokens by size and quality), and stays
// unmetered for the ones billed per image (DALL·E): refused under a token
// or dollar limit.
func TestImageGenerationWeighedWhenPriced(t *testing.T) {
	up := startLenient(t)
	h := startConfig(t, nil, baseConfig(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`))
	body := `{"model":"gpt-image-1","prompt":"A cat reading a book.","size":"1024x1024","quality":"low","n":2}`
	w, err := weigher.New(weigher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := w.Weigh(weigher.KindImages, []byte(body))
	before := h.tokensLeft()
	resp, b := h.do("/v1/images/generations", body)
	if resp.StatusCode != 200 {
		t.Fatalf("gpt-image-1: %d %s", resp.StatusCode, b)
	}
	if got := before - remainingTokens(t, resp.Header); got != want.InputTokens+2*272 {
		t.Errorf("reserved %d tokens, want the prompt's %d + 2 × 272", got, want.InputTokens)
	}
	if got := before - h.tokensLeft(); got != up.reported.Load() {
		t.Errorf("charged %d tokens, the upstream reported %d: not reconciled", got, up.reported.Load())
	}
	if resp, b := h.do("/v1/images/generations", `{"model":"gpt-image-1","prompt":"x","size":"1024x1536","quality":"high","n":4}`); resp.StatusCode != 429 {
		t.Errorf("4 high-quality images (24,960 tokens) past a 20,000-token bucket: %d %s, want 429", resp.StatusCode, b)
	}
	if resp, b := h.do("/v1/images/generations", `{"model":"dall-e-3","prompt":"a cat"}`); resp.StatusCode != 403 || !strings.Contains(b, "unmetered_endpoint") {
		t.Errorf("dall-e-3 (billed per image): %d %s, want 403 unmetered_endpoint", resp.StatusCode, b)
	}
}

// A generation billed per image (DALL·E) is priced from the table's
// per-image entries under a usd limit — n images of its size and quality,
// exact to the micro-dollar, whatever the answer says — and refused under
// a token limit, which cannot weigh it.
func TestPerImageGenerationsPricedUnderUSDLimits(t *testing.T) {
	up := startLenient(t)
	h := startConfig(t, nil, baseConfig(t, up.url, `limits:
  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 1}
`))
	usdLeft := func() int64 { return rateLimitRemaining(t, h.probe(), "user-usd") }
	before := usdLeft()
	resp, b := h.do("/v1/images/generations", `{"model":"dall-e-3","prompt":"a cat","quality":"hd","size":"1024x1024","n":2}`)
	if resp.StatusCode != 200 {
		t.Fatalf("dall-e-3 under a usd limit: %d %s", resp.StatusCode, b)
	}
	if got := before - usdLeft(); got != 2*80_000 {
		t.Errorf("charged %d µUSD, want 2 × $0.08", got)
	}
	if resp, b := h.do("/v1/images/generations", `{"model":"dall-e-3","prompt":"a cat","quality":"hd","size":"1792x1024","n":8}`); resp.StatusCode != 429 {
		t.Errorf("8 × $0.12 past a $1 budget with $0.84 left: %d %s, want 429", resp.StatusCode, b)
	}

	h2 := startConfig(t, nil, baseConfig(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`))
	if resp, b := h2.do("/v1/images/generations", `{"model":"dall-e-3","prompt":"a cat"}`); resp.StatusCode != 403 || !strings.Contains(b, "unmetered_endpoint") {
		t.Errorf("dall-e-3 under a token limit: %d %s, want 403 unmetered_endpoint", resp.StatusCode, b)
	}
}

// A client's mistyped path is told what it likely meant and never
// forwarded: a path a letter off an endpoint llmguard weighs names that
// endpoint, and a doubled /v1 (a base URL ending in /v1 given to an SDK that
// adds /v1 itself) is a 404 in the flavor of the API it was meant for,
// where it used to reach the fallback OpenAI upstream with its key.
func TestMistypedPaths(t *testing.T) {
	h := startFlavors(t, "")
	lastURI := func() string { return lastUpstreamURI(h) }
	before := lastURI()
	for _, tc := range []struct {
		path   string
		status int
		want   []string
	}{
		{"/v1/chat/completion", http.StatusForbidden, []string{`"code":"unmetered_endpoint"`, "did you mean /v1/chat/completions?"}},
		{"/v1/embedding", http.StatusForbidden, []string{"did you mean /v1/embeddings?"}},
		{"/v1/v1/messages", http.StatusNotFound, []string{`"type":"not_found_error"`, "repeats /v1"}},
		{"/v1/V1/messages", http.StatusNotFound, []string{`"type":"not_found_error"`, "repeats /v1"}},
		{"/v1/v1/chat/completions", http.StatusNotFound, []string{`"code":"unknown_url"`, "repeats /v1"}},
	} {
		resp, body := h.do(tc.path, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
		if resp.StatusCode != tc.status {
			t.Errorf("POST %s: %d %s, want %d", tc.path, resp.StatusCode, body, tc.status)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("POST %s: %s, want %s in it", tc.path, body, w)
			}
		}
	}
	if resp, body := h.do("/v1/batches", `{}`); strings.Contains(body, "did you mean") || resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /v1/batches: %d %s: a real endpoint llmguard does not weigh is no typo", resp.StatusCode, body)
	}
	if got := lastURI(); got != before {
		t.Errorf("a mistyped path reached the upstream: %s", got)
	}
}

// lastUpstreamURI is the request URI of the last request h's mock upstream
// received, "" before any.
func lastUpstreamURI(h *harness) string {
	hd, _ := h.mock.LastRequest()
	if hd == nil {
		return ""
	}
	return string(hd.RequestURI())
}
