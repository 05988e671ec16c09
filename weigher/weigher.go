package weigher

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/llmguard/llmguard/spec"
)

// Encoding names accepted in [Model.Encoding]; defined once in package
// spec (the vocabularies embedded by github.com/pkoukk/tiktoken-go-loader).
const (
	EncodingO200k  = spec.EncodingO200k  // GPT-4o / GPT-4.1 / GPT-5 / o-series
	EncodingCL100k = spec.EncodingCL100k // GPT-4 / GPT-3.5-turbo
	EncodingP50k   = spec.EncodingP50k   // legacy Codex / text-davinci-002/003
	EncodingR50k   = spec.EncodingR50k   // legacy GPT-3
)

// knownEncodings are the encodings New can build offline.
var knownEncodings = spec.EncodingNames()

// familyEncodings maps a model-name prefix to its encoding, longest prefix
// first, following OpenAI's tiktoken model table
// (https://github.com/openai/tiktoken/blob/main/tiktoken/model.py). A dated
// snapshot ("gpt-4o-2024-08-06") matches its family by prefix. Names matching
// nothing use o200k_base, the encoding of every OpenAI model released since
// May 2024.
var familyEncodings = []struct{ prefix, encoding string }{
	{"gpt-4o", EncodingO200k},
	{"gpt-4.1", EncodingO200k},
	{"gpt-4.5", EncodingO200k},
	{"gpt-5", EncodingO200k},
	{"o1", EncodingO200k},
	{"o3", EncodingO200k},
	{"o4", EncodingO200k},
	{"gpt-4", EncodingCL100k},
	{"gpt-3.5", EncodingCL100k},
}

// DefaultEncoding is the encoding of a model neither configured nor matched
// by a known family prefix.
const DefaultEncoding = EncodingO200k

// Model is the configuration of one model name.
//
// The zero value means: family-default encoding, Options.DefaultMaxOutputTokens,
// family-default safety factor.
type Model struct {
	// Encoding is a tiktoken encoding name (EncodingO200k, EncodingCL100k,
	// EncodingP50k, EncodingR50k); "" picks the family default by name.
	Encoding string
	// DefaultMaxOutputTokens is the output reservation, in tokens, for a
	// request that sets neither max_completion_tokens nor max_tokens; 0 uses
	// Options.DefaultMaxOutputTokens.
	DefaultMaxOutputTokens int64
	// SafetyFactor multiplies the locally counted text tokens of a model
	// whose tokenizer is not public, so the estimate errs high (see
	// claude.go): 0 picks the family default ([DefaultClaudeSafetyFactor] for
	// "claude-*" names, [NewTokenizerClaudeSafetyFactor] for Claude models on
	// the tokenizer introduced with Claude Opus 4.7, 1 otherwise). It must be
	// finite and not negative.
	SafetyFactor float64
	// MaxInputTokens is the model's largest input (its context window less
	// its output), in tokens: what a request whose input the body does not
	// hold (Estimate.ServerContext) reserves; 0 uses
	// Options.DefaultMaxInputTokens.
	MaxInputTokens int64
	// MaxOutputTokens is the model's documented maximum output per
	// completion, in tokens (0: unknown), reported as
	// Estimate.OutputCeiling of a request that names no maximum.
	MaxOutputTokens int64
	// Family is the model name whose family rules count this model's
	// requests where its own settings leave them to the name (encoding,
	// safety factor, image tiles or patches, Claude's image cap and
	// tool-use prompt): set it for an alias (config alias_of) whose own
	// name says nothing of its family (`my-deployment`). "" means the
	// name itself. Provider decorations are stripped from either
	// (family.go).
	Family string
}

