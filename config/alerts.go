package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/llmguard/llmguard/spec"
)

// Defaults and bounds of alerts.webhook (README, "Reports for finance").
const (
	// DefaultWebhookTimeout bounds one delivery attempt (connect, send,
	// and read the answer).
	DefaultWebhookTimeout = 5 * time.Second
	// MaxWebhookTimeout is the longest timeout one attempt may have.
	MaxWebhookTimeout = 5 * time.Minute
	// DefaultWebhookAttempts is how many times a crossing is tried.
	DefaultWebhookAttempts = 5
	// MaxWebhookAttempts bounds max_attempts.
	MaxWebhookAttempts = 20
	// DefaultWebhookQueue is how many crossings may wait for delivery
	// before new ones are dropped (and counted).
	DefaultWebhookQueue = 1024
	// MaxWebhookQueue bounds queue.
	MaxWebhookQueue = 1 << 20
	// MaxWebhookThresholds bounds the thresholds list.
	MaxWebhookThresholds = 16
	// MaxWebhookURL is the longest webhook URL, in bytes.
	MaxWebhookURL = 2048
	// MaxWebhookHeaders bounds the headers map.
	MaxWebhookHeaders = 32
)

// DefaultWebhookThresholds are the used fractions of a budget that alert
// when thresholds is not set: half, 80 % and all of it.
var DefaultWebhookThresholds = []float64{0.5, 0.8, 1.0}

// Alerts configure budget threshold alerts. The zero value sends none.
type Alerts struct {
	// Webhook, when set, receives one POST per budget threshold crossing:
	// each quota limit (a limit with quota:) whose use in its current
	// period reaches a threshold, once per period across every node
	// sharing the store. nil: no alerts.
	Webhook *Webhook `yaml:"webhook"`
}

// Webhook is where budget threshold alerts are POSTed, and how.
type Webhook struct {
	// URL is an http:// or https:// URL with a host; required. Redirects
	// are not followed.
	URL string `yaml:"url"`
	// Format is the body: "json" (the default; README, "Reports for
	// finance", shows the payload) or "slack" ({"text": "..."}, what a
	// Slack incoming webhook takes).
	Format string `yaml:"format"`
	// Thresholds are used fractions of a quota, each in (0, 10] and in
	// increasing order (e.g. [0.5, 0.8, 1.0]; above 1 for overspend). Nil:
	// DefaultWebhookThresholds.
	Thresholds []float64 `yaml:"thresholds"`
	// Timeout bounds one attempt, a Go duration up to MaxWebhookTimeout.
	// Zero: DefaultWebhookTimeout.
	Timeout Duration `yaml:"timeout"`
	// Headers are added to every POST (e.g. an Authorization the receiver
	// requires); names must be HTTP tokens, values without control
	// characters. Content-Type is set by llmguard.
	Headers map[string]string `yaml:"headers"`
	// MaxAttempts is how many times a crossing is tried before it is given
	// up (counted), with exponential backoff and jitter between attempts
	// (from 500ms, doubling, at most 30s). 0: DefaultWebhookAttempts; at
	// most MaxWebhookAttempts.
	MaxAttempts int `yaml:"max_attempts"`
	// Queue is how many crossings may wait for delivery; past it new ones
	// are dropped and counted, never delaying a request. 0:
	// DefaultWebhookQueue; at most MaxWebhookQueue.
	Queue int `yaml:"queue"`
}

// applyAlertDefaults fills alerts.webhook's format, thresholds, timeout,
// max_attempts and queue.
func (c *Config) applyAlertDefaults() {
	w := c.Alerts.Webhook
	if w == nil {
		return
	}
	if w.Format == "" {
		w.Format = spec.AlertJSON.String()
	}
	if w.Thresholds == nil {
		w.Thresholds = slices.Clone(DefaultWebhookThresholds)
	}
	if w.Timeout == 0 {
		w.Timeout = Duration(DefaultWebhookTimeout)
	}
	if w.MaxAttempts == 0 {
		w.MaxAttempts = DefaultWebhookAttempts
	}
	if w.Queue == 0 {
		w.Queue = DefaultWebhookQueue
	}
}

// validateAlerts reports every problem of alerts.webhook, each with its
// field path.
func (c *Config) validateAlerts(p *problems) {
	w := c.Alerts.Webhook
	if w == nil {
		return
	}
	const f = "alerts.webhook"
	if err := CheckWebhookURL(w.URL); err != nil {
		p.add(f+".url", "%v", err)
	}
	if _, ok := spec.ParseAlertFormat(w.Format); !ok {
		p.notOneOf(f+".format", w.Format, spec.AlertFormatNames())
	}
	if len(w.Thresholds) == 0 || len(w.Thresholds) > MaxWebhookThresholds {
		p.add(f+".thresholds", "must list 1 to %d fractions of a quota (got %d)", MaxWebhookThresholds, len(w.Thresholds))
	}
	for i, th := range w.Thresholds {
		switch {
		case !(th > 0 && th <= 10):
			hint := "" // a percentage gets the fraction to write, as warn_at's does
			if th > 10 && th <= 1000 {
				hint = fmt.Sprintf(" (write %v for %v%%)", th/100, th)
			}
			p.add(fmt.Sprintf("%s.thresholds[%d]", f, i), "must be a fraction of the quota in (0, 10] (got %v)%s", th, hint)
		case i > 0 && th <= w.Thresholds[i-1]:
			p.add(fmt.Sprintf("%s.thresholds[%d]", f, i), "must be above the one before it (%v), in increasing order (got %v)", w.Thresholds[i-1], th)
		}
	}
	checkDuration(p, f+".timeout", w.Timeout)
	if time.Duration(w.Timeout) > MaxWebhookTimeout {
		p.add(f+".timeout", "at most %s (got %s)", MaxWebhookTimeout, time.Duration(w.Timeout))
	}
	if w.MaxAttempts < 1 || w.MaxAttempts > MaxWebhookAttempts {
		p.add(f+".max_attempts", "must be between 1 and %d (got %d)", MaxWebhookAttempts, w.MaxAttempts)
	}
	if w.Queue < 1 || w.Queue > MaxWebhookQueue {
		p.add(f+".queue", "must be between 1 and %d (got %d)", MaxWebhookQueue, w.Queue)
	}
	if len(w.Headers) > MaxWebhookHeaders {
		p.add(f+".headers", "at most %d headers (got %d)", MaxWebhookHeaders, len(w.Headers))
	}
	for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
		switch {
		case !isToken(name):
			p.add(f+".headers", "header name %q is not an HTTP token (RFC 9110 §5.6.2)", name)
		case strings.EqualFold(name, "Content-Type") || strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Host"):
			p.add(f+".headers", "header %s is set by llmguard", name)
		case strings.ContainsFunc(w.Headers[name], func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }):
			p.add(f+".headers."+name, "value must not contain control characters")
		}
	}
}

// CheckWebhookURL reports why s cannot be a webhook URL: it must parse, be
// http or https, name a host, carry no user:password (put credentials in
// headers) and be at most MaxWebhookURL bytes. nil when it can.
func CheckWebhookURL(s string) error {
	if s == "" {
		return fmt.Errorf("required: an http:// or https:// URL")
	}
	if len(s) > MaxWebhookURL {
		return fmt.Errorf("at most %d bytes (got %d)", MaxWebhookURL, len(s))
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL (%q)", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an http:// or https:// URL (got scheme %q)", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("must name a host (got %q)", s)
	case u.User != nil:
		return fmt.Errorf("must not carry user:password; send credentials in headers")
	}
	return nil
}

// isToken reports whether s is a non-empty HTTP token (RFC 9110 §5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
