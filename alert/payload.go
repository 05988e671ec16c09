package alert

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/llmguard/llmguard/spec"
)

// Format is the body a webhook receives; defined once in package spec.
type Format = spec.AlertFormat

// Formats of Options.Format.
const (
	FormatJSON  = spec.AlertJSON  // Payload as JSON
	FormatSlack = spec.AlertSlack // {"text": "..."}, as a Slack incoming webhook takes it
)

// Payload is the JSON body of one alert (FormatJSON): a budget (a quota
// limit's bucket) whose use in its current period reached Threshold.
type Payload struct {
	// Type is always "llmguard.budget_threshold".
	Type    string `json:"type"`
	Tenant  string `json:"tenant"`  // the tenant of the request that crossed it
	Limit   string `json:"limit"`   // the limit's name in the config
	Scope   string `json:"scope"`   // key, user, tenant or global
	Subject string `json:"subject"` // the key id, user or tenant; "" for global
	// Unit is what Spent and Quota count: micro_usd, tokens, input_tokens,
	// output_tokens or requests.
	Unit      string  `json:"unit"`
	Threshold float64 `json:"threshold"` // the fraction of Quota crossed, e.g. 0.8
	Spent     int64   `json:"spent"`     // used in the period so far, in Unit
	Quota     int64   `json:"limit_amount"`
	// UsedFraction is Spent / Quota to 4 decimal places, as the usage
	// report's CSV and the budget log line give it (trial12: 0.5133333333333333);
	// Spent and Quota are exact.
	UsedFraction float64 `json:"used_fraction"`
	// SpentUSD and QuotaUSD are Spent and Quota in dollars for a
	// micro_usd budget; omitted otherwise.
	SpentUSD *float64 `json:"spent_usd,omitempty"`
	QuotaUSD *float64 `json:"limit_usd,omitempty"`
	// PeriodStart and PeriodEnd bound the budget's period, [start, end),
	// RFC 3339 in the budget's own time zone (its offset shown).
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	// TimeZone is the budget's IANA zone name (UTC by default).
	TimeZone string `json:"timezone"`
	// DetectedAt is when the node saw the crossing, RFC 3339 UTC.
	DetectedAt time.Time `json:"detected_at"`
	// Exhausted is set when the budget reached Threshold by denying a
	// request (what is left cannot pay it) rather than by spend: Spent may
	// then be well below Threshold × Quota (a request with a large output
	// reservation is denied with half the budget left).
	Exhausted bool `json:"exhausted,omitempty"`
}

// PayloadType is Payload.Type.
const PayloadType = "llmguard.budget_threshold"

// body encodes p as f's body.
func body(f Format, p Payload) ([]byte, error) {
	if f == FormatSlack {
		return json.Marshal(struct {
			Text string `json:"text"`
		}{slackText(p)})
	}
	return json.Marshal(p)
}

// slackText is p as one line of Slack mrkdwn, with &, < and > escaped as
// Slack requires of text it should not read as markup ("Formatting text
// for app surfaces", Escaping text).
func slackText(p Payload) string {
	who := p.Scope
	if p.Subject != "" {
		who += " " + p.Subject
	}
	amount := fmt.Sprintf("%d of %d %s", p.Spent, p.Quota, p.Unit)
	if p.SpentUSD != nil && p.QuotaUSD != nil {
		amount = dollars(*p.SpentUSD) + " of " + dollars(*p.QuotaUSD)
	}
	// A budget that reached 1.0 by denying a request may have spent well
	// short of it (a request with a large reservation): the text says it
	// denies, not that its spend crossed 100 %.
	crossed := "crossed " + strconv.FormatFloat(p.Threshold*100, 'f', -1, 64) + "%"
	if p.Exhausted {
		crossed = "now denies requests it cannot pay for"
	}
	// "(user alice, tenant acme)"; a tenant's or global budget names the
	// tenant once: "(tenant acme)".
	if p.Tenant != "" && !(p.Scope == spec.ScopeTenant.String() && p.Subject == p.Tenant) {
		who += ", tenant " + p.Tenant
	}
	s := fmt.Sprintf("llmguard: budget %s (%s) %s: %s used (%.1f%%), period %s to %s",
		p.Limit, who, crossed, amount, p.UsedFraction*100,
		p.PeriodStart.Format(time.RFC3339), p.PeriodEnd.Format(time.RFC3339))
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// dollars formats an amount to the cent, or to the micro-dollar when it is
// under a cent but not zero (a small test budget must not read $0.00).
func dollars(usd float64) string {
	if a := math.Abs(usd); a > 0 && a < 0.01 {
		return fmt.Sprintf("$%.6f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}
