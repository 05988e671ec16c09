package weigher

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/spec"
)

// ParseChatUsage reads the usage of an OpenAI chat completion JSON response
// (https://platform.openai.com/docs/api-reference/chat/object):
// usage.prompt_tokens (cached tokens included), usage.completion_tokens
// (reasoning tokens included), usage.prompt_tokens_details.cached_tokens and
// usage.completion_tokens_details.reasoning_tokens, and the audio parts of
// input and output (prompt_tokens_details.audio_tokens,
// completion_tokens_details.audio_tokens: gpt-4o-audio-preview, gpt-audio),
// priced at the model's audio rates; the cache writes and the search
// context size a gateway or Perplexity reports (withLeftOut); the
// service tier the answer was served at (its top-level service_tier:
// Usage.ServiceTier); a part
// larger than its figure, or a
// total_tokens above the two, is added to it as an upstream that leaves
// reasoning out of completion_tokens bills it (withLeftOut). ok is false when body has
// no usage object whose prompt_tokens is a positive number and whose
// completion_tokens is a non-negative one (numeric strings accepted: a
// completion_tokens of 0 is a valid usage, an answer stopped at once or
// by a content filter; see [Weigher.ParseUsage] for the text such an
// answer may still carry), or is not valid JSON
// nested at most [DefaultMaxDepth] levels (checked by a flat scan before
// anything parses it); then u is zero and the caller keeps its reservation.
// Missing or negative detail figures (cached, reasoning) read as 0. It never
// panics and never keeps body.
func ParseChatUsage(body []byte) (u Usage, ok bool) { return parseChatUsage(body, 0) }

// parseChatUsage is ParseChatUsage with a nesting limit (0: DefaultMaxDepth).
// An ordinary answer is read in one pass that checks it and notes where
// its usage figures lie (answerScan); one that pass does not decide
// (invalid, odd, hostile) is read by parseChatUsageChecked, with the same
// result (TestChatUsageScanSameAsChecked, FuzzChatUsageScanSameAsChecked).
func parseChatUsage(body []byte, maxDepth int) (Usage, bool) {
	s := newAnswerScan("usage", "", true)
	if s.scan(body, maxDepth) {
		return s.chatUsage(body)
	}
	return parseChatUsageChecked(body, maxDepth)
}

// parseChatUsageChecked is parseChatUsage for any answer: "usage" and
// "service_tier" are found in the layout of the checking pass
// (upstreamMembersChecked) and the usage's members walked as spans
// (usageOf), not found again by gjson's Get and ForEach, which scan from
// the start and parse every number they pass.
func parseChatUsageChecked(body []byte, maxDepth int) (Usage, bool) {
	v, tier, ok := upstreamMembersChecked(body, maxDepth, "usage", "service_tier")
	if !ok {
		return Usage{}, false
	}
	u, ok := usageOf(v)
	if ok {
		u.ServiceTier = servedTier(tier.Raw)
	}
	return u, ok
}

// usageOf reads an OpenAI chat "usage" object, a value (as gjson or
// rawValue gives it) of a document that passed jsonscan's check, in one
// walk (memberWalk): the details objects are walked where they stand
// rather than stepped over and walked again, and only the figures read
// are parsed (rawCount). Its answers are those of the reference that read
// the object with gjson (usageOfGJSON, TestChatUsageSameAsGJSON): each
// figure named twice is taken from its last member, as that walk did
// (Check refuses such answers anyway).
func usageOf(v gjson.Result) (u Usage, ok bool) {
	if !v.IsObject() {
		return Usage{}, false
	}
	// The figures are kept as their text (a value of valid JSON is never
	// empty: "" is none) and made into Results once, at the end: a
	// gjson.Result is nine words, copied each time one is returned.
	var prompt, completion, total, citations, reasoning, searches, write, size string
	var cost, byok, upstream string // OpenRouter's cost, is_byok, cost_details.upstream_inference_cost
	var pd promptDetails
	w := newMemberWalk(v.Raw)
	for {
		k, more := w.key()
		if !more {
			break
		}
		switch k {
		case "prompt_tokens":
			prompt = w.text()
		case "completion_tokens":
			completion = w.text()
		case "total_tokens":
			total = w.text()
		case "citation_tokens":
			citations = w.text()
		case "reasoning_tokens":
			reasoning = w.text()
		case "num_search_queries":
			searches = w.text()
		case "cache_creation_input_tokens":
			write = w.text()
		case "search_context_size":
			size = w.text()
		case "prompt_tokens_details":
			pd = w.promptDetails()
			u.CachedInputTokens, u.AudioInputTokens = pd.cached, pd.audio
		case "completion_tokens_details":
			u.ReasoningTokens, u.AudioOutputTokens = w.details("reasoning_tokens")
		case "cost":
			cost = w.text()
		case "is_byok":
			byok = w.text()
		case "cost_details":
			upstream = w.member("upstream_inference_cost")
		default:
			w.skipTo(skipValue(w.obj, w.at()))
		}
	}
	in, okIn := rawCount(rawOrNone(prompt))
	out, okOut := outputCount(rawOrNone(completion))
	if !okIn || !okOut {
		return Usage{}, false
	}
	u.InputTokens, u.OutputTokens = in, out
	var a apart
	a.total, _ = rawCount(rawOrNone(total))
	a.citations, _ = rawCount(rawOrNone(citations))
	a.reasoning, _ = rawCount(rawOrNone(reasoning))
	a.searches, _ = rawCount(rawOrNone(searches))
	a.cacheWrite, _ = rawCount(rawOrNone(write))
	a.detailWrites(pd)
	a.searchContext = searchContextOf(rawOrNone(size))
	u = withLeftOut(u, a)
	u.BilledMicroUSD = billedMicroUSD(rawOrNone(cost), rawOrNone(upstream), rawOrNone(byok))
	return u, true
}

