package main

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/app"
)

// The note under an empty --tenant report: none without --tenant or for a
// tenant with requests or quota use; "check its spelling" when a ledger
// counts requests; with no ledger (Source "none"), a note that says requests
// are not counted, never that the tenant made none.
func TestEmptyTenantNote(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tenant string
		rep    app.UsageReport
		want   string // substring; "" means no note
		reject string // must not appear
	}{
		{name: "no --tenant", rep: app.UsageReport{Source: "file"}},
		{name: "tenant with requests", tenant: "acme", rep: app.UsageReport{Source: "file", Requests: 3}},
		{name: "tenant with quota use", tenant: "acme", rep: app.UsageReport{Source: "none", Quotas: []app.QuotaState{{Used: 5}}}},
		{name: "ledger, nothing", tenant: "acmee", rep: app.UsageReport{Source: "file"},
			want: `tenant "acmee" has no request in this period and nothing used of any quota: check its spelling`},
		{name: "the node's note", tenant: "beta", rep: app.UsageReport{Source: "file", Note: `tenant "beta" has keys but no request in this period`},
			want: `llmguard usage: tenant "beta" has keys but no request in this period`, reject: "spelling"},
		{name: "no ledger, nothing", tenant: "dev-team", rep: app.UsageReport{Source: "none", Quotas: []app.QuotaState{{Used: 0}}},
			want: "keeps no ledger", reject: "has no request"},
	} {
		got := emptyTenantNote(tc.tenant, &tc.rep)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || tc.reject != "" && strings.Contains(got, tc.reject) {
			t.Errorf("%s: note %q; want one containing %q (and not %q)", tc.name, got, tc.want, tc.reject)
		}
	}
}
