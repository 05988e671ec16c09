package app

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
)

const hiBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`

// hiInput is the prompt size of hiBody in o200k_base: 3 framing + "user"
// (1) + "hi" (1) + 3 reply priming.
const hiInput = 8

func TestUnknownOrMissingKeyIs401(t *testing.T) {
	h := start(t, slowTPM)
	for _, key := range []string{"", "sk-nobody"} {
		resp, body := h.post(key, hiBody)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: status %d", key, resp.StatusCode)
		}
		if !strings.Contains(body, `"code":"invalid_api_key"`) || !strings.HasPrefix(body, `{"error":{"message":`) {
			t.Errorf("key %q: body %s is not OpenAI's error shape", key, body)
		}
	}
	if h.mock.Requests.Load() != 0 {
		t.Error("an unauthenticated request reached the upstream")
	}
}

func TestPassThroughIdentity(t *testing.T) {
	h := start(t, slowTPM+`
identity:
  pass_through: true
  tenant: outside
  plan: free
`)
	resp, body := h.post("sk-callers-own-openai-key", hiBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	hdr, _ := h.mock.LastRequest()
	if a := string(hdr.Peek("Authorization")); a != "Bearer sk-callers-own-openai-key" {
		t.Errorf("pass-through caller's key not forwarded: upstream Authorization = %q", a)
	}
	if r := remainingTokens(t, resp.Header); r != 10000-hiInput-100 {
		t.Errorf("pass-through caller not limited: remaining %d", r)
	}
}

func TestBodyTooLargeIs413(t *testing.T) {
	h := start(t, slowTPM)
	big := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 70000) + `"}]}`
	resp, body := h.post(testKey, big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, body %.200s", resp.StatusCode, body)
	}
	if h.mock.Requests.Load() != 0 {
		t.Error("an oversized request reached the upstream")
	}
}

func TestUpstreamUnreachableIs502AndRefunds(t *testing.T) {
	dead := "http://" + refusedAddr(t)
	h := startWith(t, nil, dead, slowTPM)
	resp, body := h.post(testKey, hiBody)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"code":"upstream_unreachable"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	// The reservation came back: the next request sees a full bucket minus itself.
	resp, _ = h.post(testKey, hiBody)
	if r := remainingTokens(t, resp.Header); r != 10000-hiInput-100 {
		t.Errorf("remaining %d after a refunded 502, want %d", r, 10000-hiInput-100)
	}
}

func TestUpstreamErrorWithoutUsageRefunds(t *testing.T) {
	h := start(t, slowTPM)
	resp, body := h.post(testKey, hiBody, "x-mock-status", "500")
	if resp.StatusCode != 500 || !strings.Contains(body, "mock error 500") {
		t.Fatalf("upstream error not relayed as is: %d %s", resp.StatusCode, body)
	}
	resp, _ = h.post(testKey, hiBody)
	if r := remainingTokens(t, resp.Header); r != 10000-hiInput-100 {
		t.Errorf("remaining %d, want %d: the failed call was not refunded", r, 10000-hiInput-100)
	}
}

// An unparseable body on a weighed endpoint used to be forwarded with a
// byte-based estimate; a lenient upstream could serve it (NaN, a
// byte-order mark…) with an output llmguard never reserved. Now llmguard
// answers it itself (a deliberate contract change, README "When things go
// wrong"): 400 invalid_json, never forwarded, nothing charged.
func TestUnparseableBodyIsRefusedNotForwarded(t *testing.T) {
	h := start(t, `
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 200}
`)
	resp, body := h.post(testKey, `{"model": "gpt-4o-mini", "messages": [ oops`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_json"`) {
		t.Errorf("status %d %s, want llmguard's 400 invalid_json", resp.StatusCode, body)
	}
	if h.mock.Requests.Load() != 0 {
		t.Errorf("unparseable body forwarded")
	}
	// Nothing was reserved: a request that fits 200 tokens exactly still passes.
	resp, body = h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":`+
		strconv.Itoa(200-hiInput)+`}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request of the whole bucket after the refusal: %d %s", resp.StatusCode, body)
	}
}

func TestNoUsageStreamChargesCountedOutput(t *testing.T) {
	h := start(t, slowTPM)
	resp, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`,
		"x-mock-no-usage", "1")
	if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// The mock streamed min(max_tokens, 16) = 16 one-token words.
	resp, _ = h.post(testKey, hiBody)
	want := int64(10000 - (hiInput + 16) - (hiInput + 100))
	if r := remainingTokens(t, resp.Header); r != want {
		t.Errorf("remaining %d, want %d (input + 16 locally counted output tokens)", r, want)
	}
}

