package app

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/llmguard/llmguard/config"
)

// checkBaseURLs warns of an openai or anthropic upstream without a
// path_prefix whose base_url ends in /v1, as an SDK's base URL does
// (https://api.openai.com/v1): llmguard appends each request's whole path
// to base_url (README, "Routing"), and callers' paths already start with
// /v1, so the upstream would be asked for /v1/v1/… and answer 404. An
// upstream with a path_prefix is left alone: the prefix stripped may take
// the caller's /v1 with it.
func checkBaseURLs(cfg *config.Config) []Finding {
	var out []Finding
	for i, u := range cfg.Upstreams {
		if u.PathPrefix != "" || (u.Flavor != "openai" && u.Flavor != "anthropic") {
			continue
		}
		p, err := url.Parse(u.BaseURL)
		if err != nil || !strings.HasSuffix(strings.TrimRight(p.Path, "/"), "/v1") {
			continue
		}
		example := "/v1/chat/completions"
		if u.Flavor == "anthropic" {
			example = "/v1/messages"
		}
		root := *p // a password in the URL is shown as xxxxx, as in the start-up log
		root.Path = strings.TrimSuffix(strings.TrimRight(p.Path, "/"), "/v1")
		root.RawPath = ""
		out = append(out, Finding{Field: fmt.Sprintf("upstreams[%d].base_url", i), Message: fmt.Sprintf(
			"%s ends in /v1, and llmguard appends each request's whole path to it (%s), so upstream %q would be asked for /v1%s: give the API's root, %s (an SDK's base URL carries /v1, an upstream's base_url does not)",
			p.Redacted(), example, u.Name, example, root.Redacted())})
	}
	return out
}
