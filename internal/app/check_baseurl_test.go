package app

import (
	"strings"
	"testing"
)

// A base_url spelt as an SDK's base URL (ending in /v1) has every request's
// /v1 path appended to it: the upstream is asked for /v1/v1/chat/completions
// and answers 404 to every call. A new-user trial's config with
// base_url: http://127.0.0.1:8081/v1 validated "OK" and served only 404s.
// It is warned of for openai and anthropic upstreams without a
// path_prefix (one with a prefix may strip the /v1 itself).
func TestCheckBaseURLEndingInV1(t *testing.T) {
	fs := checkOf(t, `
upstreams:
  - {name: a, flavor: openai, base_url: "https://api.openai.com/v1", no_key: true}
  - {name: b, flavor: anthropic, base_url: "https://api.anthropic.com/v1/", no_key: true}
  - {name: c, flavor: openai, base_url: "https://api.groq.com/openai", path_prefix: /groq, no_key: true}
  - {name: d, flavor: openai, base_url: "https://api.groq.com/openai/v1", path_prefix: /g2, no_key: true}
  - {name: e, flavor: openai, base_url: "http://127.0.0.1:8081", path_prefix: /e, no_key: true}
  - {name: f, flavor: openai, base_url: "https://u:hunter2@llm.example/api/v1", path_prefix: "", no_key: true}
keys: [{key: sk-a, tenant: acme}]
`, nil)
	for _, tc := range []struct {
		field string
		says  string // "": no finding
	}{
		{"upstreams[0].base_url", "/v1/v1/chat/completions"},
		{"upstreams[1].base_url", "/v1/v1/messages"},
		{"upstreams[2].base_url", ""},
		{"upstreams[3].base_url", ""},
		{"upstreams[4].base_url", ""},
		{"upstreams[5].base_url", "give the API's root, https://u:xxxxx@llm.example/api "},
	} {
		got := found(fs, tc.field)
		if tc.says == "" {
			if len(got) != 0 {
				t.Errorf("%s: %v, want nothing", tc.field, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Fatal || !strings.Contains(got[0].Message, tc.says) || strings.Contains(got[0].Message, "hunter2") {
			t.Errorf("%s: %v, want one warning saying %q", tc.field, got, tc.says)
		}
	}
}
