package proxy

import "testing"

// TestHopFieldsListedBySecondConnectionField: every Connection field's
// list is hop-by-hop (RFC 9110 §7.6.1: the field may be repeated), not the
// first one's only, in an answer and in a request.
func TestHopFieldsListedBySecondConnectionField(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	up := startRawUpstream(t, "HTTP/1.1 200 OK\r\n"+
		"content-type: application/json\r\n"+
		"connection: keep-alive\r\n"+
		"connection: x-hop-resp\r\n"+
		"x-hop-resp: secret\r\n"+
		"content-length: "+itoa(len(body))+"\r\n\r\n"+body)
	r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
	status, h, got, err := r.do("/v1/chat/completions", panicBody)
	if err != nil || status != 200 {
		t.Fatalf("status %d, err %v, body %s", status, err, got)
	}
	if v := h.Get("X-Hop-Resp"); v != "" {
		t.Errorf("client got hop-by-hop X-Hop-Resp (listed by the second Connection field): %q", v)
	}
}