// maxBilledUSD is the largest cost a usage's cost figures are read as, in
// USD: a figure above it (or not finite) reads as this, which still
// charges far past any limit, without overflowing micro-USD.
const maxBilledUSD = 1e12

// billedMicroUSD is what an OpenRouter usage says the request was billed,
// in micro-USD rounded up (spec.Usage.BilledMicroUSD), from its figures as
// rawValue gives them (the zero Result for none): cost, in credits (1
// credit = 1 USD), the amount "charged to your account"; and
// cost_details.upstream_inference_cost, "the actual cost charged by the
// upstream AI provider"
// (https://openrouter.ai/docs/use-cases/usage-accounting). With is_byok
// true (a request on the caller's own provider key) cost is OpenRouter's
// fee alone and the provider billed the key the upstream cost besides:
// the two are added; otherwise the larger is taken. A figure that is not
// a positive number (or numeric string) counts as 0.
func billedMicroUSD(cost, upstream, byok gjson.Result) int64 {
	c, u := usdFigure(cost), usdFigure(upstream)
	if byok.Type == gjson.True {
		return min(c+u, int64(maxBilledUSD*1e6))
	}
	return max(c, u)
}

// billedFigures are the cost members of an OpenRouter usage object as a
// gjson walk of it meets them (cost, is_byok,
// cost_details.upstream_inference_cost), for billedMicroUSD: the Responses
// and Messages usages carry chat's (responsesUsageOf,
// anthropicUsage.merge; chat's own reader walks raw text).
type billedFigures struct{ cost, byok, upstream gjson.Result }

// note keeps f, the value of member k, when k is one of the cost members,
// and reports whether it was.
func (b *billedFigures) note(k string, f gjson.Result) bool {
	switch k {
	case "cost":
		b.cost = f
	case "is_byok":
		b.byok = f
	case "cost_details":
		b.upstream = gjson.Result{}
		if f.IsObject() {
			b.upstream = f.Get("upstream_inference_cost")
		}
	default:
		return false
	}
	return true
}

// microUSD is what the members noted say was billed (billedMicroUSD).
func (b *billedFigures) microUSD() int64 { return billedMicroUSD(b.cost, b.upstream, b.byok) }

// usdFigure is v, a cost in USD as rawValue gives it, in micro-USD rounded
// up; 0 for none, for anything not a positive number or numeric string,
// and at most maxBilledUSD. The figure is rounded to a pico-dollar first,
// so that a decimal the float cannot hold exactly (0.000123) is not
// rounded up a whole micro-dollar for its last binary digit.
func usdFigure(v gjson.Result) int64 {
	if v.Raw == "" {
		return 0
	}
	var f float64
	switch p := parsed(v); p.Type {
	case gjson.Number:
		f = p.Num
	case gjson.String:
		// Not what OpenRouter writes (a JSON number: its usage-accounting
		// page, and its SDKs' types), read for a gateway that quotes it. A
		// figure out of range reads as the number would (±Inf or 0, so
		// "1e400" is the bound as 1e400 is), as HeaderCostMicroUSD does.
		n, err := strconv.ParseFloat(strings.TrimSpace(p.Str), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0
		}
		f = n
	default:
		return 0
	}
	return usdMicro(f)
}

// usdMicro is f, a cost in USD, in micro-USD rounded up (usdFigure); 0 for
// NaN, zero and negative figures, and at most maxBilledUSD.
func usdMicro(f float64) int64 {
	if !(f > 0) { // NaN, zero, negative
		return 0
	}
	if f > maxBilledUSD {
		f = maxBilledUSD
	}
	return int64(math.Ceil(math.Round(f*1e12) / 1e6))
}

// CostHeader is the response header in which a LiteLLM proxy reports
// what it charged for the request, in USD as a decimal (Python's str of a
// float: "0.000415", "1.5e-05"): "x-litellm-response-cost"
// (https://docs.litellm.ai/docs/proxy/response_headers; its pass-through
// cost contract, https://docs.litellm.ai/docs/proxy/pass_through_cost_tracking,
// calls the figure authoritative). It is the price of the deployment the
// proxy routed to, which tag routing (a request's tags, metadata.tags or
// x-litellm-tags header) may make dearer than the model group's name.
const CostHeader = "x-litellm-response-cost"

