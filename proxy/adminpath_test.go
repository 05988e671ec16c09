package proxy

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// TestAdminPathOnProxyListenerSaysWhere: a caller without a key on a path
// of the admin listener (a Prometheus scrape or a health probe sent to the
// proxy's port) gets the usual 401 in its flavor's shape, whose message
// names the admin listener; a keyless call to an API path keeps the plain
// message, and the upstream sees neither (trial19: GET :8080/metrics read
// only "Incorrect or missing API key").
func TestAdminPathOnProxyListenerSaysWhere(t *testing.T) {
	const body = `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
	r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
	const hint = "served on llmguard's admin listener"
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/admin/usage", "/admin/keys/0123456789abcdef"} {
		resp, err := http.Get(r.url + path)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(got, []byte(hint)) || !bytes.Contains(got, []byte(`"code":"invalid_api_key"`)) {
			t.Errorf("GET %s: status %d, body %s; want 401 invalid_api_key naming the admin listener", path, resp.StatusCode, got)
		}
	}
	for _, path := range []string{"/v1/models", "/metricsx", "/v1/metrics"} {
		resp, err := http.Get(r.url + path)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || bytes.Contains(got, []byte(hint)) {
			t.Errorf("GET %s: status %d, body %s; want 401 without the admin listener's hint", path, resp.StatusCode, got)
		}
	}
	if sent := up.lastHeaders(); sent != "" {
		t.Errorf("the upstream got a request:\n%s", sent)
	}
}