// Options configures [New]. The zero value is valid: no configured models,
// family-default encodings, and an output reservation of 0 tokens for
// requests that do not state their maximum.
type Options struct {
	// Models maps a model name (or a name prefix: "gpt-4o" also covers
	// "gpt-4o-2024-08-06"; the longest configured prefix wins) to its settings.
	Models map[string]Model
	// DefaultMaxOutputTokens is the output reservation, in tokens, for a
	// model with no DefaultMaxOutputTokens of its own (unknown models too).
	DefaultMaxOutputTokens int64
	// DefaultMaxInputTokens is the input reserved, in tokens, by a request
	// with hidden context (Estimate.ServerContext) for a model with no
	// MaxInputTokens of its own; 0 means [DefaultMaxInputTokens].
	DefaultMaxInputTokens int64
	// CeilingWindow is the context window, in tokens, the usage ceiling
	// ([Weigher.Ceiling]) assumes for a model with no MaxInputTokens of
	// its own; 0 means [DefaultCeilingWindow] (10,000,000). Not negative.
	CeilingWindow int64
	// CostCeilingMicroUSD is the least bound, in micro-USD, of a cost an
	// upstream reports for one request (a LiteLLM cost header, an
	// OpenRouter usage.cost), and the only one where no token ceiling
	// prices a bound: a request not weighed, an image generation billed
	// per image ([Weigher.Ceiling]'s BilledMicroUSD; meter's costCeiling).
	// 0 means [DefaultCostCeilingMicroUSD]; not negative.
	CostCeilingMicroUSD int64
	// MaxDepth is the most arrays and objects a JSON document may have open
	// at once (a request body; an upstream answer or SSE event read through
	// [Weigher.ParseUsage] or [Weigher.NewStream]); 0 means
	// [DefaultMaxDepth] (128). A deeper request is reported with
	// Estimate.TooDeep; a deeper answer is not read. At most [MaxMaxDepth].
	MaxDepth int
	// CacheBytes bounds, in bytes, the memory of the cache of element counts
	// (chat messages, Responses input items, Anthropic system prompts and
	// messages, tool lists of 64 bytes of JSON or more), keyed by a seeded
	// 128-bit xxh3 of their exact bytes and their context (kind, encoding,
	// model), and 1/32 of it holds where remembered elements end (a table
	// of end hints, so that the strict scan steps over them without a
	// pass over their bytes), and 1/16 of it resume points (a chat body
	// that starts with a body weighed before, up to its last message, is
	// scanned and counted from there). One cache serves the whole process: the last
	// New sets its size. 0 means [DefaultCacheBytes] (32 MiB); negative
	// turns it off.
	CacheBytes int64
	// ExactMaxBytes is the most bytes of a request's text counted exactly,
	// for a body larger than this many bytes: the text after them is counted
	// with a fast upper bound (never below the exact count; see bound.go
	// for its measured error), and the estimate says Bounded. 0: every body
	// is counted exactly. Not negative.
	ExactMaxBytes int64
	// CountTimeBudget is the longest a request's text is counted exactly,
	// measured on Now from the start of weighing and read every 4 KiB of
	// text (bodies under 4 KiB are never cut short): past it, the rest is
	// counted with the upper bound, as for ExactMaxBytes. Legacy encodings
	// (p50k_base, r50k_base, counted by tiktoken-go) check it between texts
	// and bound by bytes. 0: no time budget. Not negative.
	CountTimeBudget time.Duration
	// Now is the clock of CountTimeBudget; nil means time.Now. Tests
	// inject one.
	Now func() time.Time
}

// Weigher estimates request costs in tokens. Build it with [New]; it is
// immutable afterwards and safe for concurrent use. The zero value is not
// usable.
type Weigher struct {
	models   map[string]Model
	prefixes []configuredName // by prefix form (prefixForm), longest first
	// canon maps each configured name's spec.CanonModel form to the name;
	// "" for a form two configured names share (neither is meant more).
	canon      map[string]string
	defaultOut int64
	defaultIn  int64 // Options.DefaultMaxInputTokens, defaulted
	ceiling    int64 // Options.CeilingWindow, defaulted
	// costCeiling is Options.CostCeilingMicroUSD, defaulted.
	costCeiling int64
	maxDepth    int   // Options.MaxDepth, defaulted
	exactMax    int64 // Options.ExactMaxBytes
	timeBudget  time.Duration
	now         func() time.Time // Options.Now, defaulted
	encoders    map[string]counter
	cache       *countCache // nil: off
	// budget is the request's exact-counting budget, set only on the
	// per-request copy weighRow makes (nil: none): counts made once it is
	// spent are bounds, which the cache must not remember.
	budget   *budget
	noLayout bool // tests: find members with gjson, not the scan's layout
	// noFields (tests): walk a new chat message's members as rawMembers
	// finds them, not as the scan recorded them (jsonscan.Layout.Fields):
	// the reference of FuzzChatFieldsSameAsRawWalk.
	noFields bool
	offerAll bool // tests: every element offered to Vouch (elemMemo.offerAll)
	// chunkShapes are the chat and completions chunk shapes its streams
	// share (chunk_skeleton.go); nil: none.
	chunkShapes *chunkShapes
	// names are copies of the model names bodies named lately
	// (modelnames.go); nil: each is copied.
	names *modelNames
	// rules are the chat rules of the model names bodies named lately
	// (modelrules.go); nil: each is found afresh.
	rules *chatRulesTable
}

// counter counts the tokens of text in one encoding.
type counter interface {
	count(text string) int64
}