// maxCostHeaderBytes is the longest CostHeader value read as a figure:
// Python's repr of a float is at most 24 characters
// ("-2.2250738585072014e-308"), so a longer one is not a cost LiteLLM
// wrote.
const maxCostHeaderBytes = 64

// HeaderCostMicroUSD is v, a CostHeader value, in micro-USD rounded up
// (spec.Usage.BilledMicroUSD): 0 for one that is empty, longer than 64
// bytes, not a decimal number (strconv.ParseFloat's syntax, surrounding
// spaces allowed), NaN, zero or negative; at most maxBilledUSD ($1e12)
// for one above it or infinite. It never keeps v.
func HeaderCostMicroUSD(v []byte) int64 {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || len(v) > maxCostHeaderBytes {
		return 0
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // out of range: ±Inf or 0, bounded below
		return 0
	}
	return usdMicro(f)
}

// promptDetails are the figures of a chat usage's prompt_tokens_details
// llmguard reads, each a positive count (rawCount), 0 when absent or not
// one: cached_tokens and audio_tokens (OpenAI); the cache writes gateways
// report there for an Anthropic model: LiteLLM's cache_creation_tokens and
// its cache_creation_token_details breakdown (ephemeral_5m_input_tokens,
// ephemeral_1h_input_tokens: litellm/types/utils.py,
// PromptTokensDetailsWrapper), and OpenRouter's cache_write_tokens
// (https://openrouter.ai/docs/use-cases/usage-accounting). Each is read
// from the first member of its name, as gjson's Get finds it.
type promptDetails struct {
	cached, audio          int64
	creation, write        int64 // LiteLLM's cache_creation_tokens, OpenRouter's cache_write_tokens
	creation5m, creation1h int64 // LiteLLM's cache_creation_token_details
}

// detailWrites takes the cache writes of a chat usage's
// prompt_tokens_details into a: its writes are the most any of its
// figures says (the top-level cache_creation_input_tokens, LiteLLM's
// cache_creation_tokens, OpenRouter's cache_write_tokens, or the sum of
// LiteLLM's 5-minute and 1-hour breakdown, which were billed whatever
// the total says), the 1-hour ones the breakdown's.
func (a *apart) detailWrites(d promptDetails) {
	a.cacheWrite = max(a.cacheWrite, d.creation, d.write, min(d.creation5m+d.creation1h, maxTokens))
	a.cacheWrite1h = d.creation1h
}

// searchContextOf reads a usage's search_context_size, a value as rawValue
// gives it (the zero Result for none): a string is its size
// (spec.ParseSearchContextSize), anything else none.
func searchContextOf(v gjson.Result) spec.SearchContextSize {
	if v.Type != gjson.String {
		return spec.SearchContextNone
	}
	return spec.ParseSearchContextSize(rawString(v))
}

// promptDetails reads the current value of w, a chat usage's
// prompt_tokens_details, and steps past it (see the type); all 0 when the
// value is not an object. An object is walked member by member, its end
// found by that walk (no second pass over it).
func (w *memberWalk) promptDetails() (pd promptDetails) {
	if w.obj[w.at()] != '{' {
		w.value()
		return promptDetails{}
	}
	var cached, audio, creation, write, breakdown string // as in usageOf: "" is none
	d := newMemberWalk(w.obj[w.at():])
	for {
		k, more := d.key()
		if !more {
			break
		}
		v := d.text()
		switch {
		case k == "cached_tokens" && cached == "":
			cached = v
		case k == "audio_tokens" && audio == "":
			audio = v
		case k == "cache_creation_tokens" && creation == "":
			creation = v
		case k == "cache_write_tokens" && write == "":
			write = v
		case k == "cache_creation_token_details" && breakdown == "":
			breakdown = v
		}
	}
	w.skipTo(w.at() + d.at() + 1) // past its '}'
	pd.cached, _ = rawCount(rawOrNone(cached))
	pd.audio, _ = rawCount(rawOrNone(audio))
	pd.creation, _ = rawCount(rawOrNone(creation))
	pd.write, _ = rawCount(rawOrNone(write))
	if breakdown != "" && breakdown[0] == '{' {
		var m5, h1 string
		b := newMemberWalk(breakdown)
		for {
			k, more := b.key()
			if !more {
				break
			}
			v := b.text()
			switch {
			case k == "ephemeral_5m_input_tokens" && m5 == "":
				m5 = v
			case k == "ephemeral_1h_input_tokens" && h1 == "":
				h1 = v
			}
		}
		pd.creation5m, _ = rawCount(rawOrNone(m5))
		pd.creation1h, _ = rawCount(rawOrNone(h1))
	}
	return pd
}

