package app

import (
	"strings"
	"testing"
)

// TestAdv38StreamedImagesChargedWhenTheStreamIsCut: through real sockets,
// a Responses stream whose image_generation tool the body does not name
// (a stored prompt's tools: the body holds only {"prompt":{"id":…}}, so 0
// image tokens are reserved) shows an image_generation_call item
// (output_item.added with no size, 2 partial images, output_item.done of
// a high 1024x1024 image) and is broken off before its terminal event.
// The upstream made, and bills, the image: it is charged the dearest of
// the items shown (6,240 tokens: the added item names no size) plus 100
// a partial image, 6,440 ($0.2576 at $40 per million). Before, a cut
// stream was charged only the image tokens reserved: 0, so a caller
// leaving after the image arrived had it for free.
func TestAdv38StreamedImagesChargedWhenTheStreamIsCut(t *testing.T) {
	ev := func(typ, data string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"," + data + "}\n\n"
	}
	partial := ev("response.image_generation_call.partial_image", `"item_id":"ig","output_index":0,"partial_image_index":%d,"partial_image_b64":"aGk="`)
	sse := ev("response.output_item.added", `"output_index":0,"item":{"type":"image_generation_call","id":"ig","status":"in_progress"}`) +
		strings.ReplaceAll(partial, "%d", "0") + strings.ReplaceAll(partial, "%d", "1") +
		ev("response.output_item.done", `"output_index":0,"item":{"type":"image_generation_call","id":"ig","status":"completed","quality":"high","size":"1024x1024","result":"aGk="}`)
	srv, _ := countedUpstream(t, "", sse)
	h, file := startSearchRig(t, "openai", srv.URL, adv37Mini, "1")
	body := `{"model":"gpt-4o-mini","stream":true,"max_output_tokens":50,"prompt":{"id":"pmpt_1"},"input":"draw a cat"}`
	if r, got := h.do("/v1/responses", body); r.StatusCode != 200 {
		t.Fatalf("%d %.300s", r.StatusCode, got)
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v; want one record", recs)
	}
	if rec := recs[0]; rec.ImageTokens != 6240+200 {
		t.Errorf("cut stream: %d image tokens charged (cost %d µUSD); want 6,440", rec.ImageTokens, rec.CostMicroUSD)
	}
}
