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
	if got := tapView([]byte("gzip"), buf.Bytes(), 4096); len(got) != 4096 {
		t.Errorf("decoded %d bytes, want the 4096-byte cap", len(got))
	}
	if got := tapView([]byte("br"), []byte("x"), 4096); got != nil {
		t.Error("an encoding the tap does not decode must give nil")
	}
	if got := tapView([]byte("gzip"), []byte("not gzip"), 4096); got != nil {
		t.Error("broken gzip must give nil")
	}
	if got := tapView(nil, []byte("plain"), 4096); string(got) != "plain" {
		t.Errorf("identity: %q", got)
	}
}

// credential is the caller's key (a test's shorthand) and the header it came from, as flavor f
// reads it (see dialect.credential).
func credential(h *fasthttp.RequestHeader, f Flavor) (key, header string) {
	return dialectOf(f).credential(h)
}
