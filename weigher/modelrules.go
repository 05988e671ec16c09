package weigher

import (
	"strings"
	"sync/atomic"

	"github.com/llmguard/llmguard/spec"
)

// chatRules are what a chat request's model name decides about weighing
// it, each as the Weigher's own methods find it: family (w.family), the
// encoding (w.EncodingFor), the safety factor (w.safetyFactor), whether it is
// an OpenAI model (openAIModel of its canonical family name), and the
// count contexts of its messages and tool lists. Finding them cost a
// warm 1 KiB chat body a few thousand instructions of name stripping
// (canonicalModel, three times: about 2,500 alone), prefix matching, map
// lookups and context look-ups; a held one costs a string compare.
// Immutable once made.
type chatRules struct {
	model    string // the name they are for
	family   string
	encoding string // its counter is the request's (counter): a budgeted weighing has its own
	factor   float64
	openAI   bool
	// msgCtx and toolsCtx are the count contexts of chat's messages and
	// tool lists (countCache.context "chat.message" and "chat.tools") in
	// cache, the count cache they were made for (nil: caching off).
	msgCtx, toolsCtx uint64
	cache            *countCache
	// search and searchResults are the per-request search fee and the
	// web results (searchAsk.fees) of a body that names neither
	// web_search_options nor plugins: a function of the name alone,
	// whose lowercasing and prefix matching cost a warm 1 KiB chat body
	// about 600 instructions when found for each body.
	search        spec.SearchContextSize
	searchResults int64
	// defaultOut is the output reservation, in tokens, of one completion
	// of a body that states no maximum (w.defaultOutput: the configured
	// Model.DefaultMaxOutputTokens, else Options.DefaultMaxOutputTokens).
	// Found for each such body, it cost a warm 1 KiB chat body a
	// configured look-up: some 450 instructions for a name not
	// configured (spec.AppendCanonModel), 200 for one configured (perf24).
	defaultOut int64
	// hiddenReasoning is hiddenReasoningFamily(family): the family
	// reasons by default in tokens its answer does not show
	// (Estimate.HiddenReasoning). Found for each body, its name stripping
	// (canonicalModel) and prefix matching cost a warm 1 KiB chat body
	// about 990 instructions (whole-process callgrind, perf32).
	hiddenReasoning bool
	// maxIn and maxOut are the name's configured Model.MaxInputTokens
	// and MaxOutputTokens, in tokens, and windowSet whether the name is
	// configured with a MaxInputTokens above 0: the window Ceiling reads.
	// Found at each settlement, the look-up (w.configured) cost a warm
	// 1 KiB chat request about 200 instructions (whole-process callgrind,
	// perf32); Ceiling reads them here when the rules are held
	// (heldChatRules), and finds them as before when not.
	maxIn, maxOut int64
	windowSet     bool
}

// chatRulesTable holds the chat rules of the model names bodies named
// lately, direct-mapped, one name a slot, a name that lands on another's
// slot replacing it (a miss costs finding the rules, as before). Safe for
// concurrent use: a slot holds an immutable chatRules, swapped atomically.
// A Weigher's configuration never changes, so neither do its rules; a
// copy of it with another count cache (tests make such copies, with the
// cache off or a cache of their own, sharing the table) holds the same
// names but other contexts, so a held rule counts only for the cache it
// was made for.
type chatRulesTable struct {
	slots [chatRulesSlots]atomic.Pointer[chatRules]
}

// chatRulesSlots is how many names the table holds at most.
const chatRulesSlots = 16

// maxChatRulesName is the longest name, in bytes, whose rules are held;
// longer names find them each time.
const maxChatRulesName = 64

// chatRules returns the chat rules of model (an Estimate's Model: not a
// view of a body), held in w.rules when it is short enough.
func (w *Weigher) chatRules(model string) *chatRules {
	slot := w.chatRulesSlot(model)
	if slot != nil {
		if r := slot.Load(); r != nil && r.model == model && r.cache == w.cache {
			return r
		}
	}
	if slot == nil {
		return w.findChatRules(model)
	}
	r := w.findChatRules(strings.Clone(model)) // held: it must alias nothing of the caller's
	slot.Store(r)
	return r
}

// chatRulesSlot is the slot of w.rules that holds model's rules, nil when
// none can (no table, an empty name, one longer than maxChatRulesName).
func (w *Weigher) chatRulesSlot(model string) *atomic.Pointer[chatRules] {
	if w.rules == nil || model == "" || len(model) > maxChatRulesName {
		return nil
	}
	h := uint(len(model))*0x9e37 ^ uint(model[0])*0x85eb ^ uint(model[len(model)-1])*0xc2b3 ^ uint(model[len(model)/2])*0x27d4
	return &w.rules.slots[(h^h>>7)%chatRulesSlots]
}

// heldChatRules returns the chat rules w holds for model, nil when it
// holds none; unlike chatRules it never finds nor holds them, so that a
// caller for any kind of request (Ceiling) takes no chat name's slot.
// Rules held for another count cache (a copy of w) are returned too:
// only their fields of the configuration (family, maxIn…) may be read.
func (w *Weigher) heldChatRules(model string) *chatRules {
	if slot := w.chatRulesSlot(model); slot != nil {
		if r := slot.Load(); r != nil && r.model == model {
			return r
		}
	}
	return nil
}

// findChatRules makes model's chat rules afresh (the reference the held
// ones are compared with: TestChatRulesSameAsFound).
func (w *Weigher) findChatRules(model string) *chatRules {
	r := &chatRules{model: model, family: w.family(model), encoding: w.EncodingFor(model), factor: w.safetyFactor(model), cache: w.cache}
	r.openAI = openAIModel(canonicalModel(r.family))
	r.msgCtx = w.cache.context("chat.message", r.encoding, r.family, "")
	r.toolsCtx = w.cache.context("chat.tools", r.encoding, "", "")
	r.search, r.searchResults = searchAsk{}.fees(model)
	r.defaultOut = w.defaultOutput(model)
	r.hiddenReasoning = hiddenReasoningFamily(r.family)
	if m, ok := w.configured(model); ok && m.MaxInputTokens > 0 {
		r.maxIn, r.maxOut, r.windowSet = m.MaxInputTokens, m.MaxOutputTokens, true
	}
	return r
}

// counter is the counter of r's encoding in w (o200k's when w has none):
// w's own, so that a weighing under a budget (weighRow's copy of w)
// counts through its budgeted counters.
func (r *chatRules) counter(w *Weigher) counter {
	if enc := w.encoders[r.encoding]; enc != nil {
		return enc
	}
	return w.encoders[DefaultEncoding]
}
