package app

import "testing"

// OpenAI's chat search models bill a search call on every request at the
// search context size asked (gpt-4o-search-preview: $50 per 1,000 at
// high, the default fee when the price table gives none), and their usage
// names none. Before, the call was neither reserved nor charged: two such
// requests (about 50,500 µUSD apiece) reserved 3,000 µUSD each, were both
// admitted by a 60,000 µUSD limit and were charged about 500 apiece. Now
// the first reserves 53,000 and is charged its fee, the second finds too
// little left; the ledger says which size was charged and what the search
// fees came to. JSON and stream alike.
func TestChatSearchModelFeeReservedAndCharged(t *testing.T) {
	for _, stream := range []string{``, `"stream":true,`} {
		h, file := startSearchRig(t, "openai", "", `gpt-4o-search-preview: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, max_input_tokens: 1000}`, "0.06")
		const quota = 60_000 // µUSD
		var statuses []int
		for range 2 {
			resp, _ := h.do("/v1/chat/completions", `{"model":"gpt-4o-search-preview",`+stream+`"max_completion_tokens":50,`+
				`"web_search_options":{"search_context_size":"high"},"messages":[{"role":"user","content":"news today?"}]}`,
				"x-mock-completion-tokens", "40")
			statuses = append(statuses, resp.StatusCode)
		}
		recs := flushedRecords(t, h, file)
		spent := int64(0)
		for _, r := range recs {
			spent += r.CostMicroUSD
		}
		if statuses[0] != 200 || statuses[1] != 429 || len(recs) != 1 || spent > quota {
			t.Fatalf("%s: statuses %v, %d records costing %d µUSD under a %d µUSD limit (want the first admitted, the second refused)", stream, statuses, len(recs), spent, quota)
		}
		r := recs[0]
		if want := (r.InputTokens*5+1)/2 + r.OutputTokens*10 + 50_000; r.CostMicroUSD != want || r.SearchContextSize != "high" || r.SearchFeeMicroUSD != 50_000 {
			t.Errorf("%s: input %d output %d cost %d µUSD, search %q at %d µUSD; want %d, high at 50,000", stream,
				r.InputTokens, r.OutputTokens, r.CostMicroUSD, r.SearchContextSize, r.SearchFeeMicroUSD, want)
		}
	}
}
