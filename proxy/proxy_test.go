package proxy

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/weigher"
)

func TestClassifyErrsTowardsWeighing(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         weigher.Kind
	}{
		{"POST", "/v1/chat/completions", weigher.KindChat},
		{"post", "/v1/chat/completions", weigher.KindChat},
		{"PUT", "/v1/chat/completions", weigher.KindChat},
		{"POST", "/v1/chat/completions/", weigher.KindChat},
		{"POST", "/V1/Chat/Completions", weigher.KindChat},
		{"POST", "/v1/chat/completions?", weigher.KindChat}, // a decoded %3F
		{"POST", "/v1/chat/completions#x", weigher.KindChat},
		{"GET", "/v1/chat/completions", weigher.KindOther},
		{"POST", "/v1/models", weigher.KindOther},
		{"POST", "/v1/chat/completionsX", weigher.KindUnmetered}, // an unknown POST may be billed: unmetered
		{"POST", "/v1/responses", weigher.KindResponses},
		{"POST", "/v1/completions", weigher.KindCompletions},
		{"POST", "/v1/embeddings/", weigher.KindEmbeddings},
		{"POST", "/v1/messages", weigher.KindMessages},
		{"POST", "/v1/messages/count_tokens", weigher.KindCountTokens},
	} {
		if got := classify([]byte(tc.method), tc.path); got != tc.want {
			t.Errorf("classify(%s %s) = %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestStripPrefix(t *testing.T) {
	for _, tc := range []struct {
		raw, prefix, want string
		ok                bool
	}{
		{"/v1/chat/completions", "", "/v1/chat/completions", true},
		{"/azure/v1/x", "/azure", "/v1/x", true},
		{"/azure", "/azure/", "/", true},
		{"/%61zure/v1/x", "/azure", "", false},
		{"/azurex/v1", "/azure", "", false},
	} {
		got, ok := stripPrefix(tc.raw, tc.prefix)
		if got != tc.want || ok != tc.ok {
			t.Errorf("stripPrefix(%q, %q) = %q, %v; want %q, %v", tc.raw, tc.prefix, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCredentialFollowsTheFlavor(t *testing.T) {
	var h fasthttp.RequestHeader
	h.Set("Authorization", "Bearer sk-bearer")
	h.Set("x-api-key", "sk-apikey")
	if k, from := credential(&h, FlavorOpenAI); k != "sk-bearer" || from != "Authorization" {
		t.Errorf("openai: %q from %s", k, from)
	}
	if k, from := credential(&h, FlavorAnthropic); k != "sk-apikey" || from != "x-api-key" {
		t.Errorf("anthropic: %q from %s", k, from)
	}
	h.Set("Authorization", "BEARER   sk-upper  ")
	if k, _ := credential(&h, FlavorOpenAI); k != "sk-upper" {
		t.Errorf("bearer scheme is case-insensitive and the key trimmed: %q", k)
	}
	h.Del("Authorization")
	if k, from := credential(&h, FlavorOpenAI); k != "sk-apikey" || from != "x-api-key" {
		t.Errorf("openai fallback: %q from %s", k, from)
	}
}

func TestTapViewBoundsDecompression(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(strings.Repeat("0", 1<<20))) // 1 MiB of zeros, ~1 KiB compressed
	zw.Close()
	p := budgetOnly(1 << 30)
	view := heldAnswer{p: p}
	if got, _ := tapView([]byte("gzip"), buf.Bytes(), 4096, &view); len(got) != 4096 {
		t.Errorf("decoded %d bytes, want the 4096-byte cap", len(got))
	}
	view.release()
	if got, why := tapView([]byte("br"), []byte("x"), 4096, &view); got != nil || why != unreadUndecodable {
		t.Errorf("an encoding the tap does not decode must give nil, %s (got %d bytes, %q)", unreadUndecodable, len(got), why)
	}
	if got, why := tapView([]byte("gzip"), []byte("not gzip"), 4096, &view); got != nil || why != unreadUndecodable {
		t.Errorf("broken gzip must give nil, %s (got %d bytes, %q)", unreadUndecodable, len(got), why)
	}
	// Cut short, it gives what it decoded to, its decoded prefix (adv30:
	// a cut answer's text is charged), still counted undecodable.
	if got, why := tapView([]byte("gzip"), buf.Bytes()[:len(buf.Bytes())/2], 1<<20, &view); len(got) == 0 || len(got) >= 1<<20 || strings.Trim(string(got), "0") != "" || why != unreadUndecodable {
		t.Errorf("gzip cut short must give its decoded prefix, %s (got %d bytes, %q)", unreadUndecodable, len(got), why)
	}
	view.release()
	if got, _ := tapView(nil, []byte("plain"), 4096, &view); string(got) != "plain" {
		t.Errorf("identity: %q", got)
	}
	if n := p.ResponseBytesHeld(); n != 0 {
		t.Errorf("%d bytes still held", n)
	}
}

// TestTapViewTakesFromTheBudget: the decoded copy's bytes come from the
// answer budget as it grows: a budget too small for it gives nil (full),
// holding nothing, and one large enough holds the copy's buffer until it
// is released.
func TestTapViewTakesFromTheBudget(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(strings.Repeat("0", 100<<10))) // 100 KiB decoded
	zw.Close()
	for _, tc := range []struct {
		name     string
		budget   int64
		wantFull bool
	}{
		{name: "no room for the first chunk", budget: readChunk - 1, wantFull: true},
		{name: "room for the first chunks only", budget: 64 << 10, wantFull: true},
		{name: "room", budget: 1 << 20},
	} {
		p := budgetOnly(tc.budget)
		view := heldAnswer{p: p}
		got, why := tapView([]byte("gzip"), buf.Bytes(), 1<<20, &view)
		full := why == unreadDecodeBudget
		if full != tc.wantFull || (got == nil) != tc.wantFull {
			t.Errorf("%s: full %v, %d bytes decoded; want full %v", tc.name, full, len(got), tc.wantFull)
		}
		if !tc.wantFull && (len(got) != 100<<10 || p.ResponseBytesHeld() < 100<<10 || p.ResponseBytesHeld() > tc.budget) {
			t.Errorf("%s: %d bytes decoded, %d held of %d", tc.name, len(got), p.ResponseBytesHeld(), tc.budget)
		}
		view.release()
		if n := p.ResponseBytesHeld(); n != 0 {
			t.Errorf("%s: %d bytes held after release", tc.name, n)
		}
	}
}

// budgetOnly is a Proxy with an answer budget of max bytes and nothing
// else: enough for heldAnswer and tapView.
func budgetOnly(max int64) *Proxy {
	p := &Proxy{answerPool: newAnswerPool(max)}
	p.answers.max = max
	return p
}

// credential is the caller's key (a test's shorthand) and the header it came from, as flavor f
// reads it (see dialect.credential).
func credential(h *fasthttp.RequestHeader, f Flavor) (key, header string) {
	k, header := dialectOf(f).credential(h)
	return string(k), header
}
