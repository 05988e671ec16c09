package app

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	brotli "github.com/molecule-man/go-brrr"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// startStrict runs llmguard on a frozen clock with an OpenAI and an
// Anthropic upstream (both the mock), a 64 KiB body limit, a
// 100,000-token bucket and a $100 budget per user.
func startStrict(t *testing.T) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse(fmt.Appendf(nil, `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
max_body_bytes: 65536
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys:
  - {key: %[2]s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, default_max_output_tokens: 256}
  claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, default_max_output_tokens: 100}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
%[3]s
`, mock.URL, testKey, usdLimit))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
}

// send posts body to path with the test key in the flavor's header and
// the given header lines (name, value pairs; a name may repeat).
func (h *harness) send(path string, body []byte, headers ...string) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("x-api-key", testKey)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+testKey)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Content-Type" {
			req.Header.Set(headers[i], headers[i+1])
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// errorCode is the code of an error body in the flavor of path: OpenAI's
// error.code, or Anthropic's error.type (with its message).
func errorCode(t *testing.T, path, body string) (code, message string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if strings.HasPrefix(path, "/v1/messages") {
		if e.Type != "error" {
			t.Errorf("not Anthropic's error shape: %s", body)
		}
		return e.Error.Type, e.Error.Message
	}
	return e.Error.Code, e.Error.Message
}

func encodeUTF16LE(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return b
}

func encodeUTF16BE(s string) []byte {
	b := []byte{0xfe, 0xff}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.BigEndian.AppendUint16(b, u)
	}
	return b
}