// tiktokenCounter counts with tiktoken-go's encoder (p50k_base, r50k_base),
// treating special-token text as ordinary text: EncodeOrdinary never panics,
// unlike Encode with special tokens disallowed.
type tiktokenCounter struct{ t *tiktoken.Tiktoken }

func (c tiktokenCounter) count(text string) int64 { return int64(len(c.t.EncodeOrdinary(text))) }

var offlineOnce sync.Once

// useOfflineVocabularies makes tiktoken-go read the vocabularies embedded in
// tiktoken-go-loader instead of downloading them. It is process-wide (the
// loader is a tiktoken-go package variable), so it runs once, before any
// encoder is built.
func useOfflineVocabularies() {
	offlineOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
}

// New builds the token counters every configured model needs, plus
// o200k_base and cl100k_base for the family defaults, from the vocabularies
// embedded in tiktoken-go-loader (no network), in parallel. Loading and
// indexing those two takes about 0.1–0.15 s on two cores and ~68 MB of
// allocations (see BenchmarkNew), so call it once at
// start-up and share the result.
//
// It fails when a model names an encoding it cannot build offline, with an
// error naming the model and the encoding; when a default is negative; or
// when MaxDepth is negative or above MaxMaxDepth.
func New(opts Options) (*Weigher, error) {
	useOfflineVocabularies()
	if opts.DefaultMaxOutputTokens < 0 {
		return nil, fmt.Errorf("weigher: default max output tokens %d is negative", opts.DefaultMaxOutputTokens)
	}
	if opts.MaxDepth < 0 || opts.MaxDepth > MaxMaxDepth {
		return nil, fmt.Errorf("weigher: max depth %d is outside 0..%d", opts.MaxDepth, MaxMaxDepth)
	}
	if opts.ExactMaxBytes < 0 {
		return nil, fmt.Errorf("weigher: exact max bytes %d is negative", opts.ExactMaxBytes)
	}
	if opts.CostCeilingMicroUSD < 0 {
		return nil, fmt.Errorf("weigher: cost ceiling %d is negative", opts.CostCeilingMicroUSD)
	}
	if opts.CeilingWindow < 0 {
		return nil, fmt.Errorf("weigher: ceiling window %d is negative", opts.CeilingWindow)
	}
	if opts.CountTimeBudget < 0 {
		return nil, fmt.Errorf("weigher: count time budget %v is negative", opts.CountTimeBudget)
	}
	w := &Weigher{
		exactMax:    opts.ExactMaxBytes,
		timeBudget:  opts.CountTimeBudget,
		now:         opts.Now,
		models:      make(map[string]Model, len(opts.Models)),
		canon:       make(map[string]string, len(opts.Models)),
		defaultOut:  opts.DefaultMaxOutputTokens,
		defaultIn:   cmp.Or(opts.DefaultMaxInputTokens, DefaultMaxInputTokens),
		ceiling:     min(cmp.Or(opts.CeilingWindow, DefaultCeilingWindow), maxTokens),
		costCeiling: cmp.Or(opts.CostCeilingMicroUSD, DefaultCostCeilingMicroUSD),
		maxDepth:    cmp.Or(opts.MaxDepth, DefaultMaxDepth),
		encoders:    make(map[string]counter, 2),
		cache:       cacheOf(opts.CacheBytes),
		chunkShapes: new(chunkShapes),
		names:       new(modelNames),
		rules:       new(chatRulesTable),
	}
	if w.now == nil {
		w.now = time.Now
	}
	need := []string{EncodingO200k, EncodingCL100k}
	names := make([]string, 0, len(opts.Models))
	for name := range opts.Models {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic errors
	for _, name := range names {
		m := opts.Models[name]
		if m.Encoding != "" && !slices.Contains(knownEncodings, m.Encoding) {
			return nil, fmt.Errorf("weigher: model %q: unknown encoding %q (known: %s)",
				name, m.Encoding, strings.Join(knownEncodings, ", "))
		}
		if m.DefaultMaxOutputTokens < 0 {
			return nil, fmt.Errorf("weigher: model %q: default max output tokens %d is negative", name, m.DefaultMaxOutputTokens)
		}
		if !(m.SafetyFactor >= 0) || math.IsInf(m.SafetyFactor, 0) { // !(>=) also rejects NaN
			return nil, fmt.Errorf("weigher: model %q: safety factor %v is not a finite non-negative number", name, m.SafetyFactor)
		}
		if m.Encoding != "" && !slices.Contains(need, m.Encoding) {
			need = append(need, m.Encoding)
		}
		w.models[name] = m
		c := spec.CanonModel(name)
		w.prefixes = append(w.prefixes, configuredName{name: name, prefix: prefixForm(name, c)})
		if prev, seen := w.canon[c]; seen && prev != name {
			w.canon[c] = ""
		} else {
			w.canon[c] = name
		}
	}
	slices.SortStableFunc(w.prefixes, func(a, b configuredName) int {
		return cmp.Or(cmp.Compare(len(b.prefix), len(a.prefix)), cmp.Compare(len(b.name), len(a.name)))
	})
	// The vocabularies load in parallel: each is a few tens of
	// milliseconds of parsing and indexing.
	counters := make([]counter, len(need))
	errs := make([]error, len(need))
	var wg sync.WaitGroup
	for i, enc := range need {
		wg.Go(func() { counters[i], errs[i] = newCounter(enc) })
	}
	wg.Wait()
	for i, enc := range need {
		if errs[i] != nil {
			return nil, fmt.Errorf("weigher: load encoding %q: %w", enc, errs[i])
		}
		w.encoders[enc] = counters[i]
	}
	return w, nil
}

// configuredName is a configured model name and the form in which it
// prefixes model names (prefixForm).
type configuredName struct{ name, prefix string }

// prefixForm is the form in which the configured name (of canonical form
// canon) prefixes model names: canon with the tag as written, so that
// llama3.1:latest still prefixes only names of that tag (its canonical
// form, llama3.1, is the name of the model, not of every llama3.1-…).
func prefixForm(name, canon string) string {
	const latest = ":latest"
	if spec.ModelHasPrefix(name[max(len(name)-len(latest), 0):], latest) && !strings.HasSuffix(canon, latest) {
		return canon + latest
	}
	return canon
}

// configured returns the settings of model: an exact configured name;
// else the one configured name of the same spec.CanonModel form (ASCII
// case aside, and Ollama's default host, namespace and tag: an upstream
// that reads model names case-insensitively, as Ollama does, serves
// `GPT-4o` as gpt-4o, and Ollama serves `llama3.1` as `llama3.1:latest`,
// so each is reserved as that model: its max_input_tokens and output
// defaults, never the smaller global ones); else the configured name
// whose canonical form (its tag as written: prefixForm) is the longest
// to prefix model's, or whose own spelling prefixes model, case aside.
// Two configured names of one canonical form leave the choice to that
// prefix walk (longest prefix form, then longest name, then name order).
func (w *Weigher) configured(model string) (Model, bool) {
	if m, ok := w.models[model]; ok {
		return m, true
	}
	// The canonical form in a buffer of the stack: a name with capitals
	// (`Qwen/Qwen2.5-7B-Instruct`) is looked up on every request, and
	// spec.CanonModel would fold it into a new string each time.
	var buf [128]byte
	c := spec.AppendCanonModel(buf[:0], model)
	if name := w.canon[string(c)]; name != "" {
		return w.models[name], true
	}
	for _, p := range w.prefixes {
		if (len(c) >= len(p.prefix) && string(c[:len(p.prefix)]) == p.prefix) || spec.ModelHasPrefix(model, p.name) {
			return w.models[p.name], true
		}
	}
	return Model{}, false
}

// EncodingFor returns the tiktoken encoding name used to count model's text:
// the configured model's encoding when set, else the family default by name
// prefix (gpt-4o*, gpt-4.1*, gpt-4.5*, gpt-5*, o1*, o3*, o4* → o200k_base;
// gpt-4*, gpt-3.5* → cl100k_base), else [DefaultEncoding] (o200k_base).
func (w *Weigher) EncodingFor(model string) string {
	if m, ok := w.configured(model); ok && m.Encoding != "" {
		return m.Encoding
	}
	return familyEncoding(w.family(model))
}

// FamilyEncoding is the encoding a model's name gives it when its
// configuration sets none (see [Weigher.EncodingFor]). Config aliases take
// it from their target's name.
func FamilyEncoding(model string) string { return familyEncoding(model) }

// familyEncoding is the encoding of model's family by name prefix (the
// name stripped of provider decorations: canonicalModel).
func familyEncoding(model string) string {
	model = canonicalModel(model)
	for _, f := range familyEncodings {
		if strings.HasPrefix(model, f.prefix) {
			return f.encoding
		}
	}
	return DefaultEncoding
}

// fastCounters builds each fast counter (its vocabulary parsed and indexed
// for the merge) once per process and shares it, read-only, between
// weighers: building one takes a fifth of a second, which every config
// reload would otherwise pay.
var fastCounters = map[string]func() (*bpeCounter, error){
	EncodingO200k:  sync.OnceValues(func() (*bpeCounter, error) { return buildBPECounter(EncodingO200k) }),
	EncodingCL100k: sync.OnceValues(func() (*bpeCounter, error) { return buildBPECounter(EncodingCL100k) }),
}

func buildBPECounter(encoding string) (*bpeCounter, error) {
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(encoding + ".tiktoken")
	if err != nil {
		return nil, err
	}
	return newBPECounter(ranks, encoding == EncodingO200k), nil
}

// newCounter returns the counter of one encoding: the fast counter of bpe.go
// for o200k_base and cl100k_base, tiktoken-go for the legacy encodings.
func newCounter(encoding string) (counter, error) {
	if build, ok := fastCounters[encoding]; ok {
		return build()
	}
	t, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		return nil, err
	}
	return tiktokenCounter{t}, nil
}

