package weigher

import "strings"

// Claude has no public tokenizer, so Messages estimates Claude text by
// counting it in o200k_base (the default encoding for names outside
// OpenAI's families) and multiplying by a safety factor, so the estimate
// errs high and reconciliation refunds the difference.
//
// DefaultClaudeSafetyFactor, 1.2: measured on fixed prompts, Claude 3.5
// Sonnet's tokenizer gives about 16 % more tokens than GPT-4o's o200k_base on
// English prose, 21 % more on math and 30 % more on Python code (L. Gupta,
// "Hidden costs in AI deployment: Why Claude models may be 20-30% more
// expensive than GPT in enterprise settings", VentureBeat, May 2025). 1.2
// covers prose and math and most mixed chat traffic; code-heavy tenants may
// set 1.3 per model. Checked against Anthropic's published token counts
// (https://platform.claude.com/docs/en/build-with-claude/token-counting):
// see TestMessagesPublishedCounts.
//
// NewTokenizerClaudeSafetyFactor, 1.6: Claude Opus 4.7 and the models after
// it use a newer tokenizer that "may use roughly 1× to 1.35× as many tokens
// when processing text compared to previous models" (Anthropic's Opus 4.7
// release notes; the token-counting guide says "approximately 30% more");
// 1.2 × 1.35 ≈ 1.6.
const (
	// DefaultClaudeSafetyFactor multiplies o200k_base counts of Claude text.
	DefaultClaudeSafetyFactor = 1.2
	// NewTokenizerClaudeSafetyFactor is the factor of Claude models on the
	// tokenizer introduced with Claude Opus 4.7.
	NewTokenizerClaudeSafetyFactor = 1.6
)

// newTokenizerClaude are the name prefixes of Claude models on the newer
// tokenizer, as listed in the token-counting guide cited above ("Claude Opus
// 4.7 and later Opus models, Claude Fable 5, Claude Mythos 5, Claude Mythos
// Preview, and Claude Sonnet 5").
var newTokenizerClaude = []string{
	"claude-opus-4-7", "claude-opus-4-8", "claude-opus-4-9", "claude-opus-5",
	"claude-sonnet-5", "claude-fable", "claude-mythos",
}

// FamilySafetyFactor is the safety factor a model's name gives it when
// its configuration sets none: [NewTokenizerClaudeSafetyFactor] or
// [DefaultClaudeSafetyFactor] for Claude models (provider decorations
// stripped: "anthropic/claude-opus-4-7", "us.anthropic.claude-…-v1:0"),
// 1 otherwise. Config aliases of a Claude model take it from their
// target's name.
func FamilySafetyFactor(model string) float64 { return familySafetyFactor(model) }

// familySafetyFactor is the default safety factor of model by name.
func familySafetyFactor(model string) float64 {
	model = canonicalModel(model)
	switch {
	case !isClaude(model):
		return 1
	case newTokenizer(model):
		return NewTokenizerClaudeSafetyFactor
	}
	return DefaultClaudeSafetyFactor
}

// claudeFamilyFactor is familySafetyFactor for a Messages request: a name
// not recognised as Claude's (a gateway's own name, another vendor's model
// behind an Anthropic-compatible endpoint) gets the largest Claude factor,
// [NewTokenizerClaudeSafetyFactor], rather than 1.
func claudeFamilyFactor(model string) float64 {
	if claudeNewRules(model) {
		return NewTokenizerClaudeSafetyFactor
	}
	return DefaultClaudeSafetyFactor
}

// claudeNewRules reports whether a Messages request for model is counted
// by the rules of the Claude models on the newer tokenizer (the 1.6 factor,
// images up to 2576 px): those models, and every name not recognised as
// Claude's, whose dearest rules they are.
func claudeNewRules(model string) bool {
	model = canonicalModel(model)
	return !isClaude(model) || newTokenizer(model)
}

