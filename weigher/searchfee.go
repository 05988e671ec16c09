package weigher

import (
	"strings"

	"github.com/llmguard/llmguard/spec"
	"github.com/tidwall/gjson"
)

// searchAsk is what a chat body asks of the searches billed per request:
// its web_search_options (OpenAI's search models, Perplexity's Sonar,
// OpenRouter's native search) and its plugins (OpenRouter's web plugin),
// as the member walk found them (zero Results: absent).
type searchAsk struct {
	options, plugins gjson.Result
}

// read notes the member k with value v when it is one searchAsk holds.
func (s *searchAsk) read(k string, v gjson.Result) {
	switch k {
	case "web_search_options":
		s.options = v
	case "plugins":
		s.plugins = v
	}
}

// asked reports whether the body named web_search_options or plugins
// (null included): when not, its fees are those of an empty searchAsk,
// which depend on the model name alone (chatRules.search holds them).
func (s searchAsk) asked() bool { return s.options.Exists() || s.plugins.Exists() }

// defaultWebResults is the results OpenRouter's web plugin fetches when
// it names no max_results (its web search guide: "defaults to 5").
const defaultWebResults = 5

// fees is the per-request search fee model's request incurs (its search
// context size; SearchContextNone: none) and the web results OpenRouter's
// web plugin may fetch for it, each billed on its own
// (spec.Usage.SearchContext, SearchResults):
//
//   - a Perplexity Sonar model (not its deep research, billed per search
//     query instead) bills a fee on every request, at the size its
//     web_search_options ask, "low" (its default) when they name none;
//   - an OpenAI search model (gpt-4o-search-preview,
//     gpt-4o-mini-search-preview, gpt-5-search-api) searches on every
//     request, billed per call at that size, "medium" (OpenAI's default)
//     when none is named;
//   - any other model sent web_search_options (a gateway's search model,
//     OpenRouter's native search) is taken to bill so too, "medium" when
//     none is named;
//   - OpenRouter's web plugin ({"id": "web"} in plugins, or a ":online"
//     model) fetches its max_results (5 by default) at $4 per 1,000 with
//     the Exa engine; with the native engine (asked, or by default for
//     OpenAI, Anthropic, Perplexity and xAI models) the provider's own
//     search is billed: the per-request fee. An engine llmguard does not
//     know reserves both.
//
// A size that cannot be read (not a string, a name llmguard does not
// know, options that are not an object) is the dearest, "high".
func (s searchAsk) fees(model string) (size spec.SearchContextSize, results int64) {
	asked := s.sizeAsked()
	name := strings.ToLower(model)
	base := name[strings.LastIndexByte(name, '/')+1:]
	switch {
	case perplexityRequestFeeModel(base):
		size = cmpSize(asked, spec.SearchContextLow)
	case openAISearchModel(base):
		size = cmpSize(asked, spec.SearchContextMedium)
	case s.options.Exists() && s.options.Type != gjson.Null:
		size = cmpSize(asked, spec.SearchContextMedium)
	}
	plugin, results := s.pluginFees(model)
	return max(size, plugin), results
}

// pluginFees is the part of fees OpenRouter's web plugin makes, which its
// completions, Responses and Messages endpoints take as its chat endpoint
// does: the provider's per-request fee (native engine) or the results
// (Exa).
func (s searchAsk) pluginFees(model string) (size spec.SearchContextSize, results int64) {
	n, engine, on := s.webPlugin()
	if !on && !onlineModel(model) {
		return spec.SearchContextNone, 0
	}
	name := strings.ToLower(model)
	if !on {
		n = defaultWebResults
	}
	if engine == "" {
		engine = "exa"
		if nativeSearchProvider(name) {
			engine = "native"
		}
	}
	if engine != "exa" { // native, or unknown: the provider's fee
		size = cmpSize(s.sizeAsked(), spec.SearchContextMedium)
	}
	if engine != "native" { // Exa, or unknown: the results
		results = n
	}
	return size, results
}

// cmpSize is asked, or def when the request named no size.
func cmpSize(asked, def spec.SearchContextSize) spec.SearchContextSize {
	if asked == spec.SearchContextNone {
		return def
	}
	return asked
}

// sizeAsked is the search context size web_search_options names:
// SearchContextNone when they are absent or null or name none (or null),
// SearchContextHigh when they cannot be read.
func (s searchAsk) sizeAsked() spec.SearchContextSize {
	o := s.options
	switch {
	case !o.Exists() || o.Type == gjson.Null:
		return spec.SearchContextNone
	case !o.IsObject():
		return spec.SearchContextHigh
	}
	v := o.Get("search_context_size")
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return spec.SearchContextNone
	case v.Type != gjson.String || v.Str == "":
		return spec.SearchContextHigh
	}
	return spec.ParseSearchContextSize(v.Str)
}

// webPlugin reads OpenRouter's plugins for its web plugin (an element
// whose "id" is "web", any case): on when there is one, n its max_results
// (a count as tokenCount reads it, capped at maxWebSearchUses;
// defaultWebResults otherwise), engine its "engine" lowercased ("" when
// absent or null; "?" when not a string). Several web plugins add up.
func (s searchAsk) webPlugin() (n int64, engine string, on bool) {
	if !s.plugins.IsArray() {
		return 0, "", false
	}
	s.plugins.ForEach(func(_, p gjson.Result) bool {
		if id := p.Get("id"); !p.IsObject() || id.Type != gjson.String || !strings.EqualFold(id.Str, "web") {
			return true
		}
		on = true
		r, ok := tokenCount(p.Get("max_results"))
		if !ok {
			r = defaultWebResults
		}
		n = min(n+min(r, maxWebSearchUses), 2*maxWebSearchUses)
		switch e := p.Get("engine"); e.Type {
		case gjson.Null:
		case gjson.String:
			engine = pluginEngine(engine, strings.ToLower(e.Str))
		default:
			engine = pluginEngine(engine, "?")
		}
		return true
	})
	return n, engine, on
}

// pluginEngine is the engine two web plugins name together: one when they
// agree (or the first names none), "?" (unknown: both fees) otherwise.
func pluginEngine(was, e string) string {
	if was == "" || was == e {
		return e
	}
	return "?"
}

// perplexityRequestFeeModel reports whether base (a model's name,
// lowercased, without its provider prefix) is a Perplexity Sonar model
// that bills a fee per request: sonar, sonar-pro, sonar-reasoning,
// sonar-reasoning-pro (its pricing page, request pricing; not
// sonar-deep-research, billed per search query).
func perplexityRequestFeeModel(base string) bool {
	return strings.HasPrefix(base, "sonar") && !strings.Contains(base, "deep-research")
}

// openAISearchModel reports whether base names one of OpenAI's chat
// search models, which search on every request and bill each call
// (gpt-4o-search-preview, gpt-4o-mini-search-preview, gpt-5-search-api
// and their snapshots).
func openAISearchModel(base string) bool {
	return strings.HasPrefix(base, "gpt-") && (strings.Contains(base, "-search-preview") || strings.Contains(base, "-search-api"))
}

// nativeSearchProvider reports whether OpenRouter's web plugin runs the
// model's own search when it names no engine: OpenAI, Anthropic,
// Perplexity and xAI models (its web search guide, engine selection).
func nativeSearchProvider(name string) bool {
	for _, p := range [...]string{"openai/", "anthropic/", "perplexity/", "x-ai/"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