// reportedPair reads the input and output figures of a usage object (a
// Responses usage; the chat reference reader's too): the input must be a
// positive number (or numeric string; tokenCount), the output a
// non-negative one (outputCount). An output of 0 is a valid usage (an
// answer stopped before its first token, at once or by a content filter),
// read rather than taken as unreadable, which kept the reservation and
// dropped a larger reported input ([Weigher.ParseUsage] floors it at the
// text the answer carries). A usage with either figure missing, null,
// negative or not a number, or an input of 0, is unreadable, and the
// caller keeps the reservation or its local count rather than take it as
// a free call.
func reportedPair(in, out gjson.Result) (input, output int64, ok bool) {
	input, okIn := tokenCount(in)
	output, okOut := outputCount(out)
	if !okIn || !okOut {
		return 0, 0, false
	}
	return input, output, true
}

// outputCount is rawCount of v, a usage's output figure (chat's
// completion_tokens, Responses' and Messages' output_tokens) as rawValue
// or gjson gives it, with a zero figure (0, -0, 0.0, "0") read as 0 tokens
// rather than refused.
func outputCount(v gjson.Result) (int64, bool) {
	if n, ok := rawCount(v); ok {
		return n, true
	}
	p := parsed(v)
	if p.Type == gjson.String {
		f, err := strconv.ParseFloat(strings.TrimSpace(p.Str), 64)
		return 0, err == nil && f == 0
	}
	return 0, p.Type == gjson.Number && p.Num == 0
}

// details reads the current value of w, a usage details object, and steps
// past it: the figure named key and audio_tokens, each the first member of
// its name as gjson's Get finds it (as rawCount reads it: 0 when missing,
// not a number or not positive). Both 0 when the value is not an object.
// An object is walked member by member, its end found by that walk (no
// second pass over it).
func (w *memberWalk) details(key string) (figure, audio int64) {
	if w.obj[w.at()] != '{' {
		w.value()
		return 0, 0
	}
	var f, a string // as in usageOf: "" is none
	d := newMemberWalk(w.obj[w.at():])
	for {
		k, more := d.key()
		if !more {
			break
		}
		v := d.text()
		switch {
		case k == key && f == "":
			f = v
		case k == "audio_tokens" && a == "":
			a = v
		}
	}
	w.skipTo(w.at() + d.at() + 1) // past its '}'
	figure, _ = rawCount(rawOrNone(f))
	audio, _ = rawCount(rawOrNone(a))
	return figure, audio
}

// member reads the current value of w and steps past it: the text of its
// member named key, the first of that name as gjson's Get finds it, when
// the value is an object holding one; "" otherwise. An object is walked
// member by member, its end found by that walk.
func (w *memberWalk) member(key string) string {
	if w.obj[w.at()] != '{' {
		w.value()
		return ""
	}
	var f string
	d := newMemberWalk(w.obj[w.at():])
	for {
		k, more := d.key()
		if !more {
			break
		}
		if v := d.text(); k == key && f == "" {
			f = v
		}
	}
	w.skipTo(w.at() + d.at() + 1) // past its '}'
	return f
}

// rawOrNone is rawValue(v), or the zero Result (none) when v is "".
func rawOrNone(v string) gjson.Result {
	if v == "" {
		return gjson.Result{}
	}
	return rawValue(v)
}

// rawCount is tokenCount(parsed(v)) for v, a value as rawValue gives it
// (the zero Result for none), read without gjson's parser when v is a
// number of 1 to 15 decimal digits (a token figure as every API writes
// it): such a number is below 10^15 (maxTokens), so strconv.ParseFloat,
// which gjson reads numbers with, gives it exactly, and tokenCount takes
// it as it is, refusing 0. Anything else (a sign, a fraction, an exponent,
// more digits, a numeric string) goes through parsed and tokenCount.
func rawCount(v gjson.Result) (int64, bool) {
	if v.Type == gjson.Number && len(v.Raw) <= 15 && len(v.Raw) > 0 {
		n := int64(0)
		for i := 0; i < len(v.Raw); i++ {
			c := v.Raw[i]
			if c < '0' || c > '9' {
				return tokenCount(parsed(v))
			}
			n = n*10 + int64(c-'0')
		}
		return n, n > 0
	}
	return tokenCount(parsed(v))
}

// parsed is v, a value as rawValue gives it, as gjson parses it (a
// string's Str decoded, a number's Num read); the zero Result stays zero.
func parsed(v gjson.Result) gjson.Result {
	if v.Raw == "" {
		return gjson.Result{}
	}
	return gjson.Parse(v.Raw)
}

func usageCount(r gjson.Result) int64 {
	n, _ := tokenCount(r)
	return n
}

