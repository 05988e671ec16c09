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
// The upstream made, and bills, the image: it is charged the done item
// (4,160 tokens; the added one it completes is not counted again) plus
// 100 a partial image, 4,360 ($0.1744 at $40 per million). Before, a cut
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
	if rec := recs[0]; rec.ImageTokens != 4160+200 {
		t.Errorf("cut stream: %d image tokens charged (cost %d µUSD); want 4,360", rec.ImageTokens, rec.CostMicroUSD)
	}
}

// TestAdv38UnreadImageEventsKeepTheReservation: through real sockets, a
// Responses stream making one 3840x2160 image (gpt-image-2's largest
// size; a PNG of it runs to tens of MB in base64) whose
// output_item.done and response.completed events each carry a result
// over the 16 MiB llmguard reads of an event: both are relayed unread,
// the terminal event's usage is read as it passes (topUsage), and the
// image it made is charged what was reserved for it (32,907 tokens,
// $1.32 at $40 per million), as unread output is charged the output
// reserved. The usage reports more output than reserved (60 of 50), so
// it stands as reported. Before, only the usage was charged: 0 image
// tokens.
func TestAdv38UnreadImageEventsKeepTheReservation(t *testing.T) {
	if testing.Short() {
		t.Skip("relays 34 MB")
	}
	item := `{"type":"image_generation_call","id":"ig","status":"completed","quality":"high","size":"3840x2160","result":"` + strings.Repeat("A", 17<<20) + `"}`
	sse := "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":" + item + "}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"completed\",\"output\":[" + item +
		"],\"usage\":{\"input_tokens\":20,\"output_tokens\":60,\"total_tokens\":80}}}\n\n"
	srv, _ := countedUpstream(t, "", sse)
	h, file := startSearchRig(t, "openai", srv.URL, adv37Mini, "5")
	body := `{"model":"gpt-4o-mini","stream":true,"max_tool_calls":1,"max_output_tokens":50,"input":"draw a city","tools":[{"type":"image_generation","quality":"high","size":"3840x2160"}]}`
	if r, got := h.do("/v1/responses", body); r.StatusCode != 200 || len(got) < 34<<20 {
		t.Fatalf("%d, %d bytes relayed", r.StatusCode, len(got))
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v; want one record", recs)
	}
	if rec := recs[0]; rec.ImageTokens != 32907 || rec.InputTokens != 20 || rec.OutputTokens != 60 {
		t.Errorf("unread image events: %d image tokens, %d input tokens charged; %d output; want 32,907 (the reservation), 20 and 60", rec.ImageTokens, rec.InputTokens, rec.OutputTokens)
	}
}
