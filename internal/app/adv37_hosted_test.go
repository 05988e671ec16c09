package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countedUpstream answers every POST with jsonBody, or sseBody when the
// request streams, and counts the POSTs it answered.
func countedUpstream(t *testing.T, jsonBody, sseBody string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			io.WriteString(w, `{"data":[]}`)
			return
		}
		n.Add(1)
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if !strings.Contains(string(raw), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, jsonBody)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseBody)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// gpt-4o-mini at 150,000 and 600,000 pico-USD a token, its window held
// to 1,000 input tokens (a hosted tool reserves the model's largest input).
const adv37Mini = `gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, max_input_tokens: 1000}`

// TestAdv37ImageGenerationReservedAndCharged: through real sockets, a
// Responses request with the image_generation tool reserves the images it
// may make (the tool's size and quality, its partial images when it
// streams, times max_tool_calls, else 20) and is charged the image
// output tokens its answer shows ($40 per million: a high 1024x1536
// image is 6,240 tokens, $0.2496), JSON and stream (whose two partial
// images add 100 tokens each). Under a $1 budget, a tool that may make 20
// such images ($4.99) is refused, never forwarded. Before, the images
// were neither reserved nor charged: a $1 budget let any number through.
func TestAdv37ImageGenerationReservedAndCharged(t *testing.T) {
	const item = `{"type":"image_generation_call","id":"ig","status":"completed","background":"opaque","output_format":"png","quality":"high","size":"1024x1536","result":"aGk=","revised_prompt":"a cat"}`
	resp := `{"id":"r","object":"response","status":"completed","model":"gpt-4o-mini","output":[` + item + `],"usage":{"input_tokens":20,"output_tokens":40,"total_tokens":60}}`
	partial := "event: response.image_generation_call.partial_image\ndata: {\"type\":\"response.image_generation_call.partial_image\",\"item_id\":\"ig\",\"output_index\":0,\"partial_image_index\":%d,\"partial_image_b64\":\"aGk=\"}\n\n"
	sse := strings.ReplaceAll(partial, "%d", "0") + strings.ReplaceAll(partial, "%d", "1") +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + resp + "}\n\n"
	srv, calls := countedUpstream(t, resp, sse)
	h, file := startSearchRig(t, "openai", srv.URL, adv37Mini, "1")
	body := func(stream, maxCalls string) string {
		return `{"model":"gpt-4o-mini",` + stream + maxCalls + `"max_output_tokens":50,"input":"draw a cat","tools":[{"type":"image_generation","quality":"high","size":"1024x1536","partial_images":2}]}`
	}
	r, got := h.do("/v1/responses", body("", ""))
	if r.StatusCode == 200 || calls.Load() != 0 {
		t.Errorf("20 high 1024x1536 images ($4.99) under a $1 budget: %d, forwarded %d times; want refused, never forwarded: %.300s",
			r.StatusCode, calls.Load(), got)
	}
	for _, stream := range []string{``, `"stream":true,`} {
		if r, got := h.do("/v1/responses", body(stream, `"max_tool_calls":1,`)); r.StatusCode != 200 {
			t.Fatalf("one image (stream %v): %d %.300s", stream != "", r.StatusCode, got)
		}
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 2 {
		t.Fatalf("ledger %+v; want two records", recs)
	}
	for i, wantImage := range []int64{6240, 6240 + 200} {
		rec := recs[i]
		want := (rec.InputTokens*150_000 + rec.OutputTokens*600_000 + wantImage*40_000_000 + 999_999) / 1_000_000
		if rec.ImageTokens != wantImage || rec.CostMicroUSD != want {
			t.Errorf("record %d: %d image tokens, cost %d µUSD (input %d, output %d); want %d and %d", i, rec.ImageTokens,
				rec.CostMicroUSD, rec.InputTokens, rec.OutputTokens, wantImage, want)
		}
	}
}

// TestAdv37FileSearchReserved: a Responses request's file_search tool
// reserves the calls it may make ($2.50 per 1,000: max_tool_calls, else
// 20, $0.05) and is charged the file_search_call items of its answer.
// Under a $0.04 budget, one that may make 20 calls is refused, never
// forwarded; before, file searches were charged but not reserved, so such
// requests passed whatever the budget left.
func TestAdv37FileSearchReserved(t *testing.T) {
	const call = `{"type":"file_search_call","id":"fs","status":"completed","queries":["q"]}`
	resp := `{"id":"r","object":"response","status":"completed","model":"gpt-4o-mini","output":[` + call + `,` + call + `,` + call + `],"usage":{"input_tokens":20,"output_tokens":40,"total_tokens":60}}`
	srv, calls := countedUpstream(t, resp, "")
	h, file := startSearchRig(t, "openai", srv.URL, adv37Mini, "0.04")
	body := func(maxCalls string) string {
		return `{"model":"gpt-4o-mini",` + maxCalls + `"max_output_tokens":50,"input":"find it","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`
	}
	r, got := h.do("/v1/responses", body(""))
	if r.StatusCode == 200 || calls.Load() != 0 {
		t.Errorf("20 file searches ($0.05) under a $0.04 budget: %d, forwarded %d times; want refused: %.300s", r.StatusCode, calls.Load(), got)
	}
	if r, got := h.do("/v1/responses", body(`"max_tool_calls":4,`)); r.StatusCode != 200 {
		t.Fatalf("4 file searches: %d %.300s", r.StatusCode, got)
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v; want one record", recs)
	}
	rec := recs[0]
	want := (rec.InputTokens*150_000 + rec.OutputTokens*600_000 + 3*2_500_000_000 + 999_999) / 1_000_000
	if rec.FileSearches != 3 || rec.CostMicroUSD != want {
		t.Errorf("record: %d file searches, cost %d µUSD; want 3 and %d", rec.FileSearches, rec.CostMicroUSD, want)
	}
}

// TestAdv37CodeExecutionReservedAndCharged: a Messages request naming
// Anthropic's code execution tool reserves and is charged an hour of its
// container ($0.05 an hour; no usage reports the time), so a $0.08
// budget admits one such request and refuses the next, never forwarded.
// Before, the container was neither reserved nor charged: a budget let
// any number of them through at the price of their tokens.
func TestAdv37CodeExecutionReservedAndCharged(t *testing.T) {
	const resp = `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"5.5"}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":40,"server_tool_use":{"web_search_requests":0}}}`
	srv, calls := countedUpstream(t, resp, "")
	h, file := startSearchRig(t, "anthropic", srv.URL,
		`claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, max_input_tokens: 1000}`, "0.08")
	const body = `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"mean of 1..10"}],"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`
	for i := range 3 {
		r, got := h.do("/v1/messages", body)
		if i == 0 && r.StatusCode != 200 {
			t.Fatalf("first: %d %.300s", r.StatusCode, got)
		}
		if i > 0 && r.StatusCode == 200 {
			t.Errorf("request %d beside an hour of container ($0.05) already charged under $0.08: admitted", i+1)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("forwarded %d times, want 1", calls.Load())
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v; want one record", recs)
	}
	rec := recs[0]
	want := (rec.InputTokens*3_000_000 + rec.OutputTokens*15_000_000 + 60*833_333_334 + 999_999) / 1_000_000
	if rec.CodeExecutionMinutes != 60 || rec.CostMicroUSD != want {
		t.Errorf("record: %d minutes, cost %d µUSD (input %d, output %d); want 60 and %d", rec.CodeExecutionMinutes, rec.CostMicroUSD,
			rec.InputTokens, rec.OutputTokens, want)
	}
}

// TestAdv37ImageStreamCutKeepsTheReservation: a Responses stream with the
// image_generation tool that ends before its terminal event (after two
// partial images, no usage, no items) is charged the image tokens
// reserved, 6,240 for a high 1024x1536 image plus 100 for each of the two
// partial images asked, and likewise keeps its file searches reserved:
// what was generated before the cut is billed upstream all the same.
func TestAdv37ImageStreamCutKeepsTheReservation(t *testing.T) {
	partial := "event: response.image_generation_call.partial_image\ndata: {\"type\":\"response.image_generation_call.partial_image\",\"item_id\":\"ig\",\"output_index\":0,\"partial_image_index\":0,\"partial_image_b64\":\"aGk=\"}\n\n"
	srv, _ := countedUpstream(t, "", partial+partial)
	h, file := startSearchRig(t, "openai", srv.URL, adv37Mini, "1")
	body := `{"model":"gpt-4o-mini","stream":true,"max_tool_calls":1,"max_output_tokens":50,"input":"draw a cat","tools":[{"type":"image_generation","quality":"high","size":"1024x1536","partial_images":2},{"type":"file_search"}]}`
	if r, got := h.do("/v1/responses", body); r.StatusCode != 200 {
		t.Fatalf("%d %.300s", r.StatusCode, got)
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v; want one record", recs)
	}
	if rec := recs[0]; rec.ImageTokens != 6240+200 || rec.FileSearches != 1 {
		t.Errorf("cut stream: %d image tokens, %d file searches charged; want 6,440 and 1", rec.ImageTokens, rec.FileSearches)
	}
}

// TestAdv37AbsurdImageUsageChargedAtTheCeiling: an answer whose
// tool_usage.image_gen reports 2,000,000,000 image tokens ($80,000 at $40
// per million) for a request that may make one image is a fault, not a
// bill: charged at the request's ceiling (weigher.Weigher.Ceiling: 1,000
// calls of the dearest image with 3 partial images, 6,540,000 tokens) and
// flagged, as an absurd input or output is. Before, the 2e9 tokens were
// charged: one answer put the caller $80,000 into debt.
func TestAdv37AbsurdImageUsageChargedAtTheCeiling(t *testing.T) {
	resp := `{"id":"r","object":"response","status":"completed","model":"gpt-4o-mini","output":[],"tool_usage":{"image_gen":{"input_tokens":0,"output_tokens":2000000000}},"usage":{"input_tokens":20,"output_tokens":40,"total_tokens":60}}`
	srv, _ := countedUpstream(t, resp, "")
	h, file := startSearchRig(t, "openai", srv.URL, adv37Mini, "1")
	body := `{"model":"gpt-4o-mini","max_tool_calls":1,"max_output_tokens":50,"input":"draw a cat","tools":[{"type":"image_generation","quality":"low","size":"1024x1024"}]}`
	if r, got := h.do("/v1/responses", body); r.StatusCode != 200 {
		t.Fatalf("one image: %d %.300s", r.StatusCode, got)
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v; want one record", recs)
	}
	if rec := recs[0]; rec.ImageTokens != 1000*6540 || !rec.UsageImplausible {
		t.Errorf("record: %d image tokens, implausible %v, cost %d µUSD; want 6,540,000 (the ceiling), flagged",
			rec.ImageTokens, rec.UsageImplausible, rec.CostMicroUSD)
	}
}