// Chunk is what one SSE "data:" payload of a streamed OpenAI chat completion
// (https://platform.openai.com/docs/api-reference/chat-streaming) says. The
// zero value is a payload with nothing of interest.
type Chunk struct {
	// Usage is the chunk's usage, in tokens, when HasUsage.
	Usage Usage
	// HasUsage is true when the chunk carries a usage object whose input and
	// output figures are readable (see usageOf: an output of 0 is, outputCount); an unreadable one is not
	// taken as the stream's final usage.
	HasUsage bool
	// UsageOnly is true for the extra chunk stream_options.include_usage
	// adds: "choices" is an empty array and a usage object is present. The proxy drops
	// it when it asked for usage on the client's behalf.
	UsageOnly bool
	// Text is the streamed output of the chunk, for local counting: every
	// choice's delta.content, delta.refusal and
	// delta.tool_calls[].function.arguments (and legacy
	// delta.function_call.arguments), concatenated. It does not alias data.
	Text string
	// Done is true when the payload is the terminating "[DONE]".
	Done bool
	// Finished are the indexes of the chunk's choices that carry a
	// finish_reason that is not null, in choice order (a repeated index
	// repeats): each such choice has ended (its last chunk,
	// https://platform.openai.com/docs/api-reference/chat-streaming). A
	// choice's index is its "index" member, 0 when it has none (the one
	// choice of an n=1 request); a choice whose index is not a plain
	// integer in [0, [MaxEndedChoices]) ends no choice and is left out.
	// The zero value: no choice ended.
	Finished ChoiceEnds
	// Err is true for an {"error": …} payload.
	Err bool
	// ServiceTier is the service tier the chunk names in its top-level
	// service_tier (OpenAI's chat chunks name it in each chunk), as
	// spec.Usage.ServiceTier holds it: "" when it names none.
	ServiceTier string
	// Uncounted is true when a choice carried something that may be output
	// but is not counted in Text: a text field (content, text, arguments…)
	// holding a non-empty array or object instead of a string, or a delta
	// member other than role, content,
	// refusal, tool_calls, function_call, reasoning_content and reasoning
	// (counted) that holds a non-empty string, array or object — delta.audio
	// (gpt-4o-audio's base64 audio, billed as audio output tokens), or an
	// OpenAI-compatible upstream's own output field; or "choices" sent as
	// a non-empty object instead of an array. See
	// [StreamUpdate.Uncounted].
	Uncounted bool
	// Unread is true for a payload that is not "[DONE]" and not a JSON
	// object llmguard can read: invalid, nested deeper than the limit, or
	// naming a key twice in one object (see [StreamUpdate.Unread]). Nothing
	// else is set then.
	Unread bool
}

var doneMarker = []byte("[DONE]")

// ParseChatChunk reads one SSE data payload (the bytes after "data:") of a
// streamed chat completion. Empty data yields the zero Chunk, garbage one
// with only Unread set; it never panics and never keeps data.
func ParseChatChunk(data []byte) Chunk { return parseOpenAIChunk(data, false, 0) }

// parseOpenAIChunk reads a chat (completions false) or legacy completions
// chunk nested at most maxDepth levels (0: DefaultMaxDepth).
func parseOpenAIChunk(data []byte, completions bool, maxDepth int) Chunk {
	return parseOpenAIChunkRec(data, completions, maxDepth, nil)
}

