package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
)

// Anthropic bills each web search its server tool runs, $10 per 1,000
// (usage.server_tool_use.web_search_requests), on top of the tokens: five
// searches add 50,000 µUSD to the settled cost, JSON and stream alike.
func TestWebSearchesPriced(t *testing.T) {
	// A web search request is reserved as hidden context (the model's
	// largest input, here 20,000 tokens).
	h, file := startSearchRig(t, "anthropic", "", `claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, max_input_tokens: 20000}`, "10")
	for _, stream := range []string{``, `"stream":true,`} {
		resp, got := h.do("/v1/messages", `{"model":"claude-sonnet-4-5",`+stream+`"max_tokens":50,`+
			`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[{"role":"user","content":"news today?"}]}`,
			"x-mock-completion-tokens", "40", "x-mock-web-searches", "5")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", stream, resp.StatusCode, got)
		}
	}
	recs := flushedRecords(t, h, file)
	if len(recs) != 2 {
		t.Fatalf("ledger %+v", recs)
	}
	for i, r := range recs {
		// claude-sonnet-4-5 in the harness: 3 and 15 µUSD per input and
		// output token; 10,000 µUSD per search.
		if want := r.InputTokens*3 + r.OutputTokens*15 + 5*10_000; r.OutputTokens != 40 || r.CostMicroUSD != want {
			t.Errorf("record %d: input %d output %d cost %d µUSD, want %d (five searches at $0.01)", i, r.InputTokens, r.OutputTokens, r.CostMicroUSD, want)
		}
	}
}

// A web search request is reserved its searches too: max_uses × $0.01 on
// top of its tokens. Before, a request on a model with a small input
// window reserved only tokens (here 1,000 × 3 + 50 × 15 = 3,750 µUSD), so
// two requests with five searches each (about 53,000 µUSD apiece) were
// both admitted by a 60,000 µUSD monthly limit and spent about 107,000.
// Now the first reserves 53,750 and the second finds too little left.
func TestWebSearchesReserved(t *testing.T) {
	h, file := startSearchRig(t, "anthropic", "", `claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, max_input_tokens: 1000}`, "0.06")
	const quota = 60_000 // µUSD
	statuses := []int{}
	for _, stream := range []string{``, `"stream":true,`} {
		resp, _ := h.do("/v1/messages", `{"model":"claude-sonnet-4-5",`+stream+`"max_tokens":50,`+
			`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[{"role":"user","content":"news today?"}]}`,
			"x-mock-completion-tokens", "40", "x-mock-web-searches", "5")
		statuses = append(statuses, resp.StatusCode)
	}
	recs := flushedRecords(t, h, file)
	spent := int64(0)
	for _, r := range recs {
		spent += r.CostMicroUSD
	}
	if statuses[0] != 200 || len(recs) != 1 || spent > quota {
		t.Fatalf("statuses %v, %d records costing %d µUSD under a %d µUSD limit (want the first admitted, the second refused)", statuses, len(recs), spent, quota)
	}
}

// OpenAI bills each web search tool call of a Responses request, $10 per
// 1,000, on top of the tokens; its usage does not report them, the
// output's web_search_call items do. Before, they were neither reserved
// nor charged: two requests making five calls each (about 53,000 µUSD
// apiece with the calls) reserved 3,000 µUSD each, were both admitted by a
// 60,000 µUSD limit and were charged about 3,000 apiece. Now the calls are
// reserved (max_tool_calls) and charged (JSON and stream alike).
func TestResponsesWebSearchCallsPriced(t *testing.T) {
	for _, stream := range []string{``, `"stream":true,`} {
		h, file := startSearchRig(t, "openai", "", `gpt-4o: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, max_input_tokens: 1000}`, "0.06")
		const quota = 60_000 // µUSD
		var statuses []int
		for range 2 {
			resp, _ := h.do("/v1/responses", `{"model":"gpt-4o",`+stream+`"max_output_tokens":50,"max_tool_calls":5,`+
				`"tools":[{"type":"web_search"}],"input":"news today?"}`,
				"x-mock-completion-tokens", "40", "x-mock-web-searches", "5")
			statuses = append(statuses, resp.StatusCode)
		}
		recs := flushedRecords(t, h, file)
		spent := int64(0)
		for _, r := range recs {
			spent += r.CostMicroUSD
		}
		if statuses[0] != 200 || len(recs) != 1 || spent > quota {
			t.Fatalf("%s: statuses %v, %d records costing %d µUSD under a %d µUSD limit (want the first admitted, the second refused)", stream, statuses, len(recs), spent, quota)
		}
		if r := recs[0]; r.CostMicroUSD != (r.InputTokens*5+1)/2+r.OutputTokens*10+5*10_000 {
			t.Errorf("%s: input %d output %d cost %d µUSD, want the tokens and five calls at $0.01", stream, r.InputTokens, r.OutputTokens, r.CostMicroUSD)
		}
	}
}

