package weigher

import (
	"bytes"
	"testing"
)

// TestEstimateOwnsItsStrings: no string of an estimate is a view of the
// body weighed. The proxy reads bodies into pooled buffers and reuses one
// for a later request as soon as the request is forwarded, while the
// estimate lives on until settlement: overwriting the body after weighing
// must leave the estimate as it was.
func TestEstimateOwnsItsStrings(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		kind Kind
		body string
	}{
		{KindChat, `{"model":"gpt-4o-mini","service_tier":"flex","messages":[{"role":"user","content":"hello there"}],"max_tokens":5}`},
		{KindResponses, `{"model":"gpt-4.1","service_tier":"priority","input":"hello there","max_output_tokens":5}`},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`},
		{KindCompletions, `{"model":"gpt-3.5-turbo-instruct","prompt":"hello","max_tokens":5}`},
		{KindEmbeddings, `{"model":"text-embedding-3-small","input":"hello"}`},
		{KindImages, `{"model":"gpt-image-1","prompt":"a cat","size":"1024x1024","quality":"high","n":1}`},
		{KindImages, `{"model":"dall-e-3","prompt":"a cat","size":"1792x1024","quality":"hd"}`},
	} {
		body := []byte(tc.body)
		got := w.Weigh(tc.kind, body)
		want := w.Weigh(tc.kind, bytes.Clone(body))
		for i := range body {
			body[i] = 'x'
		}
		if got != want {
			t.Errorf("%v %s: after the body was overwritten the estimate reads %+v, want %+v", tc.kind, tc.body, got, want)
		}
	}
}