// parseOpenAIChunkRec is parseOpenAIChunk, noting in rec (when not nil,
// with rec.data the chunk, space trimmed) each string value the walk adds
// to Text, in order, for a chunkSkeleton.
func parseOpenAIChunkRec(data []byte, completions bool, maxDepth int, rec *chunkSkeleton) Chunk {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneMarker) {
		return Chunk{Done: true}
	}
	// One flat check that lays out the top-level members, then a walk over
	// the spans (doc.walk, rawMembers): a chunk arrives per generated token,
	// and gjson's ForEach (which turns every number it passes into a
	// float64) and its Gets (each a scan from the start) cost a third more
	// instructions. A chunk naming a key twice in any object is not read
	// (Unread): gjson would read the first member, an SDK shows the last
	// (TestOpenAIChunkSameAsGJSON and its fuzz test hold the two readers to
	// the same answers on everything else).
	if len(data) == 0 {
		return Chunk{}
	}
	if data[0] != '{' {
		return Chunk{Unread: true}
	}
	lay := layouts.Get().(*jsonscan.Layout)
	defer putLayout(lay)
	if jsonscan.Check(data, jsonscan.Options{MaxDepth: maxDepth, DuplicateKeys: true, Layout: lay}) != nil {
		return Chunk{Unread: true}
	}
	d := doc{root: rawValue(bodyString(data)), body: bodyString(data), lay: lay}
	if lay.Dropped {
		d.lay = nil // the walk finds the members itself
	}
	var c Chunk
	var text textJoiner
	var endsBuf [8]byte
	ends := endsBuf[:0] // c.Finished, built (most chunks end one choice or none)
	emptyChoices, usageObject, hasChoices, foreign := false, false, false, false
	// add counts a text field's value; one that holds output but is not a
	// string (content as an array of parts, as some OpenAI-compatible
	// upstreams stream it) is not counted: Uncounted.
	add := func(v gjson.Result) {
		if v.Type == gjson.String {
			rec.noteText(v.Raw)
			text.addRaw(v)
		} else if mayHoldOutput(v) {
			c.Uncounted = true
		}
	}
	d.walkKeys(true, chunkKey, func(k string, v gjson.Result, elems elements) bool {
		switch k {
		case "error":
			c.Err = v.Type != gjson.Null
		case "service_tier":
			c.ServiceTier = servedTier(v.Raw)
		case "usage":
			c.Usage, c.HasUsage = usageOf(v)
			usageObject = v.IsObject()
		case "delta", "content_block", "message", "content", "text", "output", "item", "part":
			// A member no chat chunk has at its top (an Anthropic
			// content_block_delta or message_start, a Responses event:
			// an upstream answering in another dialect): output counted
			// nowhere, when the chunk has no choices.
			foreign = foreign || mayHoldOutput(v)
		case "choices":
			hasChoices = true
			if !v.IsArray() {
				// A choice sent bare, or choices keyed by index, as an
				// object (not an array): output the walk does not count,
				// read as a JSON answer's (chatAnswerText, through
				// uncountedChunkText) beside a usage
				// (TestAdv40ChoicesObjectTextIsCharged).
				c.Uncounted = c.Uncounted || mayHoldOutput(v)
				break
			}
			count := 0
			elems.each(func(ch gjson.Result) bool {
				count++
				if !ch.IsObject() {
					// A choice sent as a string or an array, not an
					// object: output the walk does not count, read as a
					// JSON answer's (chatAnswerText) beside a usage
					// (review20: '"choices":["…"]' was neither counted
					// nor Uncounted).
					c.Uncounted = c.Uncounted || mayHoldOutput(ch)
					return true
				}
				// A member of the choice that is neither its text
				// nor known metadata (a whole answer's "message", as
				// a non-streamed completion has it): output the walk
				// does not count.
				index, finished := gjson.Result{}, false
				rawMembers(ch.Raw, func(k string, v gjson.Result) bool {
					switch k { // each named once: duplicates were refused
					case "finish_reason":
						finished = v.Type != gjson.Null
					case "index":
						index = v
					}
					if !choiceMember(k, completions) {
						c.Uncounted = c.Uncounted || mayHoldOutput(v)
					}
					return true
				})
				if finished {
					rec.noteFinished(index.Raw)
					if i, ok := choiceIndex(index); ok {
						ends = appendChoiceEnd(ends, i)
					}
				}
				if completions {
					add(rawGet(ch, "text"))
					return true
				}
				d := rawGet(ch, "delta")
				if !d.IsObject() {
					// A delta sent as a string or an array (review20):
					// output the walk does not count, as a choice's
					// unknown member is.
					c.Uncounted = c.Uncounted || mayHoldOutput(d)
					return true
				}
				// Each field (named once: duplicates were refused), in one
				// walk of the delta.
				var content, refusal, calls, call, reasoning, reasoning2 gjson.Result
				rawMembers(d.Raw, func(k string, v gjson.Result) bool {
					var f *gjson.Result
					switch k {
					case "role":
						return true
					case "annotations":
						// url_citation entries of search models point
						// into the content by start and end index
						// (https://platform.openai.com/docs/guides/tools-web-search):
						// the text they cite is the content, counted.
						return true
					case "content":
						f = &content
					case "refusal":
						f = &refusal
					case "tool_calls":
						f = &calls
					case "function_call":
						f = &call
					case "reasoning_content": // DeepSeek, vLLM
						f = &reasoning
					case "reasoning": // OpenRouter, newer vLLM
						f = &reasoning2
					default:
						// Output llmguard cannot count as text (audio,
						// a field it does not know): without a final
						// usage the stream keeps its output reservation.
						c.Uncounted = c.Uncounted || mayHoldOutput(v)
						return true
					}
					if f.Raw == "" {
						*f = v
					}
					return true
				})
				add(content)
				add(refusal)
				add(reasoning)
				if sameString(reasoning, reasoning2) {
					// One text sent under both names (vLLM kept
					// reasoning_content beside reasoning until v0.16,
					// mlx-vlm keeps reasoning as an alias): generated
					// once, counted once, as chatAnswerText counts a
					// JSON answer's. A skeleton would read the second
					// name's next value as bytes to compare, not as
					// text: the chunk builds none (rec.over).
					if rec != nil {
						rec.over = true
					}
				} else {
					add(reasoning2)
				}
				rawEach(calls, func(tc gjson.Result) bool {
					add(rawGet(rawGet(tc, "function"), "arguments"))
					return true
				})
				add(rawGet(call, "arguments"))
				return true
			})
			emptyChoices = count == 0
		}
		return true
	})
	// The chunk include_usage adds is recognised (and dropped when llmguard
	// asked for it) by its shape, whether or not its figures are readable.
	c.UsageOnly = usageObject && emptyChoices
	c.Uncounted = c.Uncounted || (foreign && !hasChoices)
	c.Text = text.String()
	c.Finished = choiceEndsOf(ends)
	return c
}