// newTokenizer reports whether model, stripped (canonicalModel), is
// counted as a Claude model on the newer tokenizer: one listed
// (newTokenizerClaude), or any Claude name not known to be on the older one
// (oldTokenizer) — a later version ("claude-opus-4-10"), an alias such as
// "claude-opus-latest" — whose dearest rules they are.
func newTokenizer(model string) bool {
	for _, p := range newTokenizerClaude {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return !oldTokenizer(model)
}

// oldTokenizerClaude are the name prefixes of the Claude families all on
// the older tokenizer: Claude 1 to 3, Instant, and the Sonnet and Haiku 4
// models (the token-counting guide lists only Opus 4.7 and later Opus,
// Fable 5, Mythos and Sonnet 5 on the newer one).
var oldTokenizerClaude = []string{"claude-1", "claude-2", "claude-3", "claude-instant", "claude-sonnet-4", "claude-haiku-4"}

// oldTokenizer reports whether model, stripped, is a Claude model known to
// be on the older tokenizer: one of oldTokenizerClaude, or Claude Opus 4
// up to 4.6 — "claude-opus-4" alone or with a suffix ("@…", ":…"), a date
// ("claude-opus-4-20250514"), or version 4.0, 4.1, 4.5 or 4.6 ("-1",
// "-1-20250805"); "claude-opus-4-10" is not.
func oldTokenizer(model string) bool {
	for _, p := range oldTokenizerClaude {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	rest, ok := strings.CutPrefix(model, "claude-opus-4")
	if !ok {
		return false
	}
	if rest == "" || rest[0] == '@' || rest[0] == ':' {
		return true
	}
	if rest[0] != '-' {
		return false
	}
	n := 1
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	switch v := rest[1:n]; {
	case len(v) == 8: // a date: Claude Opus 4
		return true
	case v == "0", v == "1", v == "5", v == "6":
		return true
	}
	return false
}

// isClaude reports whether model, stripped of provider decorations
// (canonicalModel), names an Anthropic Claude model ("claude-…").
func isClaude(model string) bool { return strings.HasPrefix(model, "claude") }

// Claude prompt framing, in Claude tokens (not scaled by the safety factor).
// Anthropic does not publish its chat template; these are chosen so that the
// estimate is at or above the counts of the token-counting guide cited above
// (14 tokens for system "You are a scientist" + user "Hello, Claude"; 403
// with the get_weather tool; 88 for the extended-thinking example).
const (
	claudeTokensPerMessage = 4 // each message: turn marker and role
	claudeTokensReply      = 3 // the assistant turn the reply continues
	claudeTokensPerToolUse = 3 // each tool_use / tool_result block, on top of its content
	// claudeThinkingTokens is added when "thinking" is enabled: the guide's
	// extended-thinking example counts 88 tokens where its text, framed as
	// above, comes to 68. Anthropic publishes no figure of its own.
	claudeThinkingTokens = 20
)

// toolPrompt is the tool-use system prompt Anthropic adds when a request has
// tools, in tokens, by tool_choice: "auto" or "none" (auto), "any" or "tool"
// (forced). From Anthropic's tool-use pricing table
// (https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview#pricing;
// formerly https://docs.anthropic.com/en/docs/tool-use-pricing-and-tokens):
// Claude 3 Opus 530 / 281, Claude 3 Sonnet 159 / 235, Claude 3 and 3.5 Haiku
// 264 / 340, and 346 / 313 for the Claude 4 family, Sonnet 3.7 and the
// models after them (defaultToolPrompt, used for any other Claude name).
// A name not recognised as Claude's is given the largest of the table,
// 530 / 340 (unknownToolPrompt).
type toolPrompt struct{ auto, forced int64 }

var toolPrompts = []struct {
	prefix string
	tp     toolPrompt
}{
	{"claude-3-opus", toolPrompt{530, 281}},
	{"claude-3-sonnet", toolPrompt{159, 235}},
	{"claude-3-haiku", toolPrompt{264, 340}},
	{"claude-3-5-haiku", toolPrompt{264, 340}},
}

var (
	defaultToolPrompt = toolPrompt{346, 313}
	unknownToolPrompt = toolPrompt{530, 340}
)

// claudeToolPrompt is the tool-use system prompt of model for a tool_choice
// type: "", "auto" and "none" take the auto prompt, "any" and "tool" the
// forced one, and any other (a type the API refuses, "ANY", an object's
// JSON text) the larger of the two, as a lenient upstream may read it as
// either.
func claudeToolPrompt(model, choice string) int64 {
	model = canonicalModel(model)
	tp := defaultToolPrompt
	if !isClaude(model) {
		tp = unknownToolPrompt
	}
	for _, t := range toolPrompts {
		if strings.HasPrefix(model, t.prefix) {
			tp = t.tp
			break
		}
	}
	switch choice {
	case "any", "tool":
		return tp.forced
	case "", "auto", "none":
		return tp.auto
	}
	return max(tp.auto, tp.forced)
}

// Anthropic-defined client tools cost a fixed definition size instead of
// their JSON, in tokens, from each tool's documentation page
// (https://platform.claude.com/docs/en/agents-and-tools/tool-use/bash-tool:
// "245 input tokens"; …/text-editor-tool: "700 additional input tokens";
// …/computer-use-tool: 735 per tool definition plus a 499-token system
// prompt, the larger of the published 466–499). The memory tool
// (…/memory-tool) publishes no figure: the API writes its definition, whose
// commands are the text editor's (view, create, str_replace, insert,
// delete, rename), and adds a memory-protocol instruction to the system
// prompt; it is taken as the text editor's 700 plus 300 for that
// instruction, a bound chosen here (not a documented figure; the
// reconciliation charges what the upstream reports). Counted by the tool's
// JSON, as it was before, it weighed about 15 tokens.
var definedTools = []struct {
	prefix string
	tokens int64
}{
	{"bash_", 245},
	{"text_editor_", 700},
	{"computer_", 735 + 499},
	{"memory_", 700 + 300},
}

// Image rule of Anthropic's vision guide
// (https://platform.claude.com/docs/en/build-with-claude/vision, "Evaluate
// image size" and "Calculate image costs"): tokens = width × height / 750,
// after an image whose long edge exceeds 1568 px, or whose cost exceeds about
// 1,600 tokens, is first scaled down preserving its aspect ratio. The guide's
// examples: 200×200 ≈ 54, 1000×1000 ≈ 1334, 1092×1092 ≈ 1590 tokens. Claude
// Opus 4.7 and later read images up to 2576 px on the long edge; for them the
// cap is taken as 2576 × 2576 / 750 ≈ 8848 tokens, since Anthropic publishes
// no token cap of its own for these models (an open question).
const (
	claudePixelsPerToken = 750
	claudeMaxLongEdge    = 1568 // px
	claudeMaxImageTokens = 1600
	hiResMaxLongEdge     = 2576 // px, Claude Opus 4.7 and later
	hiResMaxImageTokens  = hiResMaxLongEdge * hiResMaxLongEdge / claudePixelsPerToken
)

// claudeImageTokens is what one image of width × height px costs model; 0
// means unknown size (a URL or a stored file), priced at the cap. A name
// not recognised as Claude's is priced by the newer models' larger cap
// (claudeNewRules).
func claudeImageTokens(model string, width, height int64) int64 {
	longEdge, capTokens := int64(claudeMaxLongEdge), int64(claudeMaxImageTokens)
	if claudeNewRules(model) {
		longEdge, capTokens = hiResMaxLongEdge, hiResMaxImageTokens
	}
	if width <= 0 || height <= 0 {
		return capTokens
	}
	w, h := float64(width), float64(height)
	if l := max(w, h); l > float64(longEdge) {
		w, h = w*float64(longEdge)/l, h*float64(longEdge)/l
	}
	t := ceilDiv(int64(w)*int64(h), claudePixelsPerToken)
	return max(1, min(t, capTokens))
}
