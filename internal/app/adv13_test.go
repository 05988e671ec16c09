package app

// Adversarial tests of the third review: each drives llmguard through real
// loopback sockets to an upstream that bills what it reads and fails where
// the upstream billed more than llmguard admitted.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/llmguard/llmguard/internal/mockllm"
	"io"
	"net"
	"net/http"
	pathpkg "path"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawRoundTrip writes req (a whole HTTP/1.1 request, as bytes on the wire)
// to addr on a connection of its own and returns the answer's status and
// body; status 0 when no answer could be read.
func rawRoundTrip(t *testing.T, url, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard, not a timing bound
	if _, err := io.WriteString(c, req); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// A read method (GET, HEAD, DELETE, OPTIONS, in any case) counts as one
// request whatever its path, so it must not carry a body to the upstream:
// an upstream that routes by path alone (internal/mockllm does; so do
// handlers registered without a method) serves a GET with a chat body as a
// chat completion and bills it. Through a 1,000-token bucket, each such
// call billed 100,022 tokens and the bucket still held 1,000.
func TestAdv13ReadMethodWithBodyNotForwarded(t *testing.T) {
	up := startBilling(t, 1000, 0)
	h := advStart(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
`)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	head := "Host: llmguard\r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\nConnection: close\r\n"
	for _, tc := range []struct{ name, req string }{
		{"GET", "GET /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"get", "get /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"DELETE", "DELETE /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"OPTIONS", "OPTIONS /v1/responses HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"HEAD", "HEAD /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"GET chunked", "GET /v1/chat/completions HTTP/1.1\r\n" + head + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)},
	} {
		st, got := rawRoundTrip(t, h.url, tc.req)
		if st == http.StatusOK {
			t.Errorf("%s with a chat body: %d %.80s", tc.name, st, got)
		}
	}
	if billed := up.reported.Load() + up.silent.Load(); billed > 1000 {
		t.Errorf("the upstream billed %d tokens through a 1,000-token bucket", billed)
	}
	// A read without a body (or with an empty one) still passes.
	for _, req := range []string{
		"GET /v1/models HTTP/1.1\r\n" + head + "\r\n",
		"DELETE /v1/files/file-abc HTTP/1.1\r\n" + head + "Content-Length: 0\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\n" + head + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		if st, got := rawRoundTrip(t, h.url, req); st != http.StatusOK {
			t.Errorf("%q: %d %.80s, want 200", req[:strings.IndexByte(req, '\r')], st, got)
		}
	}
}

// resolvingUpstream is a billing upstream (startBilling) behind a front
// that reads paths more leniently than llmguard's HTTP server: ";params"
// dropped from each segment (Tomcat, Spring, Jetty), backslashes read as
// slashes (IIS, and Windows-hosted servers), percent-escapes decoded a
// second time (a gateway that decodes, then a server that decodes again),
// and dot segments then resolved (RFC 3986 §5.2.4).
// It returns the front's URL and the upstream behind it.
func startResolving(t *testing.T) (string, *billingUpstream) {
	t.Helper()
	up := startBilling(t, 1000, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := strings.TrimPrefix(up.url, "http://")
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		p = strings.Join(segs, "/")
		p = lenientUnescape(lenientUnescape(p))
		p = pathpkg.Clean(strings.ReplaceAll(p, `\`, "/"))
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(r.Method, "http://"+target+p, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), up
}

// The path llmguard classifies must be the path every upstream serves: a
// path that a lenient front reads as another endpoint (a ";param" on a dot
// segment, a backslash, a percent-escape decoded twice) was weighed as the
// endpoint it spelled (a chat body as a legacy completion: 1 input token)
// or counted as one free request (POST /v1/chat/completions/{id}, a stored
// completion's update), and served as a chat completion.
func TestAdv13AmbiguousPathsRefused(t *testing.T) {
	front, up := startResolving(t)
	h := advStart(t, front, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
`)
	// 600 input tokens and a small output: within the bucket only if
	// weighed below what the upstream bills.
	big := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 600) + `"}],"max_tokens":5}`
	head := "Host: llmguard\r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\nConnection: close\r\n"
	for _, target := range []string{
		"/v1/chat/completions/..;/completions", // Tomcat: chat; llmguard read a legacy completion
		"/v1/chat/completions/x\\..",           // IIS: chat; llmguard read a stored completion's update
		"/v1/chat/completions/x%5C..",
		"/v1/chat/completions/x%252f..", // decoded twice: chat
		"/v1/chat/completions/x%252F%252e%252e",
		"/v1/chat/completions/.;/..;",
		"/v1/chat/completions/x%2%66..", // decoded once by llmguard: x%2f..; twice: x/..
	} {
		st, got := rawRoundTrip(t, h.url, "POST "+target+" HTTP/1.1\r\n"+head+"Content-Length: "+fmt.Sprint(len(big))+"\r\n\r\n"+big)
		if st != http.StatusBadRequest || !strings.Contains(got, `"invalid_path"`) {
			t.Errorf("POST %s: %d %.80s, want 400 invalid_path", target, st, got)
		}
	}
	if billed := up.reported.Load() + up.silent.Load(); billed > 1000 {
		t.Errorf("the upstream billed %d tokens through a 1,000-token bucket", billed)
	}
	// Plain spellings still pass, weighed: ordinary escapes, a dot inside
	// a segment, case, a trailing slash.
	small := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	for _, target := range []string{"/v1/chat/completions", "/V1/Chat/Completions/", "/v1/chat/c%6Fmpletions", "/v1/chat/completions?x=a%2Fb"} {
		st, got := rawRoundTrip(t, h.url, "POST "+target+" HTTP/1.1\r\n"+head+"Content-Length: "+fmt.Sprint(len(small))+"\r\n\r\n"+small)
		if st != http.StatusOK {
			t.Errorf("POST %s: %d %.80s, want 200", target, st, got)
		}
	}
	if billed := up.reported.Load(); billed == 0 || billed > 1000 {
		t.Errorf("the upstream reported %d tokens for the plain calls, want some and at most 1,000", billed)
	}
}

