package proxy

import (
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// readMethodSamples are methods in the cases and near misses a lenient
// server might read as a read method.
var readMethodSamples = []string{"POST", "post", "Post", "pOST", "POST ", "POS", "POSTS",
	"GET", "get", "Get", "HEAD", "head", "DELETE", "delete", "OPTIONS", "options", "OPTIONs",
	"PUT", "PATCH", "CONNECT", "TRACE", "", "GE", "GETS", "HEADS"}

// TestReadMethodSameAsWeigher: the proxy's shortcut gives weigher.ReadMethod's
// verdict for every sample.
func TestReadMethodSameAsWeigher(t *testing.T) {
	for _, m := range readMethodSamples {
		if got, want := readMethod([]byte(m)), weigher.ReadMethod(m); got != want {
			t.Errorf("readMethod(%q) = %v, weigher.ReadMethod says %v", m, got, want)
		}
	}
}

// FuzzReadMethod holds readMethod to weigher.ReadMethod on any bytes.
func FuzzReadMethod(f *testing.F) {
	for _, m := range readMethodSamples {
		f.Add([]byte(m))
	}
	f.Fuzz(func(t *testing.T, m []byte) {
		if got, want := readMethod(m), weigher.ReadMethod(string(m)); got != want {
			t.Fatalf("readMethod(%q) = %v, weigher.ReadMethod says %v", m, got, want)
		}
	})
}

// TestKnownPathsNotDoubled: no known path starts with a doubled version
// root, so route skips that check for them (a known path is never
// refused as doubledVersion).
func TestKnownPathsNotDoubled(t *testing.T) {
	for _, p := range knownPaths {
		if hasPathPrefix(p, "/v1/") && hasPathPrefix(p[3:], "/v1") {
			t.Errorf("known path %q doubles the version root", p)
		}
	}
}
