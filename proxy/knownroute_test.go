package proxy

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/weigher"
)

// TestKnownPathsNameNoModelNorLimits: no path of knownPaths has an
// "engines" or "deployments" segment or is LimitsPath in any spelling,
// which is what lets knownRoute skip the walks that look for them.
func TestKnownPathsNameNoModelNorLimits(t *testing.T) {
	for _, p := range knownPaths {
		for _, seg := range segmentNames {
			if hasSegment(p, seg) {
				t.Errorf("known path %q has a %q segment", p, seg)
			}
		}
		if weigher.CanonicalPath(p) == LimitsPath {
			t.Errorf("known path %q is the limits path", p)
		}
	}
}

// TestKnownRouteTaken: a chat request to a known path, routed to an
// upstream without a path_prefix, takes the shortcut (its path, upstream
// path and endpoint are the one interned string); a path spelled
// otherwise, or one under a path_prefix, does not.
func TestKnownRouteTaken(t *testing.T) {
	px := newPathRig(t, cannedJSON)
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/v1/chat/completions", true},
		{"/v1/embeddings", true},
		{"/V1/chat/completions", false},
		{"/v1/chat/completions;x=1", false},
		{"/v1/engines/davinci/completions", false},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		ctx.Request.SetRequestURI("http://llmguard" + c.path)
		x := &exchange{}
		path, upPath, r := px.route(&ctx, x)
		if r != nil {
			t.Fatalf("%s: refused by route: %s", c.path, r.err.message)
		}
		if got := knownRoute(x, path, upPath); got != c.want {
			t.Errorf("%s: knownRoute %v, want %v", c.path, got, c.want)
		}
	}
}

// TestKnownRouteSameVerdicts: with the shortcut, a known path is served,
// and every path the walks judge is judged as before: an "engines" or
// "deployments" segment in any case is refused before the upstream, and
// the limits path in any spelling is answered by llmguard.
func TestKnownRouteSameVerdicts(t *testing.T) {
	px := newPathRig(t, cannedJSON)
	for _, c := range []struct {
		method, path string
		status       int
		bodyHas      string
	}{
		{"POST", "/v1/chat/completions", 200, `"chat.completion"`},
		{"POST", "/v1/engines/davinci/completions", 400, "model"},
		{"POST", "/v1/ENGINES/davinci/chat/completions", 400, "model"},
		{"POST", "/openai/deployments/gpt/chat/completions", 400, "model"},
		{"POST", "/v1/Deployment\u017f/gpt/chat/completions", 400, "model"},
		{"GET", "/v1/llmguard/limits", 200, "user-tpm"},
		{"GET", "/V1/LLMGuard//Limits/", 200, "user-tpm"},
	} {
		var req fasthttp.Request
		req.Header.SetMethod(c.method)
		req.SetRequestURI("http://llmguard" + c.path)
		req.Header.Set("Authorization", "Bearer sk-bench")
		if c.method == "POST" {
			req.Header.SetContentType("application/json")
			req.SetBody(pathBody)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, benchAddr, nil)
		px.Handle(&ctx)
		body := string(ctx.Response.Body())
		if st := ctx.Response.StatusCode(); st != c.status || !strings.Contains(body, c.bodyHas) {
			t.Errorf("%s %s: %d %.200s, want %d with %q", c.method, c.path, st, body, c.status, c.bodyHas)
		}
		ctx.Request.ResetUserValues()
	}
}