func TestClientGoneMidStream(t *testing.T) {
	h := start(t, slowTPM)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("x-mock-completion-tokens", "100")
	req.Header.Set("x-mock-delay-ms", "50")
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	events := 0
	for events < 3 { // role chunk + two words
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			events++
		}
	}
	cancel()
	resp.Body.Close()

	// The upstream stream is cancelled within a few seconds.
	deadline := time.Now().Add(5 * time.Second)
	for h.mock.StreamsAborted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h.mock.StreamsAborted.Load() != 1 || h.mock.StreamsCompleted.Load() != 0 {
		t.Fatalf("upstream stream not cancelled: aborted=%d completed=%d", h.mock.StreamsAborted.Load(), h.mock.StreamsCompleted.Load())
	}
	// Charged input + the output reservation (100), not the two or so words
	// streamed: the upstream bills what it generated, which the client did
	// not see (a reasoning model's reasoning above all).
	resp2, _ := h.post(testKey, hiBody)
	charged := 10000 - (hiInput + 100) - remainingTokens(t, resp2.Header)
	if charged != hiInput+100 {
		t.Errorf("charged %d tokens for an abandoned stream, want input (%d) + the output reservation (100)", charged, hiInput)
	}
}

func TestHopByHopAndForwardedHeaders(t *testing.T) {
	h := start(t, slowTPM)
	resp, _ := h.post(testKey, hiBody,
		"Connection", "keep-alive, X-Hop-Secret",
		"X-Hop-Secret", "drop-me",
		"X-Forwarded-For", "6.6.6.6",
		"X-End-To-End", "keep-me")
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	hdr, _ := h.mock.LastRequest()
	if v := hdr.Peek("X-Hop-Secret"); len(v) > 0 {
		t.Errorf("a field named by Connection reached the upstream: %q", v)
	}
	if v := string(hdr.Peek("X-Forwarded-For")); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q: the client's value must not be trusted", v)
	}
	if v := string(hdr.Peek("X-End-To-End")); v != "keep-me" {
		t.Errorf("end-to-end header lost: %q", v)
	}
}