func encodeUTF32LE(s string) []byte {
	var b []byte
	for _, r := range s {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	return b
}

func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func deflated(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func brotlied(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := brotli.NewWriter(&buf, 5)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zstded(t testing.TB, b []byte) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.EncodeAll(b, nil)
}

const (
	strictChatBody     = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	strictMessagesBody = `{"model":"claude-sonnet-4-5","max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`
)

// strictTrick is a body a lenient upstream reads (Python's json.loads, Go's
// encoding/json) but llmguard cannot weigh as it does, with the status and
// code it gets, in the flavor's shape.
type strictTrick struct {
	name, path string
	body       []byte
	headers    []string
	status     int
	code       string // OpenAI's code; Anthropic paths: the error type
}

// strictTricks are every trick (built on demand: the bombs take a moment
// to compress).
func strictTricks(t testing.TB) []strictTrick {
	const bomb = 4 << 20 // bytes decoded from a few KiB; the limit is 64 KiB
	return []strictTrick{
		{"byte-order mark", "/v1/chat/completions", []byte("\xef\xbb\xbf" + strictChatBody), nil, 400, "json_bom"},
		{"NaN", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":NaN}`), nil, 400, "invalid_json"},
		{"Infinity", "/v1/responses", []byte(`{"model":"gpt-4o-mini","input":"hi","max_output_tokens":Infinity}`), nil, 400, "invalid_json"},
		{"comment", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini", /* 100000 */ "messages":[]}`), nil, 400, "invalid_json"},
		{"trailing data", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":1} {"max_tokens":100000}`), nil, 400, "invalid_json"},
		{"single quotes", "/v1/completions", []byte(`{'model':'gpt-4o-mini','prompt':'hi'}`), nil, 400, "invalid_json"},
		{"UTF-16LE", "/v1/chat/completions", encodeUTF16LE(strictChatBody), nil, 400, "invalid_utf8"},
		{"UTF-16BE with its mark", "/v1/chat/completions", encodeUTF16BE(strictChatBody), nil, 400, "invalid_utf8"},
		{"UTF-32LE", "/v1/embeddings", encodeUTF32LE(`{"model":"text-embedding-3-small","input":"hi"}`), nil, 400, "invalid_utf8"},
		{"Latin-1", "/v1/chat/completions", []byte("{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}"), nil, 400, "invalid_utf8"},
		{"top level array", "/v1/chat/completions", []byte(`[` + strictChatBody + `]`), nil, 400, "json_not_object"},
		{"top level string", "/v1/responses", []byte(`"hi"`), nil, 400, "json_not_object"},
		{"key twice", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":1,"max_tokens":100000}`), nil, 400, "duplicate_key"},
		{"MAX_TOKENS next to max_tokens", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":1,"MAX_TOKENS":100000}`), nil, 400, "case_variant_key"},
		{"MAX_TOKENS alone", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"MAX_TOKENS":100000}`), nil, 400, "case_variant_key"},
		{"Model alone", "/v1/chat/completions", []byte(`{"Model":"gpt-4o","messages":[]}`), nil, 400, "case_variant_key"},
		{"N", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":1,"N":128}`), nil, 400, "case_variant_key"},
		{"Kelvin sign", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_to` + "\u212a" + `ens":100000}`), nil, 400, "case_variant_key"},
		{"message Content", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","Content":"` + strings.Repeat("long text ", 500) + `"}]}`), nil, 400, "case_variant_key"},
		{"responses Max_Output_Tokens", "/v1/responses", []byte(`{"model":"gpt-4o-mini","input":"hi","Max_Output_Tokens":100000}`), nil, 400, "case_variant_key"},
		// Anthropic: the same refusals in Anthropic's shape.
		{"anthropic byte-order mark", "/v1/messages", []byte("\xef\xbb\xbf" + strictMessagesBody), nil, 400, "invalid_request_error"},
		{"anthropic NaN", "/v1/messages", []byte(`{"model":"claude-sonnet-4-5","max_tokens":NaN,"messages":[]}`), nil, 400, "invalid_request_error"},
		{"anthropic Max_Tokens", "/v1/messages", []byte(`{"model":"claude-sonnet-4-5","Max_Tokens":100000,"max_tokens":1,"messages":[]}`), nil, 400, "invalid_request_error"},
		{"anthropic UTF-16", "/v1/messages", encodeUTF16LE(strictMessagesBody), nil, 400, "invalid_request_error"},
		// The request's encoding.
		{"charset utf-16", "/v1/chat/completions", []byte(strictChatBody), []string{"Content-Type", "application/json; charset=utf-16"}, 415, "unsupported_charset"},
		{"charset latin-1", "/v1/messages", []byte(strictMessagesBody), []string{"Content-Type", `application/json; charset="ISO-8859-1"`}, 415, "invalid_request_error"},
		{"compress", "/v1/chat/completions", []byte(strictChatBody), []string{"Content-Encoding", "compress"}, 415, "unsupported_content_encoding"},
		{"gzip, then an unknown coding", "/v1/chat/completions", []byte(strictChatBody), []string{"Content-Encoding", "gzip", "Content-Encoding", "lzma"}, 415, "unsupported_content_encoding"},
		{"gzip that is not gzip", "/v1/chat/completions", []byte(strictChatBody), []string{"Content-Encoding", "gzip"}, 400, "invalid_content_encoding"},
		{"gzip with trailing data", "/v1/chat/completions", append(gzipped(t, []byte(strictChatBody)), `{"max_tokens":100000}`...), []string{"Content-Encoding", "gzip"}, 400, "invalid_content_encoding"},
		{"gzip bomb", "/v1/chat/completions", gzipped(t, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+strings.Repeat(" ", bomb)+`"}]}`)), []string{"Content-Encoding", "gzip"}, 413, "request_too_large"},
		{"zstd bomb", "/v1/responses", zstded(t, []byte(`{"model":"gpt-4o-mini","input":"`+strings.Repeat("a", bomb)+`"}`)), []string{"Content-Encoding", "zstd"}, 413, "request_too_large"},
		{"br bomb", "/v1/messages", brotlied(t, make([]byte, bomb)), []string{"Content-Encoding", "br"}, 413, "request_too_large"},
		{"gzip of a byte-order mark", "/v1/chat/completions", gzipped(t, []byte("\xef\xbb\xbf"+strictChatBody)), []string{"Content-Encoding", "gzip"}, 400, "json_bom"},
		{"deflate of MAX_TOKENS", "/v1/chat/completions", deflated(t, []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":1,"MAX_TOKENS":100000}`)), []string{"Content-Encoding", "deflate"}, 400, "case_variant_key"},
		{"br of NaN", "/v1/messages", brotlied(t, []byte(`{"model":"claude-sonnet-4-5","max_tokens":NaN,"messages":[]}`)), []string{"Content-Encoding", "br"}, 400, "invalid_request_error"},
	}
}

// TestStrictBodiesAreRefused: every trick, sent concurrently through real
// sockets, gets its documented status and code in its flavor's shape; the
// upstream receives none of them and no bucket or budget is charged.
func TestStrictBodiesAreRefused(t *testing.T) {
	h := startStrict(t)
	tokens, usd := h.left()
	if tokens != 100000 || usd != 100_000_000 {
		t.Fatalf("buckets start at %d tokens, %d micro-USD", tokens, usd)
	}
	probes := h.mock.Requests.Load() // h.left's GET /v1/models goes upstream
	var wg sync.WaitGroup
	for _, tc := range strictTricks(t) {
		for range 3 {
			wg.Go(func() {
				resp, body := h.send(tc.path, tc.body, tc.headers...)
				if resp.StatusCode != tc.status {
					t.Errorf("%s: status %d, want %d: %.300s", tc.name, resp.StatusCode, tc.status, body)
					return
				}
				code, msg := errorCode(t, tc.path, body)
				if code != tc.code || msg == "" {
					t.Errorf("%s: code %q, want %q: %.300s", tc.name, code, tc.code, body)
				}
				if resp.Header.Get("x-llmguard-request-id") == "" {
					t.Errorf("%s: no request id", tc.name)
				}
			})
		}
	}
	wg.Wait()
	if n := h.mock.Requests.Load() - probes; n != 0 {
		t.Errorf("the upstream received %d of the refused bodies", n)
	}
	if tk, u := h.left(); tk != tokens || u != usd {
		t.Errorf("after the refusals: %d tokens, %d micro-USD left; want %d, %d: something was charged", tk, u, tokens, usd)
	}
	if !strings.Contains(h.metrics(), `outcome="invalid"`) {
		t.Error("refusals not counted as outcome invalid")
	}
	// Every byte held for the bodies, decoded ones and decoder windows
	// included, was given back (the handler releases before it answers).
	if n := h.bodyBytesInFlight(); n != 0 {
		t.Errorf("%v body bytes still held after every answer", n)
	}
}

// TestRefusalMessagesNameTheReason: the message says what and where.
func TestRefusalMessagesNameTheReason(t *testing.T) {
	h := startStrict(t)
	for _, tc := range []struct {
		path string
		body []byte
		want string
	}{
		{"/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"max_tokens":NaN}`), "NaN and Infinity are not JSON numbers (byte 50)"},
		{"/v1/chat/completions", []byte("\xef\xbb\xbf{}"), "byte-order mark"},
		{"/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[],"MAX_TOKENS":1}`), `key "MAX_TOKENS" is the field "max_tokens" in another case`},
		{"/v1/messages", encodeUTF16LE(strictMessagesBody), "byte 1 (0x00) is not UTF-8"},
	} {
		_, body := h.send(tc.path, tc.body)
		if _, msg := errorCode(t, tc.path, body); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: message %q does not say %q", tc.body, msg, tc.want)
		}
	}
}

// TestEncodedBodiesAreWeighedAndForwardedDecoded: a body in any supported
// coding is decoded, weighed as its JSON, and forwarded decoded (no
// Content-Encoding, its true length), so that the upstream reads exactly
// what llmguard weighed.
func TestEncodedBodiesAreWeighedAndForwardedDecoded(t *testing.T) {
	h := startStrict(t)
	plain := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Tell me about token buckets."}],"max_tokens":40}`)
	before, _ := h.left()
	resp, body := h.send("/v1/chat/completions", plain, "x-mock-completion-tokens", "5")
	if resp.StatusCode != 200 {
		t.Fatalf("plain: %d %s", resp.StatusCode, body)
	}
	after, _ := h.left()
	cost := before - after
	for _, tc := range []struct {
		name    string
		body    []byte
		headers []string
	}{
		{"gzip", gzipped(t, plain), []string{"Content-Encoding", "gzip"}},
		{"x-gzip", gzipped(t, plain), []string{"Content-Encoding", "x-gzip"}},
		{"deflate", deflated(t, plain), []string{"Content-Encoding", "deflate"}},
		{"br", brotlied(t, plain), []string{"Content-Encoding", "br"}},
		{"zstd", zstded(t, plain), []string{"Content-Encoding", "zstd"}},
		{"gzip then br", brotlied(t, gzipped(t, plain)), []string{"Content-Encoding", "gzip, br"}},
		{"identity line, then gzip line", gzipped(t, plain), []string{"Content-Encoding", "identity", "Content-Encoding", "gzip"}},
		{"charset utf-8", plain, []string{"Content-Type", "application/json; charset=UTF-8"}},
	} {
		before, _ := h.left()
		resp, body := h.send("/v1/chat/completions", tc.body, append([]string{"x-mock-completion-tokens", "5"}, tc.headers...)...)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
			continue
		}
		got, sent := h.mock.LastRequest()
		if !bytes.Equal(sent, plain) || len(got.Peek("Content-Encoding")) != 0 || got.ContentLength() != len(plain) {
			t.Errorf("%s: upstream got %q with Content-Encoding %q, Content-Length %d", tc.name, sent, got.Peek("Content-Encoding"), got.ContentLength())
		}
		if after, _ := h.left(); before-after != cost {
			t.Errorf("%s: charged %d tokens, the plain body %d", tc.name, before-after, cost)
		}
	}
	if n := h.bodyBytesInFlight(); n != 0 {
		t.Errorf("%v body bytes still held after every answer", n)
	}
}

// TestUnweighedEndpointsKeepTheirBodies: an endpoint llmguard does not
// weigh gets the body as sent, encoding and all, as before.
func TestUnweighedEndpointsKeepTheirBodies(t *testing.T) {
	h := startStrict(t)
	enc := gzipped(t, []byte("\xef\xbb\xbf{\"model\":\"claude-sonnet-4-5\",\"messages\":[]}"))
	h.send("/v1/messages/count_tokens", enc, "Content-Encoding", "gzip")
	got, sent := h.mock.LastRequest()
	if h.mock.Requests.Load() != 1 || !bytes.Equal(sent, enc) || string(got.Peek("Content-Encoding")) != "gzip" {
		t.Errorf("count_tokens: upstream got %d requests, %q with Content-Encoding %q", h.mock.Requests.Load(), sent, got.Peek("Content-Encoding"))
	}
	h.send("/v1/messages/count_tokens", []byte("NaN"), "Content-Encoding", "compress")
	if h.mock.Requests.Load() != 2 {
		t.Errorf("an unweighed endpoint refused an unknown coding")
	}
}
