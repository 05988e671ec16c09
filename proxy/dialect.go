package proxy

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// dialect is what differs between API flavors on the wire, and nothing
// else: how a caller presents its key and how the upstream expects the
// gateway's, which paths name which endpoint, what llmguard adds to a
// request so that the answer reports its usage, and the shape of the
// errors and rate-limit headers llmguard answers itself. Each flavor's
// dialect lives in its own file; dialects holds one per spec.Flavor.
type dialect interface {
	// credential is the caller's key and the header it came from (key
	// empty when it presented none). key is h's own bytes, valid until h
	// changes. forward strips every other credential header, so the key
	// that is limited is the key that is used.
	credential(h *fasthttp.RequestHeader) (key []byte, header string)
	// authorization is the request field, name and value, that carries
	// the gateway's own upstream key: set on a request whose caller
	// credentials were removed. Made once per upstream (Upstream.init),
	// not per request.
	authorization(key string) (field, value string)
	// claims says how strongly this flavor claims path (decoded, as
	// routed): see claim.
	claims(path string) claim
	// endpoint maps a request path (decoded, the upstream's prefix removed)
	// to the OpenAI-style path its request kind is named by (the one
	// weigher.KindOf reads and rules' paths match), and the deployment the
	// path names ("" when none).
	endpoint(path string) (canonical, deployment string)
	// rewrite returns the body to send upstream for a request of kind k,
	// weighed as est, and whether the usage-only chunk it asked for must
	// be dropped from the answer's stream. It never changes what was
	// weighed.
	rewrite(k weigher.Kind, est *weigher.Estimate, body []byte) (out []byte, stripUsage bool)
	// appendError appends e as a whole error body in this flavor's shape.
	appendError(b []byte, e apiError) []byte
	// limitHeaders adds this flavor's own rate-limit fields, from the
	// rules' statuses at admission, to fs (rules is fs.rules, never empty;
	// fs.appendCapacity and fs.appendRemaining write a rule's numbers).
	limitHeaders(fs *limitFields, rules []meter.Applied)
}

// claim is how strongly a dialect claims a request path for upstreams of
// its flavor.
type claim uint8

const (
	// claimNone: the path is any flavor's; the default upstream serves it.
	claimNone claim = iota
	// claimPrefer: the flavor's first upstream serves it when one is
	// configured, the default upstream otherwise (other OpenAI-compatible
	// servers use the same spelling: /openai/v1/ is also Groq's).
	claimPrefer
	// claimOnly: only the flavor's upstream serves it: 404 without one.
	claimOnly
)

// dialects holds each flavor's dialect, indexed by spec.Flavor; a flavor
// without one is refused when an upstream of it is configured (Upstream.init)
// and fails TestEveryFlavorHasADialect.
var dialects = []dialect{
	spec.FlavorOpenAI:    openAI{},
	spec.FlavorAnthropic: anthropic{},
	spec.FlavorAzure:     azure{},
}

// dialectOf returns flavor f's dialect, nil when it has none.
func dialectOf(f Flavor) dialect {
	if int(f) < len(dialects) {
		return dialects[f]
	}
	return nil
}

// authorizationField is the Authorization field's name, which fasthttp's
// normalisation leaves as it is: PeekCanonical finds what Peek would,
// normalising or not, without Peek's copy of the name (about 150
// instructions a request).
var authorizationField = []byte("Authorization")

// callerKeyHeaders are the headers any dialect reads a caller's key from.
var callerKeyHeaders = []string{"Authorization", "x-api-key", "api-key"}

// bearer returns the token of an Authorization: Bearer field (h's own
// bytes, valid until h changes), nil when there is none.
func bearer(h *fasthttp.RequestHeader) []byte {
	if a := h.PeekCanonical(authorizationField); len(a) > 7 && bytes.EqualFold(a[:7], []byte("bearer ")) {
		return bytes.TrimSpace(a[7:])
	}
	return nil
}

// headerKey returns the trimmed value of header name: h's own bytes, valid
// until h changes.
func headerKey(h *fasthttp.RequestHeader, name string) []byte {
	return bytes.TrimSpace(h.Peek(name))
}

// addIncludeUsage asks a streamed chat or completions request for its
// usage (stream_options.include_usage, which OpenAI-style APIs need to
// report usage on a stream at all), unless the caller did; stripUsage says
// the usage-only chunk it brings is the gateway's, not the caller's.
func addIncludeUsage(k weigher.Kind, est *weigher.Estimate, body []byte) ([]byte, bool) {
	if !k.StreamUsageOptIn() || !est.Stream || est.IncludeUsage || !est.Parsed {
		return body, false
	}
	if !gjson.GetBytes(body, "stream_options").Exists() {
		// The common case: one copy of the body with the member added
		// before its closing brace (a parsed body is an object with at
		// least its model and stream members, so a comma goes first).
		if end := bytes.LastIndexByte(body, '}'); end > 0 {
			const member = `,"stream_options":{"include_usage":true}`
			nb := make([]byte, 0, len(body)+len(member))
			nb = append(append(append(nb, body[:end]...), member...), body[end:]...)
			return nb, true
		}
	}
	nb, err := sjson.SetBytes(bytes.Clone(body), "stream_options.include_usage", true)
	if err != nil {
		return body, false
	}
	return nb, true
}

// hasPathPrefix reports whether path starts with prefix at a segment
// boundary, ignoring case.
func hasPathPrefix(path, prefix string) bool {
	return len(path) >= len(prefix) && strings.EqualFold(path[:len(prefix)], prefix) &&
		(len(path) == len(prefix) || path[len(prefix)] == '/' || prefix[len(prefix)-1] == '/')
}
