package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// Every flavor spec defines has a dialect, whose error bodies are JSON
// objects that carry the message and whose upstream credential is read
// back as the caller's: a flavor added to spec without its dialect fails
// here (and Upstream.init refuses it), never falls back to another's.
func TestEveryFlavorHasADialect(t *testing.T) {
	for _, name := range spec.FlavorNames() {
		f, _ := spec.ParseFlavor(name)
		d := dialectOf(f)
		if d == nil {
			t.Errorf("flavor %s has no dialect", name)
			continue
		}
		var v map[string]any
		body := d.appendError(nil, errUnauthorized)
		if err := json.Unmarshal(body, &v); err != nil {
			t.Errorf("%s: error body %s is not JSON: %v", name, body, err)
		}
		if !json.Valid(body) || !containsString(v, errUnauthorized.message) {
			t.Errorf("%s: error body %s does not carry the message", name, body)
		}
		var h fasthttp.RequestHeader
		h.Set(d.authorization("sk-gateway"))
		if key, _ := d.credential(&h); string(key) != "sk-gateway" {
			t.Errorf("%s: the credential authorization sets reads back as %q", name, key)
		}
	}
	if u := (&Upstream{Name: "x", Flavor: spec.Flavor(200), BaseURL: "http://127.0.0.1:1"}); u.init() == nil {
		t.Error("an upstream of a flavor without a dialect was accepted")
	}
}

// containsString reports whether s is a string value anywhere in v.
func containsString(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return v == s
	case map[string]any:
		for _, e := range v {
			if containsString(e, s) {
				return true
			}
		}
	}
	return false
}

// Azure's paths name the same endpoints as OpenAI's, whatever their case,
// and the deployment they carry.
func TestAzureEndpoints(t *testing.T) {
	for _, tc := range []struct {
		path, canonical, deployment string
		kind                        weigher.Kind
	}{
		{"/openai/deployments/chat-prod/chat/completions", "/v1/chat/completions", "chat-prod", weigher.KindChat},
		{"/OpenAI/Deployments/Chat-Prod/Chat/Completions/", "/v1/Chat/Completions/", "Chat-Prod", weigher.KindChat},
		{"/openai/deployments/instruct/completions", "/v1/completions", "instruct", weigher.KindCompletions},
		{"/openai/deployments/embed/embeddings", "/v1/embeddings", "embed", weigher.KindEmbeddings},
		{"/openai/deployments/img/images/generations", "/v1/images/generations", "img", weigher.KindImages},
		{"/openai/deployments/x", "/v1/deployments/x", "", weigher.KindUnmetered}, // no known endpoint: unmetered
		{"/openai/v1/chat/completions", "/v1/chat/completions", "", weigher.KindChat},
		{"/openai/v1/responses", "/v1/responses", "", weigher.KindResponses},
		{"/openai/responses", "/v1/responses", "", weigher.KindResponses},
		{"/openai/v1/embeddings", "/v1/embeddings", "", weigher.KindEmbeddings},
		{"/v1/chat/completions", "/v1/chat/completions", "", weigher.KindChat},
	} {
		canonical, dep := azure{}.endpoint(tc.path)
		if canonical != tc.canonical || dep != tc.deployment {
			t.Errorf("%s: %q, %q; want %q, %q", tc.path, canonical, dep, tc.canonical, tc.deployment)
		}
		if k := classify([]byte("POST"), canonical); k != tc.kind {
			t.Errorf("%s: kind %v, want %v", tc.path, k, tc.kind)
		}
	}
}

// A path a flavor claims goes to that flavor's upstream (Anthropic's: or
// nowhere, a 404, when none is configured); any other path to the first
// OpenAI upstream.
func TestRouterByFlavor(t *testing.T) {
	oa := &Upstream{Name: "oa", Flavor: FlavorOpenAI}
	an := &Upstream{Name: "an", Flavor: FlavorAnthropic}
	az := &Upstream{Name: "az", Flavor: FlavorAzure}
	r := newRouter([]*Upstream{an, az, oa})
	for path, want := range map[string]*Upstream{
		"/v1/chat/completions": oa, "/v1/messages": an, "/V1/Messages/count_tokens": an,
		"/openai/deployments/d/chat/completions": az, "/openai/v1/responses": az, "/openaix": oa,
	} {
		if got, _ := r.route(path, nil); got != want {
			t.Errorf("%s: routed to %v, want %v", path, got.Name, want.Name)
		}
	}
	if got, _ := newRouter([]*Upstream{oa}).route("/openai/v1/chat/completions", nil); got != oa {
		t.Errorf("an /openai/ path without an azure upstream went to %v, want the OpenAI upstream (Groq's spelling)", got)
	}
	if got, _ := newRouter([]*Upstream{oa}).route("/v1/messages", nil); got != nil {
		t.Errorf("/v1/messages without an Anthropic upstream went to %s, want none (404)", got.Name)
	}
}

// classify's table of known endpoints answers as weigher.Classify does.
func TestClassifyKnownPathsAsTheWeigher(t *testing.T) {
	for _, p := range knownPaths {
		for _, m := range []string{"POST", "post", "GET"} {
			if got, want := classify([]byte(m), p), weigher.Classify(m, p); got != want {
				t.Errorf("%s %s: %v, want %v", m, p, got, want)
			}
		}
	}
}

// bearerOracle is bearer as it was before it peeked the canonical name
// (a112cdd).
func bearerOracle(h *fasthttp.RequestHeader) string {
	if a := h.Peek("Authorization"); len(a) > 7 && bytes.EqualFold(a[:7], []byte("bearer ")) {
		return string(bytes.TrimSpace(a[7:]))
	}
	return ""
}

// bearer finds the token Peek("Authorization") finds, in every spelling
// of the field's name, with fasthttp's normalisation on and off.
func TestBearerMatchesPeek(t *testing.T) {
	for _, raw := range []bool{false, true} {
		for _, name := range []string{"Authorization", "authorization", "AUTHORIZATION", "AuthoriZation", "X-Authorization", ""} {
			for _, value := range []string{"Bearer sk-a", "bearer  sk-b ", "BEARER sk-c", "Basic xyz", "Bearer ", "Bearer"} {
				var req fasthttp.Request
				req.Header.DisableNormalizing()
				if !raw {
					req.Header.EnableNormalizing()
				}
				msg := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
				if name != "" {
					msg += name + ": " + value + "\r\n"
				}
				if err := req.Header.Read(bufio.NewReader(strings.NewReader(msg + "\r\n"))); err != nil {
					t.Fatal(err)
				}
				if got, want := string(bearer(&req.Header)), bearerOracle(&req.Header); got != want {
					t.Errorf("raw %v, %s: %q: %q, oracle %q", raw, name, value, got, want)
				}
			}
		}
	}
}