// safetyFactor is the factor applied to model's locally counted text: the
// configured Model.SafetyFactor when set, else the family default.
func (w *Weigher) safetyFactor(model string) float64 {
	if m, ok := w.configured(model); ok && m.SafetyFactor > 0 {
		return m.SafetyFactor
	}
	return familySafetyFactor(w.family(model))
}

// claudeSafetyFactor is safetyFactor for a Messages request, whose model
// is a Claude model or one served in its stead: a name not recognised as
// Claude's gets the largest Claude factor (claudeFamilyFactor).
func (w *Weigher) claudeSafetyFactor(model string) float64 {
	if m, ok := w.configured(model); ok && m.SafetyFactor > 0 {
		return m.SafetyFactor
	}
	return claudeFamilyFactor(w.family(model))
}

// scaled is n text tokens of model times its safety factor, rounded up.
func (w *Weigher) scaled(model string, n int64) int64 {
	return scaleBy(w.safetyFactor(model), n)
}

// scaleBy is n tokens times f, rounded up (n when f is 1, 0 for n ≤ 0),
// at most maxTokens.
func scaleBy(f float64, n int64) int64 {
	if f == 1 || n <= 0 {
		return max(n, 0)
	}
	return int64(math.Ceil(min(float64(n)*f, maxTokens)))
}