// A web search stream the upstream cuts before its final usage is charged
// the searches reserved (max_uses 4), which it may have run unreported,
// rather than the 2 reported so far, on top of the input and the output
// streamed.
func TestWebSearchStreamCutChargesReservedSearches(t *testing.T) {
	h, file := startSearchRig(t, "anthropic", "", `claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, max_input_tokens: 1000}`, "10")
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":50,`+
		`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":4}],"messages":[{"role":"user","content":"news today?"}]}`,
		"x-mock-completion-tokens", "40", "x-mock-web-searches", "2", "x-mock-stream-cut", "3")
	recs := flushedRecords(t, h, file)
	if len(recs) != 1 {
		t.Fatalf("ledger %+v", recs)
	}
	if r := recs[0]; r.CostMicroUSD < 4*10_000 || r.CostMicroUSD != r.InputTokens*3+r.OutputTokens*15+4*10_000 {
		t.Errorf("cut stream: input %d output %d cost %d µUSD, want the tokens and the four reserved searches", r.InputTokens, r.OutputTokens, r.CostMicroUSD)
	}
}

// A web search stream with an event llmguard cannot read (here not JSON)
// that then ends in an in-band error, with no usage and no text read, would
// be refunded but for the unread event: it is charged its input and output
// reservations, and the searches reserved too (Anthropic max_uses 4,
// Responses max_tool_calls 3), which the upstream may have run and billed
// inside the unread event. Before, that bill carried no searches.
func TestWebSearchStreamUnreadThenErrorChargesSearches(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, stream string
		searches                 int64
	}{
		{"messages", "/v1/messages",
			`{"model":"claude-sonnet-4-5","stream":true,"max_tokens":50,` +
				`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":4}],"messages":[{"role":"user","content":"news today?"}]}`,
			"event: content_block_start\ndata: {'not': json}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			4},
		{"responses", "/v1/responses",
			`{"model":"claude-sonnet-4-5","stream":true,"max_output_tokens":50,"max_tool_calls":3,` +
				`"tools":[{"type":"web_search"}],"input":"news today?"}`,
			"event: response.output_item.done\ndata: {'not': json}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n",
			3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.stream)
			}))
			t.Cleanup(up.Close)
			flavor := "anthropic"
			if tc.name == "responses" {
				flavor = "openai"
			}
			h, file := startSearchRig(t, flavor, up.URL, `claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, max_input_tokens: 1000}`, "10")
			resp, _ := h.do(tc.path, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			recs := flushedRecords(t, h, file)
			if len(recs) != 1 {
				t.Fatalf("ledger %+v", recs)
			}
			r := recs[0]
			if r.OutputTokens < 50 || r.CostMicroUSD != r.InputTokens*3+r.OutputTokens*15+tc.searches*10_000 {
				t.Errorf("input %d output %d cost %d µUSD, want the reservations and the %d reserved searches", r.InputTokens, r.OutputTokens, r.CostMicroUSD, tc.searches)
			}
		})
	}
}

// startSearchRig runs llmguard with one upstream of flavor at url (a new
// mock upstream when url is ""), the test key (alice of acme), one models:
// entry model, a tenant usd limit of quota dollars a month, and a ledger:
// the rig of the web search tests. It returns the harness and the
// ledger's file.
func startSearchRig(t *testing.T, flavor, url, model, quota string) (*harness, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	var mock *mockllm.Server
	if url == "" {
		var err error
		if mock, err = mockllm.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mock.Close() })
		url = mock.URL
	}
	h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: up, flavor: %s, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
models:
  %s
limits:
  - {name: acme-dollars, scope: tenant, unit: usd, quota: %s, period: month}
ledger: {file: %q}
`, flavor, url, testKey, model, quota, file))
	return h, file
}

// flushedRecords flushes h's ledger and reads the records in file.
func flushedRecords(t *testing.T, h *harness, file string) []ledger.Record {
	t.Helper()
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
