package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const alertsHead = `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
`

// alerts.webhook: defaults filled, and each bad value refused with its
// field named.
func TestAlertsWebhookValidation(t *testing.T) {
	c, err := Parse([]byte(alertsHead + `alerts: {webhook: {url: "https://hooks.example.com/x?y=1", headers: {Authorization: "Bearer t"}}}`))
	if err != nil {
		t.Fatalf("valid webhook refused: %v", err)
	}
	w := c.Alerts.Webhook
	if w.Format != "json" || !slices.Equal(w.Thresholds, []float64{0.5, 0.8, 1}) || time.Duration(w.Timeout) != DefaultWebhookTimeout ||
		w.MaxAttempts != DefaultWebhookAttempts || w.Queue != DefaultWebhookQueue {
		t.Errorf("defaults not filled: %+v", w)
	}
	if c, err := Parse([]byte(alertsHead)); err != nil || c.Alerts.Webhook != nil {
		t.Errorf("no alerts: %v %+v", err, c.Alerts)
	}
	for _, tc := range []struct{ name, webhook, field string }{
		{"no url", `{format: json}`, "alerts.webhook.url: required"},
		{"ftp", `{url: "ftp://x/y"}`, "alerts.webhook.url: must be an http:// or https://"},
		{"file", `{url: "file:///etc/passwd"}`, "alerts.webhook.url"},
		{"no host", `{url: "http:///x"}`, "alerts.webhook.url: must name a host"},
		{"credentials", `{url: "https://u:p@x/"}`, "alerts.webhook.url: must not carry user:password"},
		{"format", `{url: "http://x", format: teams}`, "alerts.webhook.format"},
		{"empty thresholds", `{url: "http://x", thresholds: []}`, "alerts.webhook.thresholds"},
		{"zero threshold", `{url: "http://x", thresholds: [0]}`, "alerts.webhook.thresholds[0]"},
		{"decreasing", `{url: "http://x", thresholds: [0.8, 0.5]}`, "alerts.webhook.thresholds[1]"},
		{"huge", `{url: "http://x", thresholds: [11]}`, "alerts.webhook.thresholds[0]"},
		{"timeout", `{url: "http://x", timeout: 1h}`, "alerts.webhook.timeout"},
		{"bad timeout", `{url: "http://x", timeout: soon}`, "alerts.webhook.timeout"},
		{"attempts", `{url: "http://x", max_attempts: 21}`, "alerts.webhook.max_attempts"},
		{"queue", `{url: "http://x", queue: -1}`, "alerts.webhook.queue"},
		{"header name", `{url: "http://x", headers: {"Bad Name": v}}`, "alerts.webhook.headers"},
		{"header value", `{url: "http://x", headers: {X-A: "a\nb"}}`, "alerts.webhook.headers.X-A"},
		{"content-type", `{url: "http://x", headers: {content-type: text/plain}}`, "alerts.webhook.headers"},
		{"unknown field", `{url: "http://x", retries: 3}`, "retries"},
	} {
		_, err := Parse([]byte(alertsHead + "alerts: {webhook: " + tc.webhook + "}"))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want one naming %q", tc.name, err, tc.field)
		}
	}
}

// FuzzAlertsWebhook: any alerts section parses into a webhook whose URL
// is http(s) with a host and whose thresholds increase, or is refused; it
// never panics.
func FuzzAlertsWebhook(f *testing.F) {
	f.Add(`{url: "https://h/x", format: slack, thresholds: [0.5, 1], timeout: 3s, headers: {A: b}}`)
	f.Add(`{url: "http://[::1]:9/x"}`)
	f.Add(`{url: "javascript:alert(1)"}`)
	f.Add(`{url: "http://x", thresholds: [.nan]}`)
	f.Fuzz(func(t *testing.T, webhook string) {
		c, err := Parse([]byte(alertsHead + "alerts: {webhook: " + webhook + "}"))
		if err != nil || c.Alerts.Webhook == nil {
			return
		}
		w := c.Alerts.Webhook
		if err := CheckWebhookURL(w.URL); err != nil {
			t.Fatalf("accepted url %q: %v", w.URL, err)
		}
		if !strings.HasPrefix(w.URL, "http://") && !strings.HasPrefix(w.URL, "https://") && !strings.HasPrefix(strings.ToLower(w.URL), "http") {
			t.Fatalf("accepted url %q", w.URL)
		}
		for i, th := range w.Thresholds {
			if !(th > 0 && th <= 10) || i > 0 && th <= w.Thresholds[i-1] {
				t.Fatalf("accepted thresholds %v", w.Thresholds)
			}
		}
	})
}