func TestAcceptEncodingDoesNotBlindTheTap(t *testing.T) {
	h := start(t, slowTPM)
	// The client accepts gzip; the upstream is asked for identity, and when
	// it compresses anyway the client gets gzip bytes with a gzip header
	// while the tap still reads the usage.
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":500}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Accept-Encoding", "gzip, br")
	req.Header.Set("x-mock-gzip", "1")
	req.Header.Set("x-mock-completion-tokens", "30")
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	hdr, _ := h.mock.LastRequest()
	if ae := string(hdr.Peek("Accept-Encoding")); ae != "identity" {
		t.Errorf("upstream Accept-Encoding = %q, want identity", ae)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("client bytes are not the gzip the header says: %v", err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Contains(plain, []byte(`"completion_tokens":30`)) {
		t.Fatalf("decoded body %s", plain)
	}
	resp2, _ := h.post(testKey, hiBody)
	if r, want := remainingTokens(t, resp2.Header), int64(10000-(hiInput+30)-(hiInput+100)); r != want {
		t.Errorf("remaining %d, want %d: usage in a gzip body was not reconciled", r, want)
	}
}

func TestPathPrefixRouting(t *testing.T) {
	var mocks [2]*mockllm.Server
	for i := range mocks {
		m, err := mockllm.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		mocks[i] = m
	}
	h := startConfig(t, mocks[0], fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - name: main
    flavor: openai
    base_url: %s
    no_key: true
  - name: azure
    flavor: openai
    base_url: %s/deployments
    path_prefix: /azure
    no_key: true
keys:
  - key: %s
    tenant: acme
`, mocks[0].URL, mocks[1].URL, testKey))
	resp, _ := h.post(testKey, hiBody)
	if resp.StatusCode != 200 || mocks[0].Requests.Load() != 1 || mocks[1].Requests.Load() != 0 {
		t.Fatalf("default route: status %d, main=%d azure=%d", resp.StatusCode, mocks[0].Requests.Load(), mocks[1].Requests.Load())
	}
	req, _ := http.NewRequest(http.MethodGet, h.url+"/azure/v1/models?api-version=1", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hdr, _ := mocks[1].LastRequest()
	if mocks[1].Requests.Load() != 1 || string(hdr.RequestURI()) != "/deployments/v1/models?api-version=1" {
		t.Errorf("prefixed request: azure saw %d requests, last URI %q; want /deployments/v1/models?api-version=1", mocks[1].Requests.Load(), hdr.RequestURI())
	}
	if mocks[0].Requests.Load() != 1 {
		t.Errorf("main saw %d requests, want 1", mocks[0].Requests.Load())
	}
}

// TestConcurrentClientsNeverOverAdmit sends 64 clients' requests at once
// against a burst of 20 on a clock that never moves (no refill): exactly 20
// are admitted, whatever the interleaving and however slow the machine.
func TestConcurrentClientsNeverOverAdmit(t *testing.T) {
	const burst, workers, each = 20, 64, 8
	h := startFrozen(t, `
limits:
  - name: tenant-rps
    scope: tenant
    unit: requests
    rate: 200
    per: 1s
    burst: 20
`)
	var admitted, denied atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(hiBody))
				req.Header.Set("Authorization", "Bearer "+testKey)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					admitted.Add(1)
				case 429:
					denied.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("admitted %d, denied %d (burst %d, no refill)", admitted.Load(), denied.Load(), burst)
	if admitted.Load() != burst {
		t.Errorf("admitted %d, want exactly the burst %d: more is over-admission, less a needless denial", admitted.Load(), burst)
	}
	if denied.Load() != workers*each-burst {
		t.Errorf("denied %d, want %d", denied.Load(), workers*each-burst)
	}
	if got := h.mock.Requests.Load(); got != admitted.Load() {
		t.Errorf("upstream saw %d requests, %d were admitted: denials must not reach it", got, admitted.Load())
	}
}

func TestAnthropicRouteAndErrorShape(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	t.Setenv("LLMGUARD_TEST_ANTHROPIC_KEY", "sk-ant-upstream")
	h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: claude, flavor: anthropic, base_url: "%s", api_key_env: LLMGUARD_TEST_ANTHROPIC_KEY}
keys:
  - {key: %s, tenant: acme}
`, mock.URL, testKey))
	send := func(key string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`))
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := send("sk-wrong")
	if resp.StatusCode != 401 || !strings.HasPrefix(body, `{"type":"error","error":{"type":"authentication_error"`) {
		t.Errorf("unknown key on an Anthropic route: %d %s", resp.StatusCode, body)
	}
	send(testKey)
	hdr, _ := mock.LastRequest()
	if k := string(hdr.Peek("x-api-key")); k != "sk-ant-upstream" {
		t.Errorf("upstream x-api-key = %q, want the Anthropic upstream key", k)
	}
	if v := string(hdr.Peek("anthropic-version")); v != "2023-06-01" {
		t.Errorf("anthropic-version not forwarded: %q", v)
	}
}

func TestEncodedPathVariantsPayTheirTokens(t *testing.T) {
	h := start(t, slowTPM)
	// The mock answers these paths 404, which refunds: each request's
	// headers show its own reservation taken from a full bucket.
	// (An escaped '?' or '#' is refused instead: TestEscapedQueryMarkInPathRefused.)
	for _, path := range []string{"/v1/chat/completions;x=1", "/v1/chat/completions/", "/V1/chat/completions"} {
		req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(hiBody))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if r := remainingTokens(t, resp.Header); r != 10000-(hiInput+100) {
			t.Errorf("%s: remaining %d: the request was not weighed as a chat completion", path, r)
		}
		hdr, _ := h.mock.LastRequest()
		if got := string(hdr.RequestURI()); got != path {
			t.Errorf("%s: upstream saw %q, want the path as sent", path, got)
		}
	}
}

func TestHugeResponseKeepsItsReservation(t *testing.T) {
	h := start(t, slowTPM+"\nmax_response_bytes: 256\n")
	resp, body := h.post(testKey, hiBody, "x-mock-completion-tokens", "50")
	if resp.StatusCode != 200 || !strings.Contains(body, `"completion_tokens":50`) {
		t.Fatalf("%d %s: the large answer must pass through whole", resp.StatusCode, body)
	}
	resp, _ = h.post(testKey, hiBody)
	if r, want := remainingTokens(t, resp.Header), int64(10000-2*(hiInput+100)); r != want {
		t.Errorf("remaining %d, want %d: an answer too large to read keeps its reservation", r, want)
	}
}

func TestBillingHeadersAreTheOperators(t *testing.T) {
	h := start(t, slowTPM)
	h.post(testKey, hiBody, "OpenAI-Organization", "org-attacker", "OpenAI-Project", "proj-x", "api-key", "sk-azure", "Cookie", "a=b")
	hdr, _ := h.mock.LastRequest()
	for _, k := range []string{"OpenAI-Organization", "OpenAI-Project", "api-key", "Cookie"} {
		if v := hdr.Peek(k); len(v) > 0 {
			t.Errorf("%s reached the upstream: %q", k, v)
		}
	}
}

// A client that leaves while the upstream is silent is noticed without
// waiting for the next upstream byte: the exchange settles (charged input
// plus the output reservation, as the upstream bills what it generated
// unseen) long before the upstream's next chunk, due 5 s later.
func TestClientGoneWhileUpstreamSilent(t *testing.T) {
	h := start(t, slowTPM)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("x-mock-delay-ms", "5000")
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n') // the role chunk, sent at once
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	cancel()
	resp.Body.Close()

	deadline := time.Now().Add(3 * time.Second)
	for {
		r, err := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+testKey)
		got, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		got.Body.Close()
		// Settled: its output counted, at the reservation.
		if strings.Contains(h.metrics(), "\nllmguard_tokens_total{flavor=\"openai\",kind=\"output\",model=\"gpt-4o-mini\"} 100\n") {
			if r := remainingTokens(t, got.Header); r != 10000-(hiInput+100) {
				t.Errorf("remaining %d after the client left, want %d (input + the output reservation)", r, 10000-(hiInput+100))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled 3 s after the client left (remaining %s): the upstream was not cut", got.Header.Get("x-ratelimit-remaining-tokens"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A body whose reading depends on the parser (a key twice) never reaches
// the upstream: llmguard weighs one value, the upstream could use the other.
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	h := start(t, slowTPM)
	for _, body := range []string{
		`{"model":"gpt-4o-mini","messages":[],"max_tokens":1,"max_tokens":100000}`,
		`{"model":"gpt-4o-mini","messages":[],"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}`,
	} {
		resp, b := h.post(testKey, body)
		if resp.StatusCode != 400 || !strings.Contains(b, `"code":"duplicate_key"`) {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	if h.mock.Requests.Load() != 0 {
		t.Error("an ambiguous body reached the upstream")
	}
}