// encoder returns the counter for model (never nil once New succeeded).
func (w *Weigher) encoder(model string) counter {
	if t, ok := w.encoders[w.EncodingFor(model)]; ok {
		return t
	}
	return w.encoders[DefaultEncoding]
}

// defaultOutput is the output reservation, in tokens, of one completion of
// model when the request states no maximum.
// DefaultMaxInputTokens is [Options.DefaultMaxInputTokens]'s default, in
// tokens: the context window of Anthropic's Claude models and of OpenAI's
// o-series (200,000; https://platform.claude.com/docs/en/about-claude/models/overview,
// https://platform.openai.com/docs/models), an assumption for a model whose
// own maximum is not configured.
const DefaultMaxInputTokens = 200_000

// maxInput is the input reserved for model by a request with hidden context.
func (w *Weigher) maxInput(model string) int64 {
	if m, ok := w.configured(model); ok && m.MaxInputTokens > 0 {
		return m.MaxInputTokens
	}
	return w.defaultIn
}

// hidden reserves, for a request whose input the body does not hold, the
// model's largest input (Model.MaxInputTokens, the price table's
// max_input_tokens or the config's, else Options.DefaultMaxInputTokens):
// the upstream adds context llmguard cannot see, and reconciliation gives
// back what it did not use. The body's own estimate stands when it is
// larger: what the body holds is counted, and a request whose tools the
// upstream runs bills its window again on each turn of their loop. A
// document the body names but does not carry (a stored file, a URL) adds
// nothing of its own: the window bounds what one call reads of it. Only
// the entry points (Weigh, WeighAs) apply it; the per-kind methods report
// ServerContext and the body's own content.
func (w *Weigher) hidden(e Estimate) Estimate {
	if e.ServerContext {
		e.InputTokens = max(e.InputTokens, w.maxInput(e.Model))
	}
	// The model is looked up only for an estimate that uses it: each
	// request paid the look-up (some 450 instructions for a name not
	// configured, spec.AppendCanonModel; about 200 for one configured,
	// the Model copied out) though most bodies state their maximum.
	if e.OutputDefaulted {
		if m, ok := w.configured(e.Model); ok {
			e.OutputCeiling = m.MaxOutputTokens
		}
	}
	return e
}

func (w *Weigher) defaultOutput(model string) int64 {
	if m, ok := w.configured(model); ok && m.DefaultMaxOutputTokens > 0 {
		return m.DefaultMaxOutputTokens
	}
	return w.defaultOut
}
