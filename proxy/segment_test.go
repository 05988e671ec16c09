package proxy

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// hasSegmentSplit is hasSegment as first written, segment by segment with
// strings.SplitSeq: the reference the in-place walk must agree with.
func hasSegmentSplit(path, seg string) bool {
	for part := range strings.SplitSeq(path, "/") {
		if i := strings.IndexByte(part, ';'); i >= 0 {
			part = part[:i]
		}
		if strings.EqualFold(part, seg) {
			return true
		}
	}
	return false
}

// segmentNames are the names checkPath looks for.
var segmentNames = []string{"engines", "deployments"}

// TestHasSegment: a segment of the name in any case, with or without
// ;params, at any place (first, last, alone, between empty segments), and
// spelled with the Unicode letters that fold to its ASCII ones, is found;
// a name within a longer segment, a longer or shorter one, or one only
// after ';' is not; each answer is the reference's.
func TestHasSegment(t *testing.T) {
	cases := []struct {
		path, seg string
		want      bool
	}{
		{"/v1/engines/davinci/completions", "engines", true},
		{"/v1/ENGINES/davinci/completions", "engines", true},
		{"/v1/engines;x=1/davinci", "engines", true},
		{"engines", "engines", true},
		{"/engines", "engines", true},
		{"//engines//", "engines", true},
		{"/v1/engine\u017f/d", "engines", true}, // ſ (long s) folds to s
		{"/openai/deployments/gpt/chat", "deployments", true},
		{"/openai/Deployment\u017f;a/gpt", "deployments", true},
		{"/v1/enginesx/d", "engines", false},
		{"/v1/engine/d", "engines", false},
		{"/v1/xengines", "engines", false},
		{"/v1/chat;engines/completions", "engines", false},
		{"/v1/chat/completions", "engines", false},
		{"/v1/chat/completions", "deployments", false},
		{"", "engines", false},
		{"/", "engines", false},
		{"/v1/\xffngines", "engines", false},
	}
	for i, c := range cases {
		if got := hasSegment(c.path, c.seg); got != c.want {
			t.Errorf("case %d: hasSegment(%q, %q) = %v, want %v", i, c.path, c.seg, got, c.want)
		}
		if ref := hasSegmentSplit(c.path, c.seg); ref != c.want {
			t.Errorf("case %d: the reference says %v for %q, %q", i, ref, c.path, c.seg)
		}
	}
}

// FuzzHasSegment: the in-place walk finds a segment exactly when the
// reference does, for each name checkPath looks for.
func FuzzHasSegment(f *testing.F) {
	for _, p := range []string{"/v1/engines/d/completions", "/openai/deployments/x", "/v1/engine\u017f;p/x", "//a;b/c;/", "\u212a", ""} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		for _, seg := range segmentNames {
			if got, want := hasSegment(path, seg), hasSegmentSplit(path, seg); got != want {
				t.Fatalf("hasSegment(%q, %q) = %v, the reference %v", path, seg, got, want)
			}
		}
	})
}

// TestKnownPathsArePlain: every path internPath knows passes plainPath,
// which checkPath skips for a known path sent as it is spelled; a path
// it does not know is not known.
func TestKnownPathsArePlain(t *testing.T) {
	for _, p := range knownPaths {
		if !plainPath(p) {
			t.Errorf("known path %q is not plain", p)
		}
		if s, known := internPath([]byte(p)); !known || s != p {
			t.Errorf("internPath(%q) = %q, %v", p, s, known)
		}
	}
	if _, known := internPath([]byte("/v1/chat/completions/")); known {
		t.Error("a path with a trailing slash is known")
	}
}

// TestKnownPathSpelledOddlyIsRefused: a path that decodes and normalises
// to a known one but was sent otherwise (a dot segment, an escaped slash)
// is scanned, and refused, as any other path is: only a known path sent
// as spelled skips the scan.
func TestKnownPathSpelledOddlyIsRefused(t *testing.T) {
	px := newPathRig(t, cannedJSON)
	for _, uri := range []string{"/v1/chat/x/../completions", "/v1/./chat/completions", "/v1/chat%2Fcompletions"} {
		r := newPathRequest(pathBody)
		r.ctx.Request.SetRequestURI("http://llmguard" + uri)
		if st := r.serve(t, px.Handle); st != fasthttp.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", uri, st, r.ctx.Response.Body())
		}
		if b := r.ctx.Response.Body(); !strings.Contains(string(b), `"code":"`+errOddPath.openAICode+`"`) {
			t.Errorf("%s: answer %s, want the odd-path refusal", uri, b)
		}
	}
	r := newPathRequest(pathBody) // the known path itself is served
	if st := r.serve(t, px.Handle); st != fasthttp.StatusOK {
		t.Errorf("/v1/chat/completions: status %d", st)
	}
}
