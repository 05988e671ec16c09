package proxy

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/weigher"
)

// poolTaker is a Weigher that, before weighing, takes a buffer from
// fasthttp's request body pool and fills it, as a concurrent request's
// body read would: if the proxy gave the body it weighs back to that pool,
// the body it weighs and forwards is this one's bytes.
type poolTaker struct{ *weigher.Weigher }

func (w poolTaker) WeighResolved(k weigher.Kind, body []byte, resolve func(string) string) weigher.Estimate {
	var other fasthttp.Request
	other.SetBodyString(strings.Repeat("x", len(body)))
	return w.Weigher.WeighResolved(k, body, resolve)
}

// TestBodyReadWholeNotGivenBack: for a request whose body was read whole
// into a buffer of fasthttp's pool that the request may give back (a
// RequestCtx made by hand, as tests make them, or by a server with
// ReduceMemoryUsage and without StreamRequestBody), the
// body Handle weighs and forwards stays the caller's while another
// request's body is read. Handle used to set the body it held (the bytes
// of the request's own pooled buffer) with SetBodyRaw, which gives that
// buffer back to fasthttp's pool first: a concurrent request then read its
// body into the bytes being weighed and forwarded (found by -race in a
// reload test). Here the next body read (poolTaker) must not reach them:
// every request is answered 200 by the mock, none refused as unreadable.
func TestBodyReadWholeNotGivenBack(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	w := testWeigher(t)
	r := newRig(t, rigOptions{mock: mock, url: mock.URL, w: w})
	r.px.Reload(r.pol, poolTaker{w}, Settings{})
	for i := range 16 {
		var ctx fasthttp.RequestCtx // as a server with ReduceMemoryUsage hands it: body buffers pooled
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		ctx.Request.SetRequestURI("/v1/chat/completions")
		ctx.Request.Header.Set("Authorization", "Bearer sk-panic")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBodyString(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":5}`)
		r.px.Handle(&ctx)
		if status := ctx.Response.StatusCode(); status != fasthttp.StatusOK {
			t.Fatalf("request %d: %d: %s", i, status, ctx.Response.Body())
		}
	}
}
