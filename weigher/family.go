package weigher

import "strings"

// A model's family rules (encoding, safety factor, image rule, Claude's
// tool-use prompt) are found by name prefix, on the name stripped of the
// decorations providers and gateways add before it:
//
//   - a path of providers or routes, up to the last '/': OpenRouter's and
//     LiteLLM's "anthropic/claude-opus-4-7", "openai/gpt-4o-mini",
//     Fireworks' "accounts/fireworks/models/…", Vertex AI's
//     "publishers/anthropic/models/claude-…";
//   - Amazon Bedrock's vendor, with a cross-region inference prefix before
//     it ("anthropic.claude-…", "us.anthropic.claude-…-v1:0",
//     "openai.gpt-oss-…"; https://docs.aws.amazon.com/bedrock/latest/userguide/model-ids.html);
//   - OpenAI's fine-tuned model prefix "ft:" ("ft:gpt-4o-mini-2024-07-18:org::id").
//
// Suffixes need no stripping, as the rules match prefixes: Vertex AI's
// "@20250929", Bedrock's "-v1:0", OpenRouter's ":free" or ":thinking".
// OpenRouter writes Claude versions with dots ("claude-opus-4.7",
// "claude-3.5-sonnet"), Anthropic with dashes: a Claude name's dots become
// dashes.

// canonicalModel is model stripped of the decorations above: the name its
// family's rules are found by.
func canonicalModel(model string) string {
	if hasUpper(model) {
		// Gateways match names in any case ("Anthropic/Claude-Opus-4.7").
		model = strings.ToLower(model)
	}
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	model = strings.TrimPrefix(model, "ft:")
	for _, vendor := range [...]string{"anthropic.", "openai."} {
		if i := strings.Index(model, vendor); i >= 0 && (i == 0 || model[i-1] == '.') {
			model = model[i+len(vendor):]
			break
		}
	}
	if strings.HasPrefix(model, "claude") && strings.IndexByte(model, '.') >= 0 {
		model = strings.ReplaceAll(model, ".", "-")
	}
	return model
}

// family is the name whose family rules count model's requests: its
// configured [Model.Family] (an alias's target) when set, else model
// itself; the rules strip it with canonicalModel.
func (w *Weigher) family(model string) string {
	if m, ok := w.configured(model); ok && m.Family != "" {
		return m.Family
	}
	return model
}

// hasUpper reports whether s holds an ASCII upper-case letter.
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
