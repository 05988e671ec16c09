package app

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// startCapped runs llmguard with an OpenAI and an Anthropic upstream (the
// mock) and one cap_output limit of 1,000 tokens that refills 1 token a
// day, on the store the extra config names (memory when "").
func startCapped(t *testing.T, store string) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	return startConfig(t, mock, twoFlavorHead(mock.URL)+`limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, cap_output: true, cap_output_min: 32}
`+store)
}

// cappedCases are one request per flavor and output field whose maximum
// (5000) the 1,000-token limit cannot pay: field is the member the mock
// must receive lowered, remaining the header of the flavor's remaining
// tokens.
var cappedCases = []struct {
	name, path, body, field, remaining string
	absent                             []string // members that must not appear
}{
	{name: "chat max_tokens", path: "/v1/chat/completions", field: "max_tokens", remaining: "x-ratelimit-remaining-tokens",
		body: `{"model":"gpt-4o-mini","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`, absent: []string{"max_completion_tokens"}},
	{name: "chat max_completion_tokens, spaced and escaped", path: "/v1/chat/completions", field: "max_completion_tokens", remaining: "x-ratelimit-remaining-tokens",
		body: `{"model":"gpt-4o-mini", "max_completion\u005ftokens" :  5000 ,"messages":[{"role":"user","content":"hi"}]}`},
	// Added as max_tokens, chat_output_field's default for a server that
	// is not OpenAI's own API (adv25).
	{name: "chat none named: the default is lowered by adding the field", path: "/v1/chat/completions", field: "max_tokens", remaining: "x-ratelimit-remaining-tokens",
		body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, absent: []string{"max_completion_tokens"}},
	// KoboldCpp reads adapter.max_length only when the body names no
	// maximum: the max_tokens the cap adds bounds it.
	{name: "chat KoboldCpp adapter.max_length: lowered by adding the field", path: "/v1/chat/completions", field: "max_tokens", remaining: "x-ratelimit-remaining-tokens",
		body: `{"model":"gpt-4o-mini","adapter":{"max_length":5000},"messages":[{"role":"user","content":"hi"}]}`, absent: []string{"max_completion_tokens"}},
	{name: "responses", path: "/v1/responses", field: "max_output_tokens", remaining: "x-ratelimit-remaining-tokens",
		body: `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":5000}`},
	{name: "messages", path: "/v1/messages", field: "max_tokens", remaining: "anthropic-ratelimit-tokens-remaining",
		body: `{"model":"claude-sonnet-4-5","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`},
}

// cap_output through real sockets, for each flavor's own field, on the
// memory store, Redis and a 3-master Redis Cluster: the request goes upstream with its maximum
// lowered to exactly what the limit has left after its input (the bucket
// holds 0 at admission), the answer says so in x-llmguard-output-capped,
// and a request that cannot get even cap_output_min is answered 429
// without reaching the upstream or spending.
func TestCapOutputThroughTheProxy(t *testing.T) {
	stores := map[string]func(t *testing.T) string{
		"memory": func(*testing.T) string { return "" },
		"redis": func(t *testing.T) string {
			srv := redistest.Shared(t)
			return fmt.Sprintf("store: {backend: redis, redis_url: \"redis://%s/0\", timeout: 200ms}\n", srv.Addr())
		},
		"cluster": func(t *testing.T) string {
			cluster := redistest.SharedCluster(t, 3) // flushed for each subtest
			return fmt.Sprintf("store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 1s}\n", strings.Join(cluster.Addrs(), ", "))
		},
	}
	for _, storeName := range []string{"memory", "redis", "cluster"} {
		for _, c := range cappedCases {
			t.Run(storeName+"/"+c.name, func(t *testing.T) {
				h := startCapped(t, stores[storeName](t))
				resp, body := h.do(c.path, c.body, "x-mock-completion-tokens", "10")
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				capped := resp.Header.Get("x-llmguard-output-capped")
				to, err := strconv.ParseInt(strings.SplitN(capped, ";", 2)[0], 10, 64)
				if err != nil || to < 32 || to >= 1000 {
					t.Fatalf("x-llmguard-output-capped = %q, want a maximum in [32, 1000)", capped)
				}
				if !strings.Contains(capped, "requested=") {
					t.Errorf("x-llmguard-output-capped = %q names no requested maximum", capped)
				}
				if left := resp.Header.Get(c.remaining); left != "0" {
					t.Errorf("%s = %q at admission, want 0: the lowered request takes exactly what was left", c.remaining, left)
				}
				_, sent := h.mock.LastRequest()
				if !gjson.ValidBytes(sent) {
					t.Fatalf("forwarded body is not JSON: %s", sent)
				}
				if got := gjson.GetBytes(sent, c.field); got.Int() != to || got.Type != gjson.Number {
					t.Fatalf("forwarded %s = %s, want %d: %s", c.field, got.Raw, to, sent)
				}
				for _, a := range c.absent {
					if gjson.GetBytes(sent, a).Exists() {
						t.Errorf("forwarded body has %s: %s", a, sent)
					}
				}
				if gjson.GetBytes(sent, "messages").Raw == "" && gjson.GetBytes(sent, "input").Raw == "" {
					t.Errorf("the rest of the body was lost: %s", sent)
				}

				// Reconciled to 10 output tokens: 1000 − input − 10 left.
				// A request whose input alone leaves less than 32 is denied
				// and spends nothing.
				before := h.mock.Requests.Load()
				long := strings.Repeat("word ", 1200)
				big := strings.Replace(c.body, `"hi"`, strconv.Quote(long), 1)
				resp, body = h.do(c.path, big)
				if resp.StatusCode != 429 {
					t.Fatalf("input over the limit: status %d, want 429: %s", resp.StatusCode, body)
				}
				if resp.Header.Get("x-llmguard-output-capped") != "" {
					t.Error("a denial says it lowered the output")
				}
				if h.mock.Requests.Load() != before {
					t.Error("a denied request reached the upstream")
				}
			})
		}
	}
}

// A request that asks for output its maximum does not bound (OpenRouter's
// reasoning.max_tokens, vLLM's min_tokens) is not lowered by cap_output:
// the lowered maximum would not lower what the upstream bills (a reasoning
// budget of 4,000 beside a maximum lowered to fit 1,000 tokens would bill
// up to ~5,000). It is denied whole, reaching no upstream.
func TestCapOutputLeavesPinnedOutputAlone(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o-mini","max_tokens":5000,"reasoning":{"max_tokens":4000},"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o-mini","max_tokens":5000,"min_tokens":3000,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o-mini","max_output_tokens":5000,"reasoning":{"max_tokens":4000},"input":"hi"}`,
	} {
		h := startCapped(t, "")
		path := "/v1/chat/completions"
		if strings.Contains(body, `"input"`) {
			path = "/v1/responses"
		}
		resp, got := h.do(path, body)
		if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-output-capped") != "" {
			t.Errorf("%s: status %d, capped %q, want 429 uncapped: %s", body, resp.StatusCode, resp.Header.Get("x-llmguard-output-capped"), got)
		}
		if n := h.mock.Requests.Load(); n != 0 {
			t.Errorf("%s: %d requests reached the upstream", body, n)
		}
	}
}
