package app

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/ledger"
)

// lenientUpstream parses request bodies the way lenient OpenAI-compatible
// servers do (Python's json.loads, Go's encoding/json: a byte-order mark
// skipped, NaN and Infinity read as numbers, UTF-16 decoded, keys matched
// without regard to case with the last one winning, a gzip-encoded body
// decoded) and bills what it parsed: input at a quarter of the decoded
// body's bytes, output at the max_tokens it read (1000 when none; a GPT
// Image generation 4,160 image tokens). It bills every endpoint it is sent;
// on the weighed ones it reports its usage, the others (batches, DALL·E
// images…) it bills silently, as a provider's invoice would.
type lenientUpstream struct {
	url      string
	reported atomic.Int64 // tokens billed and reported in usage
	silent   atomic.Int64 // tokens billed on endpoints that report no usage
	requests atomic.Int64
}

var nanLike = regexp.MustCompile(`\b(NaN|-?Infinity)\b`)

// lenientBody is what a lenient server's typed decoder reads of a body.
type lenientBody struct {
	Model               string  `json:"model"`
	MaxTokens           float64 `json:"max_tokens"`
	MaxCompletionTokens float64 `json:"max_completion_tokens"`
	MaxOutputTokens     float64 `json:"max_output_tokens"`
}

func startLenient(t *testing.T) *lenientUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &lenientUpstream{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *lenientUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.requests.Add(1)
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, _ = io.ReadAll(io.LimitReader(zr, 16<<20))
		}
	}
	switch {
	case bytes.HasPrefix(body, []byte{0xEF, 0xBB, 0xBF}):
		body = body[3:]
	case len(body) >= 2 && (body[0] == 0xFF && body[1] == 0xFE || body[0] == 0xFE && body[1] == 0xFF):
		order := binary.ByteOrder(binary.LittleEndian)
		if body[0] == 0xFE {
			order = binary.BigEndian
		}
		units := make([]uint16, (len(body)-2)/2)
		for i := range units {
			units[i] = order.Uint16(body[2+2*i:])
		}
		body = []byte(string(utf16.Decode(units)))
	}
	body = nanLike.ReplaceAll(body, []byte("0"))
	var b lenientBody
	json.Unmarshal(body, &b) // case-insensitive keys, the last one winning
	in := int64(len(body)/4 + 1)
	out := int64(max(b.MaxTokens, b.MaxCompletionTokens, b.MaxOutputTokens))
	if out <= 0 {
		out = 1000
	}
	if strings.HasSuffix(strings.ToLower(r.URL.Path), "/images/generations") {
		out = 4160 // one high-quality square image, in image tokens
	}
	if writeBilled(w, strings.ToLower(r.URL.Path), b.Model, in, out) {
		u.reported.Add(in + out)
	} else {
		u.silent.Add(in + out)
	}
}