// lenientUnescape decodes the %XX escapes of s and leaves a '%' that starts
// none as it is, as fasthttp and most servers do.
func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// fastModeUpstream answers Anthropic Messages calls as the API does for
// Claude Opus 4.6 with "speed": "fast" (fast mode,
// https://platform.claude.com/docs/en/build-with-claude/fast-mode): the
// usage reports speed "fast" and the call is billed at 6× the standard
// rates ($30/$150 per million tokens instead of $5/$25). billed is what
// it billed, in micro-USD.
type fastModeUpstream struct {
	url    string
	billed atomic.Int64
}

func startFastMode(t *testing.T) *fastModeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &fastModeUpstream{url: "http://" + ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			MaxTokens int64  `json:"max_tokens"`
			Speed     string `json:"speed"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &b)
		in, out := int64(len(body)/4+1), b.MaxTokens
		speed, inRate, outRate := "standard", int64(5), int64(25) // micro-USD per token
		if b.Speed == "fast" {
			speed, inRate, outRate = "fast", 30, 150
		}
		u.billed.Add(in*inRate + out*outRate)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":"claude-opus-4-6","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d,"speed":%q}}`, in, out, speed)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

// Anthropic's fast mode ("speed": "fast") bills Claude Opus 4.6 at 6× its
// standard rates: llmguard priced it at the standard rates, so a usd
// limit of $0.10 let through calls billed $0.42 each. A request that asks
// for another speed is priced at the dearest tier (as an unknown
// service_tier is): refused under usd limits unless the model has
// priority prices, which an operator sets to its fast-mode prices.
func TestAdv13AnthropicFastModePriced(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	body := `{"model":"claude-opus-4-6","max_tokens":2000,"speed":"fast","messages":[{"role":"user","content":"Refactor this module."}]}`
	for _, tc := range []struct {
		name, priority string
		admitted       bool
	}{
		{"no priority prices", "", false},
		{"priority priced as fast mode", "priority: {input_usd_per_mtok: 30, output_usd_per_mtok: 150}", true},
	} {
		up := startFastMode(t)
		h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
models:
  claude-opus-4-6: {input_usd_per_mtok: 5, output_usd_per_mtok: 25, default_max_output_tokens: 100, %s}
limits:
  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 0.5}
`, mock.URL, up.url, testKey, tc.priority))
		before := rateLimitRemaining(t, h.probe(), "user-usd")
		var admitted int
		for range 3 {
			resp, got := h.do("/v1/messages", body)
			switch {
			case resp.StatusCode == http.StatusOK:
				admitted++
			case tc.admitted && resp.StatusCode == http.StatusTooManyRequests: // the $0.50 spent
			case !tc.admitted && resp.StatusCode == http.StatusBadRequest && strings.Contains(got, `models.\"claude-opus-4-6\".priority`):
			default:
				t.Errorf("%s: %d %.160s", tc.name, resp.StatusCode, got)
			}
		}
		charged := before - rateLimitRemaining(t, h.probe(), "user-usd")
		if billed := up.billed.Load(); charged < billed {
			t.Errorf("%s: %d calls admitted, the upstream billed %d micro-USD, the usd limit was charged %d", tc.name, admitted, billed, charged)
		}
		if tc.admitted && admitted == 0 {
			t.Errorf("%s: no call admitted", tc.name)
		}
		if !tc.admitted { // the standard speed is priced as it always was
			std := strings.Replace(body, `"fast"`, `"standard"`, 1)
			if resp, got := h.do("/v1/messages", std); resp.StatusCode != http.StatusOK {
				t.Errorf("speed standard: %d %.160s", resp.StatusCode, got)
			}
		}
	}
}

