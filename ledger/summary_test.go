package ledger_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
)

func TestSummarize(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	recs := []ledger.Record{
		{TS: at(0), Tenant: "acme", User: "alice", Model: "gpt-4o", Status: 200, InputTokens: 100, CachedInputTokens: 40, OutputTokens: 10, CostMicroUSD: 1_250},
		{TS: at(5), Tenant: "acme", User: "bob", Model: "o3", Status: 200, InputTokens: 200, OutputTokens: 300, ReasoningTokens: 250, CostMicroUSD: 9_999},
		{TS: at(10), Tenant: "acme", User: "alice", Model: "o3", Status: 502, CostMicroUSD: 0},
		{TS: at(20), Tenant: "globex", User: "alice", Model: "gpt-4o", Status: 200, InputTokens: 50, CacheWriteTokens: 30, OutputTokens: 5, CostMicroUSD: 777},
		{TS: at(60), Tenant: "acme", User: "alice", Model: "gpt-4o", Status: 200, InputTokens: 1, OutputTokens: 1, CostMicroUSD: 3},
	}
	for _, tc := range []struct {
		name   string
		filter ledger.Filter
		want   ledger.Totals
		check  func(t *testing.T, s ledger.Summary)
	}{
		{
			name: "everything",
			want: ledger.Totals{Requests: 5, Errors: 1, InputTokens: 351, CachedInputTokens: 40, CacheWriteTokens: 30,
				OutputTokens: 316, ReasoningTokens: 250, CostMicroUSD: 12_029, First: at(0), Last: at(60)},
			check: func(t *testing.T, s ledger.Summary) {
				if got := s.Users[ledger.UserKey{Tenant: "acme", User: "alice"}]; got.Requests != 3 || got.CostMicroUSD != 1_253 {
					t.Errorf("acme/alice = %+v, want 3 requests, 1253 µ$", got)
				}
				if got := s.Users[ledger.UserKey{Tenant: "globex", User: "alice"}]; got.Requests != 1 || got.CostMicroUSD != 777 {
					t.Errorf("globex/alice = %+v, want 1 request, 777 µ$ (users are per tenant)", got)
				}
				if got := s.Models["o3"]; got.Requests != 2 || got.Errors != 1 || got.ReasoningTokens != 250 || got.First != at(5) || got.Last != at(10) {
					t.Errorf("o3 = %+v", got)
				}
				if got := s.Tenants["globex"]; got.CostMicroUSD != 777 || got.CacheWriteTokens != 30 {
					t.Errorf("globex = %+v", got)
				}
			},
		},
		{
			name:   "tenant and [from, to)",
			filter: ledger.Filter{Tenant: "acme", From: at(5), To: at(60)},
			want:   ledger.Totals{Requests: 2, Errors: 1, InputTokens: 200, OutputTokens: 300, ReasoningTokens: 250, CostMicroUSD: 9_999, First: at(5), Last: at(10)},
		},
		{
			name:   "nothing",
			filter: ledger.Filter{Tenant: "initech"},
		},
	} {
		s := ledger.Summarize(recs, tc.filter)
		if s.Total != tc.want {
			t.Errorf("%s: total = %+v\nwant %+v", tc.name, s.Total, tc.want)
		}
		// Every breakdown adds up to the total, exactly.
		for name, m := range map[string]map[string]ledger.Totals{"tenants": s.Tenants, "models": s.Models} {
			var sum ledger.Totals
			for _, tot := range m {
				sum.Requests += tot.Requests
				sum.CostMicroUSD += tot.CostMicroUSD
				sum.InputTokens += tot.InputTokens
			}
			if sum.Requests != s.Total.Requests || sum.CostMicroUSD != s.Total.CostMicroUSD || sum.InputTokens != s.Total.InputTokens {
				t.Errorf("%s: %s add up to %+v, total %+v", tc.name, name, sum, s.Total)
			}
		}
		if tc.check != nil {
			tc.check(t, s)
		}
	}
}

// TestSummaryAddStreams summarizes record by record into a zero Summary,
// as a report over files too big to hold does, with the same result.
func TestSummaryAddStreams(t *testing.T) {
	var recs []ledger.Record
	for i := range 1000 {
		recs = append(recs, rec(i))
	}
	f := ledger.Filter{Tenant: "globex", From: rec(100).TS}
	want := ledger.Summarize(recs, f)
	got := ledger.Summary{Filter: f}
	for _, r := range recs {
		got.Add(r)
	}
	if got.Total != want.Total || len(got.Users) != len(want.Users) || got.Models["o3"] != want.Models["o3"] {
		t.Errorf("streamed %+v, want %+v", got.Total, want.Total)
	}
	if want.Total.Requests != 450 {
		t.Errorf("requests = %d, want 450", want.Total.Requests)
	}
}

// Past MaxNames distinct names a breakdown adds records under OtherName:
// the totals still add up, and the maps stay bounded.
func TestSummaryBoundsNames(t *testing.T) {
	s := ledger.Summary{MaxNames: 3}
	for i := range 10 {
		s.Add(ledger.Record{Tenant: "acme", User: fmt.Sprint("u", i), Model: fmt.Sprint("m", i), CostMicroUSD: 1})
	}
	if len(s.Models) != 4 || len(s.Users) != 4 || s.Models[ledger.OtherName].CostMicroUSD != 7 || s.Total.CostMicroUSD != 10 {
		t.Errorf("models %v users %d total %d", s.Models, len(s.Users), s.Total.CostMicroUSD)
	}
	if s.Tenants["acme"].CostMicroUSD != 10 {
		t.Errorf("tenants %v", s.Tenants)
	}
}

// Spend held at the int64 maximum, never wrapped into a negative, when
// absurd usage reports add up past it (an upstream can report up to the
// per-record cap many times on request-only limits).
func TestTotalsSaturate(t *testing.T) {
	var tot ledger.Totals
	for range 13_000 {
		tot.Add(ledger.Record{Status: 200, InputTokens: 1e15, OutputTokens: 1e15, CostMicroUSD: 750_000_000_000_000})
	}
	if tot.CostMicroUSD != math.MaxInt64 || tot.InputTokens != math.MaxInt64 {
		t.Errorf("13,000 records of 7.5e14 µUSD: total %d µUSD, input %d, want the int64 maximum and no wrap", tot.CostMicroUSD, tot.InputTokens)
	}
	for _, c := range [][3]int64{{math.MaxInt64, 1, math.MaxInt64}, {math.MinInt64, -1, math.MinInt64}, {5, -7, -2}, {math.MaxInt64, math.MinInt64, -1}} {
		if got := ledger.AddSaturated(c[0], c[1]); got != c[2] {
			t.Errorf("AddSaturated(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