// choiceMember reports whether k names a member of a streamed choice
// that parseOpenAIChunk reads as output ("delta" of a chat chunk, "text"
// of a completions chunk) or that holds no output: its index, why it
// finished (finish_reason; native_finish_reason, OpenRouter; stop_reason
// and matched_stop, vLLM and SGLang), logprobs (of tokens the text holds)
// and Azure's content_filter_results and content_filter_offsets.
func choiceMember(k string, completions bool) bool {
	switch k {
	case "index", "finish_reason", "logprobs", "native_finish_reason", "stop_reason", "matched_stop",
		"content_filter_results", "content_filter_offsets":
		return true
	case "delta":
		return !completions
	case "text":
		return completions
	}
	return false
}

// sameString reports whether a and b are both JSON strings written alike
// (their raw text, escapes included, equal), as chatAnswerText compares a
// message's reasoning and reasoning_content.
func sameString(a, b gjson.Result) bool {
	return a.Type == gjson.String && b.Type == gjson.String && a.Raw == b.Raw
}

// chunkKey reports whether a chunk's top-level member named k is one
// parseOpenAIChunk reads.
func chunkKey(k string) bool {
	switch k {
	case "error", "usage", "choices", "service_tier",
		"delta", "content_block", "message", "content", "text", "output", "item", "part":
		return true
	}
	return false
}

// mayHoldOutput reports whether v, a value as rawValue gives it, could
// carry generated output: a non-empty string, array or object (null,
// booleans, numbers and empty values cannot).
func mayHoldOutput(v gjson.Result) bool {
	switch v.Type {
	case gjson.String:
		return len(v.Raw) > 2
	case gjson.JSON:
		return len(v.Raw) > 2 && strings.TrimSpace(v.Raw[1:len(v.Raw)-1]) != ""
	}
	return false
}

// textJoiner concatenates JSON string values, allocating only for the
// result (one clone for a single piece, a builder for several).
type textJoiner struct {
	first string
	b     strings.Builder
	n     int
}

func (j *textJoiner) add(r gjson.Result) {
	if r.Type != gjson.String {
		return
	}
	j.addString(r.Str)
}

// addRaw adds the text of v, a value as rawValue gives it, when it is a
// JSON string (rawString).
func (j *textJoiner) addRaw(v gjson.Result) { j.addString(rawString(v)) }

func (j *textJoiner) addString(s string) {
	if s == "" {
		return
	}
	switch j.n {
	case 0:
		j.first = s
	case 1:
		j.b.WriteString(j.first)
		j.b.WriteString(s)
	default:
		j.b.WriteString(s)
	}
	j.n++
}

func (j *textJoiner) String() string {
	switch j.n {
	case 0:
		return ""
	case 1:
		return strings.Clone(j.first)
	default:
		return j.b.String()
	}
}

// MaxEndedChoices bounds the choice indexes a stream tracks the end of
// ([Chunk.Finished], [Stream.Ended]): 1024, eight times OpenAI's largest
// n (128, https://platform.openai.com/docs/api-reference/chat/create). A
// request for more choices ends only at its stream's terminal event.
const MaxEndedChoices = 1024

// ChoiceEnds are the indexes of the choices one chat or completions chunk
// ended ([Chunk.Finished]), each in [0, [MaxEndedChoices]), in choice
// order. Comparable (two lists are equal when they hold the same indexes
// in the same order) and immutable; the zero value holds none. Safe for
// concurrent use.
type ChoiceEnds struct {
	idx string // two bytes per index, little-endian
}

// Len is how many indexes e holds.
func (e ChoiceEnds) Len() int { return len(e.idx) / 2 }

// At is e's i-th index, 0 ≤ i < e.Len().
func (e ChoiceEnds) At(i int) int { return int(e.idx[2*i]) | int(e.idx[2*i+1])<<8 }

// oneEnd holds each index below MaxEndedChoices as a ChoiceEnds holds it
// (two bytes, little-endian), in order: a chunk that ends one choice (the
// most that end any) takes its ChoiceEnds from here, not allocated.
var oneEnd = func() string {
	b := make([]byte, 0, 2*MaxEndedChoices)
	for i := range MaxEndedChoices {
		b = appendChoiceEnd(b, i)
	}
	return string(b)
}()

// choiceEndsOf is the ChoiceEnds of the bytes b (appendChoiceEnd's); one
// index is not allocated.
func choiceEndsOf(b []byte) ChoiceEnds {
	switch len(b) {
	case 0:
		return ChoiceEnds{}
	case 2:
		i := int(b[0]) | int(b[1])<<8
		return ChoiceEnds{oneEnd[2*i : 2*i+2]}
	}
	return ChoiceEnds{string(b)}
}

// appendChoiceEnd appends the index i (< MaxEndedChoices) to a
// ChoiceEnds' bytes.
func appendChoiceEnd(b []byte, i int) []byte { return append(b, byte(i), byte(i>>8)) }

// choiceIndex reads a streamed choice's "index" member: a plain JSON
// integer (digits, no sign, fraction nor exponent, no leading zero) below
// MaxEndedChoices; 0 for a choice without one. ok is false for any other
// value (a string, a float, a negative, a larger number, null).
func choiceIndex(v gjson.Result) (int, bool) {
	if v.Raw == "" {
		return 0, true
	}
	raw := v.Raw
	if raw[0] == '0' && len(raw) > 1 {
		return 0, false
	}
	i := 0
	for j := 0; j < len(raw); j++ {
		if raw[j] < '0' || raw[j] > '9' {
			return 0, false
		}
		if i = i*10 + int(raw[j]-'0'); i >= MaxEndedChoices {
			return 0, false
		}
	}
	return i, true
}

