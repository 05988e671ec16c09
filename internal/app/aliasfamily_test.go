package app

import (
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/weigher"
)

// An alias (alias_of) is weighed by its target's family rules, images and
// tool prompt included, not only its encoding and safety factor: the
// adversarial tester's anthropic/claude-opus-4-7 alias reserved 1,608
// tokens for a URL image where claude-opus-4-7 reserves 8,855.
func TestAliasWeighedByTargetFamily(t *testing.T) {
	cfg, err := config.Parse([]byte(`
listen: 127.0.0.1:0
upstreams:
  - {name: claude, flavor: anthropic, base_url: "http://127.0.0.1:1", no_key: true}
keys:
  - {key: ` + testKey + `, user: alice, tenant: acme}
models:
  my-opus: {alias_of: claude-opus-4-7}
  my-mini: {alias_of: gpt-4o-mini}
  my-haiku: {alias_of: claude-3-5-haiku}
  my-4o: {alias_of: gpt-4o}
limits:
  - {name: tpm, scope: user, unit: tokens, rate: 1, per: 1m, burst: 1000000}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, w, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	image := func(k weigher.Kind, body string) func(string) int64 {
		return func(m string) int64 {
			return w.Weigh(k, []byte(`{"model":"`+m+`",`+body)).InputTokens
		}
	}
	claude := image(weigher.KindMessages, `"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`)
	if got, want := claude("my-opus"), claude("claude-opus-4-7"); got != want {
		t.Errorf("my-opus URL image: %d tokens, claude-opus-4-7 %d", got, want)
	}
	// A cheaper target keeps its own rule (a name of no family would get
	// the dearest).
	if got, want := claude("my-haiku"), claude("claude-3-5-haiku"); got != want {
		t.Errorf("my-haiku URL image: %d tokens, claude-3-5-haiku %d", got, want)
	}
	mini := image(weigher.KindChat, `"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`)
	if got, want := mini("my-mini"), mini("gpt-4o-mini"); got != want {
		t.Errorf("my-mini low-detail image: %d tokens, gpt-4o-mini %d", got, want)
	}
	if got, want := mini("my-4o"), mini("gpt-4o"); got != want {
		t.Errorf("my-4o low-detail image: %d tokens, gpt-4o %d", got, want)
	}
}