// writeBilled answers a billing test upstream's request for path with in
// input and out output tokens: with the usage in the shape of its API for
// a chat, Responses or Messages call (reported true), without any for
// every other endpoint, which bills silently, as a provider's invoice
// would (reported false).
func writeBilled(w http.ResponseWriter, path, model string, in, out int64) (reported bool) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			model, in, out, in+out)
	case strings.HasSuffix(path, "/responses"):
		fmt.Fprintf(w, `{"id":"r","object":"response","status":"completed","model":%q,"output":[],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`,
			model, in, out, in+out)
	case strings.HasSuffix(path, "/images/generations") && strings.HasPrefix(model, "gpt-image-"):
		fmt.Fprintf(w, `{"created":1,"data":[{"b64_json":"AAAA"}],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`,
			in, out, in+out)
	case strings.HasSuffix(path, "/messages"):
		fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`,
			model, in, out)
	default:
		io.WriteString(w, `{"id":"job","object":"batch"}`)
		return false
	}
	return true
}

// The tricks, sent concurrently through llmguard to a lenient
// upstream: every one is refused with its documented status and code or
// weighed as the upstream bills it, so the bucket is never charged past
// what it admitted (no debt), nothing reaches an endpoint that bills
// without reporting, and the ledger's cost is the reported usage × price to
// the micro-dollar.
func TestLenientUpstreamIsNeverOverspent(t *testing.T) {
	up := startLenient(t)
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	cfg, err := config.Parse([]byte(baseConfig(t, up.url, fmt.Sprintf(`limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 100}
ledger: {file: %q}
`, file))))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })

	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	utf16le := func(s string) []byte {
		b := []byte{0xFF, 0xFE}
		for _, r := range utf16.Encode([]rune(s)) {
			b = binary.LittleEndian.AppendUint16(b, r)
		}
		return b
	}
	const big = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	type trick struct {
		name, path string
		body       []byte
		headers    []string
		statuses   []int // any of these
	}
	tricks := []trick{
		{"byte-order mark", "/v1/chat/completions", append([]byte{0xEF, 0xBB, 0xBF}, big...), nil, []int{400}},
		{"NaN", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000,"temperature":NaN}`), nil, []int{400}},
		{"UTF-16", "/v1/chat/completions", utf16le(big), nil, []int{400}},
		{"case-variant max_tokens", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"MAX_TOKENS":100000}`), nil, []int{400}},
		{"gzip body", "/v1/chat/completions", gz(big), []string{"Content-Encoding", "gzip"}, []int{413, 429}},
		{"no /v1 prefix", "/chat/completions", []byte(big), nil, []int{429}},
		{"batches", "/v1/batches", []byte(`{"input_file_id":"f","endpoint":"/v1/chat/completions","completion_window":"24h"}`), nil, []int{403}},
		{"images per image", "/v1/images/generations", []byte(`{"model":"dall-e-3","prompt":"a cat"}`), nil, []int{403}},
		{"images in tokens", "/v1/images/generations", []byte(`{"model":"gpt-image-1","prompt":"a cat"}`), nil, []int{200, 429}},
		{"hidden context", "/v1/responses", []byte(`{"model":"gpt-4o-mini","previous_response_id":"resp_1","input":"go on","max_output_tokens":10}`), nil, []int{429}},
		{"ordinary", "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":200}`), nil, []int{200, 429}},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for round := range 5 {
		for _, tr := range tricks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, h.url+tr.path, bytes.NewReader(tr.body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("Content-Type", "application/json")
				for i := 0; i+1 < len(tr.headers); i += 2 {
					req.Header.Set(tr.headers[i], tr.headers[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok := false
				for _, s := range tr.statuses {
					ok = ok || resp.StatusCode == s
				}
				if !ok {
					mu.Lock()
					t.Errorf("round %d, %s: %d %s, want one of %v", round, tr.name, resp.StatusCode, b, tr.statuses)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()

	if up.silent.Load() != 0 {
		t.Errorf("endpoints that bill without reporting billed %d tokens through llmguard", up.silent.Load())
	}
	// The clock is frozen: the bucket admits at most its 20,000 tokens,
	// and what the upstream billed must fit in them (the headers never show
	// a debt, so compare with the upstream's own count).
	if billed := up.reported.Load(); billed > 20000 {
		t.Errorf("the upstream billed %d tokens through a 20000-token bucket", billed)
	}
	tokens, usd := h.left()
	if charged := 20000 - tokens; charged != up.reported.Load() {
		t.Errorf("charged %d tokens, the upstream billed %d", charged, up.reported.Load())
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	var cost, usage int64
	for _, r := range recs {
		cost += r.CostMicroUSD
		usage += r.InputTokens + r.OutputTokens
		price := map[string][2]int64{"gpt-4o-mini": {150_000, 600_000}, "gpt-image-1": {5_000_000, 40_000_000}}[r.Model]
		want := (r.InputTokens*price[0] + r.OutputTokens*price[1] + 999_999) / 1_000_000
		if r.CostMicroUSD != want {
			t.Errorf("record %s: %d µUSD for %d in / %d out, want %d", r.RequestID, r.CostMicroUSD, r.InputTokens, r.OutputTokens, want)
		}
	}
	if usage != up.reported.Load() || 100_000_000-usd != cost {
		t.Errorf("ledger: %d tokens and %d µUSD; the upstream billed %d tokens, the usd bucket was charged %d µUSD",
			usage, cost, up.reported.Load(), 100_000_000-usd)
	}
}
