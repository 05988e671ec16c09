//go:build !nativetest

package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// A 429 whose wait is longer than max_retry_wait (default 60 s) also says
// x-should-retry: false, so that the official SDKs return the error at once
// instead of sleeping through it (with their default two retries), while
// Retry-After still gives the true wait; a shorter wait leaves the SDKs free
// to retry.
func TestLongWaitsAreNotSleptThrough(t *testing.T) {
	h := startFlavors(t, `  - {name: hourly, scope: user, unit: requests, rate: 1, per: 1h}`)
	limited := func() float64 {
		return h.scrape()["llmguard_requests_total"].sum(map[string]string{"outcome": "limited"})
	}
	// An SDK that sleeps through the wait fails on this deadline instead
	// of hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c := h.client(testKey) // default retries: 2
	if _, err := c.Chat.Completions.New(ctx, chatParams(10)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Chat.Completions.New(ctx, chatParams(10))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 {
		t.Fatalf("err %v, want a 429", err)
	}
	if got := oe.Response.Header.Get("x-should-retry"); got != "false" {
		t.Errorf("x-should-retry %q on a wait of an hour, want false", got)
	}
	if got := oe.Response.Header.Get("Retry-After"); got != "3600" {
		t.Errorf("Retry-After %q, want the true wait 3600", got)
	}
	if n := limited(); n != 1 {
		t.Errorf("the OpenAI SDK sent %v denied requests, want 1: it retried a wait it was told not to", n)
	}

	a := h.anthropicClient() // default retries: 2
	_, err = a.Messages.New(ctx, messageParams(10))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 {
		t.Fatalf("err %v, want a 429", err)
	}
	if got := ae.Response.Header.Get("x-should-retry"); got != "false" {
		t.Errorf("Anthropic: x-should-retry %q on a wait of an hour, want false", got)
	}
	if n := limited(); n != 2 {
		t.Errorf("%v denied requests after the Anthropic SDK's call, want 2: it retried", n)
	}
}

// A short wait keeps the SDKs' retries: no x-should-retry on the 429.
func TestShortWaitsMayBeRetried(t *testing.T) {
	h := startFrozen(t, `limits:
  - {name: per-second, scope: user, unit: requests, rate: 1, per: 2s}`)
	if resp, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)
	if resp.StatusCode != 429 || resp.Header.Get("x-should-retry") != "" || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("%d, x-should-retry %q, Retry-After %q; want 429 without x-should-retry, Retry-After 2",
			resp.StatusCode, resp.Header.Get("x-should-retry"), resp.Header.Get("Retry-After"))
	}
}
