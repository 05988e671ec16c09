package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestForwardFieldsAsSet: the fields forward sets with SetCanonical are
// spelled so that the upstream request is byte for byte what Set would
// make, on a header that normalises names (the server's) and on one that
// does not, whatever the client sent in that field before.
func TestForwardFieldsAsSet(t *testing.T) {
	for _, f := range []struct{ name, value []byte }{
		{forwardedForField, []byte("192.0.2.7")},
		{acceptEncodingField, identityValue},
	} {
		for _, normalize := range []bool{true, false} {
			for _, sent := range []string{"", string(f.name), "x-forwarded-for", "accept-encoding", "ACCEPT-ENCODING"} {
				var byCanonical, bySet fasthttp.RequestHeader
				for _, h := range []*fasthttp.RequestHeader{&byCanonical, &bySet} {
					if !normalize {
						h.DisableNormalizing()
					}
					h.SetMethod(fasthttp.MethodPost)
					h.SetRequestURI("/v1/chat/completions")
					if sent != "" {
						h.Set(sent, "gzip, br")
					}
				}
				byCanonical.SetCanonical(f.name, f.value)
				bySet.Set(string(f.name), string(f.value))
				if got, want := byCanonical.String(), bySet.String(); got != want {
					t.Errorf("%s (normalize %v, sent %q): SetCanonical gives\n%q\nSet gives\n%q", f.name, normalize, sent, got, want)
				}
			}
		}
	}
}