// backgroundUpstream answers Responses calls as OpenAI's background mode
// does (https://platform.openai.com/docs/guides/background): a
// background request is answered at once, "queued", with no usage, and
// the run bills its input (10 tokens) and its output later (runOutput tokens when the
// request names no max_output_tokens, as a model runs to its own limit).
// A request not in the background is answered with its usage.
type backgroundUpstream struct {
	url       string
	runOutput int64
	billed    atomic.Int64
}

func startBackground(t *testing.T, runOutput int64) *backgroundUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &backgroundUpstream{url: "http://" + ln.Addr().String(), runOutput: runOutput}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		var b struct {
			Background      bool  `json:"background"`
			Stream          bool  `json:"stream"`
			MaxOutputTokens int64 `json:"max_output_tokens"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &b)
		in, out := int64(10), u.runOutput // the input as o200k counts it (llmguard counts 13 with the framing)
		if b.MaxOutputTokens > 0 {
			out = min(out, b.MaxOutputTokens)
		}
		u.billed.Add(in + out)
		w.Header().Set("Content-Type", "application/json")
		if b.Background && b.Stream {
			// The stream breaks off after its first event (the client's
			// connection, or the upstream's, went): the run goes on.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_2\",\"status\":\"queued\",\"background\":true,\"usage\":null}}\n\n")
			return
		}
		if b.Background {
			io.WriteString(w, `{"id":"resp_1","object":"response","status":"queued","background":true,"model":"gpt-4o-mini","output":[],"usage":null}`)
			return
		}
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

// A Responses request with "background": true is answered before it runs,
// with no usage, so the reservation is all it is ever charged: without an
// output maximum that reservation was the model's default output (256
// tokens here) while the run produced 5,000, and a 20,000-token bucket
// let through calls billed 5,000 each until 20 had billed 100,000. Such a
// request must name max_output_tokens (then input + maximum bounds what
// it bills), or it is refused; a stream of one that ends without its usage
// is charged its whole reservation, since the run goes on.
func TestAdv13BackgroundResponseBounded(t *testing.T) {
	up := startBackground(t, 5000)
	h := advStart(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`)
	for range 20 {
		advPost(t, h.url, "/v1/responses", []byte(`{"model":"gpt-4o-mini","input":"Write a long essay.","background":true}`))
	}
	resp, got := advPost(t, h.url, "/v1/responses", []byte(`{"model":"gpt-4o-mini","input":"Write a long essay.","background":true,"max_output_tokens":3000}`))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a background request with max_output_tokens: %d %.120s", resp.StatusCode, got)
	}
	resp, got = advPost(t, h.url, "/v1/responses", []byte(`{"model":"gpt-4o-mini","input":"Write a long essay.","background":true,"stream":true,"max_output_tokens":2000}`))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a streamed background request with max_output_tokens: %d %.120s", resp.StatusCode, got)
	}
	resp, got = advPost(t, h.url, "/v1/responses", []byte(`{"model":"gpt-4o-mini","input":"Write a long essay."}`))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request not in the background: %d %.120s", resp.StatusCode, got)
	}
	charged := 20000 - h.tokensLeft()
	if billed := up.billed.Load(); charged < billed {
		t.Errorf("the upstream billed %d tokens, the bucket was charged %d", billed, charged)
	}
}

// A limit whose refill takes longer than time.Duration holds (292 years:
// $0.01 refilled at $0.000001 a month) wrote w=-9223372035 in
// RateLimit-Policy, and a denial by it Retry-After: 1: rounding up to the
// second overflowed. Every duration field must be non-negative, and a
// denial's Retry-After at least the time the bucket needs.
func TestAdv13HugeWindowsDoNotOverflow(t *testing.T) {
	up := startBilling(t, 1000, 0)
	h := advStart(t, up.url, `limits:
  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 720h, burst: 0.01}
`)
	neg := regexp.MustCompile(`[=:] ?-[0-9]`)
	hd := h.probe()
	for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
		if v := hd.Get(f); neg.MatchString(v) {
			t.Errorf("%s: %s", f, v)
		}
	}
	resp, _ := advPost(t, h.url, "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":15000}`))
	resp, got := advPost(t, h.url, "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":15000}`))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call: %d %.120s, want 429", resp.StatusCode, got)
	}
	if ra, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err != nil || ra < 86400 {
		t.Errorf("Retry-After %q, want the bucket's refill time (over a day)", resp.Header.Get("Retry-After"))
	}
	for name, v := range resp.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-ratelimit") || strings.HasPrefix(strings.ToLower(name), "ratelimit") || strings.EqualFold(name, "retry-after-ms") {
			if strings.Contains(v[0], "-") && neg.MatchString("="+v[0]) || strings.HasPrefix(v[0], "-") {
				t.Errorf("%s: %s", name, v[0])
			}
		}
	}
}