// apart are the figures of an OpenAI-shaped usage object beside its
// input and output ones that may hold tokens those leave out: its
// total_tokens, and Perplexity's citation_tokens, top-level
// reasoning_tokens and num_search_queries. Each is a positive count
// (rawCount), 0 when absent or not one.
type apart struct {
	total, citations, reasoning, searches int64
	// cacheWrite is the prompt's tokens written to the cache: a chat
	// usage's top-level cache_creation_input_tokens, which LiteLLM's proxy
	// reports for an Anthropic model (inside prompt_tokens in its newer
	// versions, left out of it, only cache_read_input_tokens added, in
	// older ones), or the writes its prompt_tokens_details report
	// (detailWrites); a Responses usage's
	// input_tokens_details.cache_write_tokens.
	cacheWrite int64
	// cacheWrite1h is the part of cacheWrite written with the 1-hour TTL
	// (LiteLLM's cache_creation_token_details.ephemeral_1h_input_tokens),
	// priced above the 5-minute writes.
	cacheWrite1h int64
	// searchContext is Perplexity's search_context_size: the size of the
	// per-request search fee its Sonar models bill
	// (https://docs.perplexity.ai/getting-started/pricing, request
	// pricing).
	searchContext spec.SearchContextSize
}

// withLeftOut is u, a usage read from OpenAI-shaped figures (chat,
// completions, Responses), with what its other figures (a) show was
// billed but left out of its input or output figure added to it.
// OpenAI's figures nest: prompt_tokens holds its cached and audio tokens,
// completion_tokens its reasoning and audio tokens, and total_tokens is
// their sum. Upstreams that speak its shape do not all keep that: xAI
// counts reasoning "separately from completion_tokens, but … in the
// total_tokens"
// (https://docs.x.ai/docs/key-information/consumption-and-rate-limits:
// "completion_tokens":40 beside "reasoning_tokens":900 and a total of
// 950 for 10 input), and gateways translating Gemini's usageMetadata leave
// thoughtsTokenCount out of completion_tokens but in total_tokens. So a
// part larger than its whole is read as left out of it and added to it
// (reasoning or audio output to the output, cached or audio input to the
// input), and a total above input plus output has the difference added
// to the output, the dearer figure. Perplexity's deep-research usage
// reports beside a total of prompt and completion its citation_tokens
// (billed at the input price), a top-level reasoning_tokens (billed apart
// from completion_tokens) and num_search_queries (billed per query,
// https://docs.perplexity.ai/getting-started/pricing): they are added to
// the input, the output (and its reasoning part) and the web searches.
// LiteLLM's cache_creation_input_tokens beside a chat usage are the
// usage's cache writes, added to its input when they do not fit in it
// beside the cached reads (a prompt_tokens of 4 beside 20,000 written);
// so are the writes a chat usage's prompt_tokens_details report (LiteLLM's
// cache_creation_tokens, its 1-hour part priced as 1-hour writes;
// OpenRouter's cache_write_tokens) and a Responses usage's
// input_tokens_details.cache_write_tokens, which were priced as plain
// input. Perplexity's search_context_size is the usage's SearchContext
// (the size of its per-request search fee). A
// usage whose figures nest as OpenAI's, with none of Perplexity's, is
// returned as it is. Figures are at most 10^15 (maxTokens), so no sum
// overflows.
func withLeftOut(u Usage, a apart) Usage {
	if u.ReasoningTokens > u.OutputTokens {
		u.OutputTokens += u.ReasoningTokens
	}
	if u.AudioOutputTokens > u.OutputTokens {
		u.OutputTokens += u.AudioOutputTokens
	}
	if u.CachedInputTokens > u.InputTokens {
		u.InputTokens += u.CachedInputTokens
	}
	if u.AudioInputTokens > u.InputTokens {
		u.InputTokens += u.AudioInputTokens
	}
	if a.cacheWrite > 0 {
		// Writes that cannot fit in the prompt beside its cached reads
		// were left out of it; either way they are priced as writes.
		if a.cacheWrite > u.InputTokens-min(u.CachedInputTokens, u.InputTokens) {
			u.InputTokens += a.cacheWrite
		}
		u.CacheWriteTokens = a.cacheWrite
		u.CacheWrite1hTokens = min(a.cacheWrite1h, a.cacheWrite)
	}
	u.SearchContext = a.searchContext
	u.InputTokens += a.citations
	u.OutputTokens += a.reasoning
	u.ReasoningTokens += a.reasoning
	u.WebSearches = max(u.WebSearches, a.searches)
	if a.total > u.InputTokens+u.OutputTokens {
		u.OutputTokens = a.total - u.InputTokens
	}
	return u
}
