package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Responses estimates an OpenAI /v1/responses request body
// (https://platform.openai.com/docs/api-reference/responses/create).
//
// OpenAI publishes no counting rule for the Responses API, so its input is
// framed as the equivalent chat conversation (see tokensPerMessage):
// "instructions" as a developer message; "input" as one user message when a
// string, else item by item — messages (role + a string or content parts:
// input_text / output_text / refusal text, input_image by the image rules of
// image.go, input_file files as in document.go), function_call and
// custom_tool_call items (tokensPerToolCall + name + arguments / input),
// their *_output items (framing + output), reasoning items (summary and
// reasoning text, plus encrypted_content at one token per
// unknownPartBytesPerToken bytes), other items (hosted tool calls…) at one
// token per unknownPartBytesPerToken bytes of JSON — plus the reply priming,
// the tools by the cookbook's rule (toolsCounter; non-function tools by their
// JSON) and a json_schema text.format by its JSON.
//
// previous_response_id, conversation, a stored "prompt", item_reference
// items and compaction items (opaque state of an earlier compaction) pull
// context the body does not hold: ServerContext is set and InputTokens
// counts only what the body holds.
//
// A value that is an object where a string was expected (a message's
// content as one part, a tool output, call arguments, the input or the
// instructions as one item) is weighed as that part or item, else as its
// JSON text.
//
// A context_management asking for server-side compaction
// (responsesCompaction) whose threshold the estimated input and output
// reach sets ServerContext too: the call may run a second model pass.
//
// OutputTokens is max_output_tokens (reasoning included), or the larger
// of it and a max_tokens, which llama.cpp's Responses route reads when
// max_output_tokens is absent, else the model's default output
// reservation, plus an OpenRouter reasoning.max_tokens budget and raised
// to a llama.cpp n_predict, a min_tokens and, for ignore_eos with no
// maximum, the model's window (outputFloor); times Choices, the largest
// of n, n_cmpl and best_of (at least 1), which llama.cpp's Responses
// route hands on to its chat route. A streamed request sets Stream and
// IncludeUsage (a Responses stream always ends with usage). A body that is
// not a JSON object yields the byte-based estimate of [Weigher.Bytes] with
// Parsed false. Responses never panics and never keeps body.
func (w *Weigher) Responses(body []byte) Estimate { return w.responses(body, nil) }

// responses is [Weigher.Responses] weighed as the model as resolves the body's
// model to (nil: the body's own).
// It resumes from a checkpoint of the body's prefix up to its last input
// item when one holds (resume.go), as chat does.
func (w *Weigher) responses(body []byte, as func(string) string) Estimate {
	if est, ok := w.responsesFrom(body, as, resumeOn); ok {
		return est
	}
	est, _ := w.responsesFrom(body, as, resumeKeep)
	return est
}

// responsesFrom is responses, scanning from a resume point with resumeOn;
// ok is false when the point it resumed from was counted in another
// context.
func (w *Weigher) responsesFrom(body []byte, as func(string) string, mode resumeMode) (Estimate, bool) {
	d, fallback, ok := w.parseRequestFrom(body, responsesFields, mode)
	if !ok {
		return fallback, true
	}
	defer d.close()
	var model, input, instructions, tools, toolChoice, maxOut, maxTok, text, maxCalls, compaction gjson.Result
	var choiceVals choiceFields // counts of completions a chat route reads (chat.go)
	var inputElems, instructionElems elements
	var floor outputFloor      // OpenRouter's reasoning.max_tokens, llama.cpp's n_predict
	var unknownTop unknownTops // top-level members the Responses API does not define (responsesTopKnown)
	inputAt := -1              // the index of "input" among the members, when its key is written plain
	at := 0
	var plugins gjson.Result // OpenRouter's plugins (searchAsk.pluginFees)
	est := Estimate{Parsed: true}
	d.members(func(k string, v gjson.Result, elems elements) bool {
		switch k {
		case "model":
			model = v
		case "input":
			input, inputElems = v, elems
			if d.lay != nil && d.span(d.lay.Members[at].Key) == `"input"` {
				inputAt = at
			}
		case "instructions":
			instructions, instructionElems = v, elems
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "max_output_tokens":
			maxOut = v
			addField(&est.OutputFields, spanOf(elems))
		case "max_tokens":
			// Not the Responses API's, but llama.cpp's Responses route
			// passes every member on to the chat request it makes,
			// where max_tokens is the maximum when max_output_tokens is
			// not given (server_chat_convert_responses_to_chatcmpl).
			maxTok = v
			addField(&est.OutputFields, spanOf(elems))
		case "text":
			text = v
		case "stream":
			est.Stream = lenientTrue(v)
		case "previous_response_id":
			est.ServerContext = est.ServerContext || v.Type == gjson.String && v.Str != ""
		case "conversation", "prompt", "plugins":
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
			if k == "plugins" { // OpenRouter's web search billed per request (searchAsk.pluginFees)
				plugins = v
			}
		case "service_tier":
			est.ServiceTier = serviceTier(v)
		case "background":
			est.Background = v.Type != gjson.Null && v.Type != gjson.False
		case "max_tool_calls":
			maxCalls = v
		case "context_management":
			compaction = v
		case "n", "n_cmpl", "best_of", "min_tokens", "ignore_eos":
			// Not the Responses API's, but llama.cpp's Responses route
			// copies every member into the chat request it runs
			// (server_chat_convert_responses_to_chatcmpl,
			// tools/server/server-chat.cpp: chatcmpl_body =
			// response_body), whose sampling reads n_cmpl (or its
			// alias n) completions and ignore_eos, past the end of
			// sequence. best_of and min_tokens, which other servers'
			// chat routes read (TensorRT-LLM's, vLLM's), are read too:
			// no Responses route is known to pass them on, but one that
			// hands its body to such a chat route would. Reserved as
			// chat reserves them, and weighed by their text as any
			// member the API does not define.
			if !choiceVals.read(k, v) {
				floor.read(k, v)
			}
			unknownTop.note(responsesTopKnown, k, v)
		case "reasoning", "n_predict":
			floor.read(k, v)
		default:
			unknownTop.note(responsesTopKnown, k, v)
		}
		at++
		return true
	})
	est.IncludeUsage = est.Stream
	est.Model = modelNamed(model, as, w.names)
	est.ServerContext = est.ServerContext || onlineModel(est.Model)
	est.SearchContext, est.SearchResults = searchAsk{plugins: plugins}.pluginFees(est.Model)
	encName := w.EncodingFor(est.Model)
	fam := w.family(est.Model) // the name its image rule keys off
	r := responsesCounter{enc: w.encoder(est.Model), model: fam, hidden: &est.ServerContext, audio: &est.Audio}

	r.cache, r.budget, r.memo = w.cache, w.budget, d.memo
	r.ctx = w.cache.context("responses.item", encName, fam, "")
	r.textCtx = w.cache.context("responses.text", encName, fam, "")
	var in int64
	switch {
	case instructions.Type == gjson.String:
		in += tokensPerMessage + countText(r.enc, "developer") + r.text(instructions)
	case instructions.IsArray():
		in += r.items(instructionElems, &est)
	case instructions.IsObject():
		// One item where a list of them was expected: a lenient
		// upstream reads it as that item.
		in += r.item(instructions, &est)
	}
	switch {
	case input.IsObject():
		in += r.item(input, &est) // one item, as instructions above
	case input.Type == gjson.String:
		in += tokensPerMessage + countText(r.enc, "user") + r.text(input)
	case input.IsArray():
		// The items before the resume point, if any, counted before.
		sum, same := d.memo.resumedSum(r.ctx)
		if !same {
			return Estimate{}, false
		}
		hidden, audio := est.ServerContext, est.Audio
		est.ServerContext, est.Audio = false, false
		sum.text += r.items(inputElems, &est)
		sum.hidden = sum.hidden || est.ServerContext
		sum.audio = sum.audio || est.Audio
		est.ServerContext = hidden || sum.hidden
		est.Audio = audio || sum.audio
		in += sum.text
		if inputAt >= 0 {
			var run resumeRun // the items are summed in one call: a point after the last alone
			run.only(len(inputElems.spans), resumeSums{cur: sum, past: sum})
			d.memo.keepResumePoint(d.lay, inputAt, &run, r.ctx, tailKeep{})
		}
	}
	in += tokensReply
	in = unknownTop.add(r.enc, in)
	tc := newToolsCounter(r.enc, encName)
	tctx := w.cache.context("responses.tools", encName, "", "")
	in += d.memo.count(w.budget, tctx, tools.Raw, func() tally { return tally{text: tc.count(tools)} }).text
	est.ServerContext = est.ServerContext || serverTools(tools)
	est.WebSearches = responsesSearchCalls(tools, maxCalls)
	est.ContainerGB = containerGB(tools)
	est.FileSearches = responsesFileSearchCalls(tools, maxCalls)
	est.ImageTokens = imageGenTokens(tools, maxCalls, est.Stream)
	est.WebSearchPreview = est.WebSearches > 0 && previewSearchPriced(tools, w.family(est.Model))
	in += toolChoiceTokens(r.enc, toolChoice)
	if f := text.Get("format"); f.Get("type").String() == "json_schema" {
		in += countText(r.enc, f.Raw)
	}
	est.InputTokens = w.scaled(est.Model, min(in, maxTokens))

	// Both limits given: the larger, as chat reserves.
	mo, okO := tokenCount(maxOut)
	mt, okT := tokenCount(maxTok)
	out, ok := max(mo, mt), okO || okT
	if !ok {
		out = w.defaultOutput(est.Model)
		est.OutputDefaulted = true
	}
	out, est.OutputDefaulted = floor.apply(w, est.Model, out, est.OutputDefaulted)
	est.OutputPinned = floor.pins()
	est.HiddenReasoning = floor.hiddenReasoning(fam)
	est.Choices = min(choiceVals.count(), maxTokens/max(1, min(out, maxTokens)))
	est.OutputTokens = min(out, maxTokens) * est.Choices
	if at, ok := responsesCompaction(compaction); ok && min(est.InputTokens+est.OutputTokens, maxTokens) >= at {
		// Server-side compaction may run: a second model pass whose
		// summary the answer reads, context the body does not show.
		est.ServerContext = true
	}
	return est, true
}

// responsesCounter counts Responses input items in one encoding.
type responsesCounter struct {
	enc   counter
	model string
	// hidden is set when an input's bill is not in the body (an
	// input_file by file_id or file_url, a file fileTokens cannot weigh, a
	// content part of an unknown type): Estimate.ServerContext.
	hidden *bool
	// audio is set when an input sends audio the upstream bills at the
	// model's audio prices (responsesPartAudio): Estimate.Audio.
	audio  *bool
	cache  *countCache // remembers items' counts (nil: off)
	memo   *elemMemo   // the field check's lookups of the items (nil: off)
	budget *budget     // the request's counting budget (nil: none)
	ctx    uint64      // the items' cache context
	// textCtx is the cache context of instructions or input given as a
	// string: the same bytes as an item are weighed otherwise.
	textCtx uint64
}

// text counts a JSON string (instructions or input given as text),
// remembered by the cache.
func (r responsesCounter) text(v gjson.Result) int64 {
	return r.cache.count(r.budget, r.textCtx, v.Raw, func() tally { return tally{text: countText(r.enc, v.Str)} }).text
}

// items counts an array of input items; item_reference items and inputs
// by reference set est.ServerContext. Each item's count is remembered by the
// cache.
func (r responsesCounter) items(list elements, est *Estimate) int64 {
	var n int64
	list.each(func(it gjson.Result) bool {
		t := r.memo.count(r.budget, r.ctx, it.Raw, func() tally {
			var hidden, audio bool
			var e Estimate
			sub := r
			sub.hidden, sub.audio = &hidden, &audio
			n := sub.item(it, &e)
			return tally{text: n, hidden: hidden || e.ServerContext, audio: audio}
		})
		n += t.text
		if t.hidden {
			est.ServerContext = true
		}
		if t.audio {
			est.Audio = true
		}
		return true
	})
	return n
}

// item counts one input item.
func (r responsesCounter) item(it gjson.Result, est *Estimate) int64 {
	if it.Type == gjson.String {
		// Not an item the API defines, but a lenient upstream reads a
		// bare string as a user message: weighed as one.
		return tokensPerMessage + countText(r.enc, "user") + countText(r.enc, it.Str)
	}
	if !it.IsObject() {
		if it.Type == gjson.Null {
			return 0
		}
		// A list or another value, which the API refuses: by its JSON
		// text, as one message, as a lenient upstream may read it.
		return tokensPerMessage + countValue(r.enc, it)
	}
	typ := it.Get("type").String()
	// Members the item's type does not define, which a lenient upstream
	// may write into the prompt (unknownmembers.go); an item weighed
	// whole (a message without content, an item of another type) has
	// none.
	var extra int64
	if (typ != "" && typ != "message") || it.Get("content").Exists() {
		extra = unknownMembers(r.enc, it, func(k string) bool { return responsesItemKnown(typ, k) })
	}
	return min(r.itemOf(typ, it, est)+extra, maxTokens)
}

// itemOf counts one input item it, an object of type typ, by the members
// its type defines.
func (r responsesCounter) itemOf(typ string, it gjson.Result, est *Estimate) int64 {
	switch typ {
	case "", "message":
		content := it.Get("content")
		if !content.Exists() {
			// A message without content (instructions or an input item
			// given as some other object): what it holds, by its JSON
			// text, as a lenient upstream may read it.
			return tokensPerMessage + countValue(r.enc, it)
		}
		// A role or name that is not a string (an object, a number),
		// which the API refuses: by its JSON text (countValue).
		n := int64(tokensPerMessage) + countValue(r.enc, it.Get("role"))
		if name := it.Get("name"); name.Type == gjson.String { // lenient: chat's "name"
			n += countText(r.enc, name.Str) + tokensPerName
		} else {
			n += countValue(r.enc, name)
		}
		return n + r.content(content, 0)
	case "function_call", "custom_tool_call":
		args := it.Get("arguments")
		if typ == "custom_tool_call" {
			args = it.Get("input")
		}
		return tokensPerToolCall + countValue(r.enc, it.Get("name")) + countValue(r.enc, args)
	case "function_call_output", "custom_tool_call_output":
		return tokensPerMessage + r.content(it.Get("output"), 0)
	case "reasoning":
		est.ServerContext = est.ServerContext || storedByID(typ, it)
		var n int64
		for _, k := range []string{"summary", "content"} {
			v := it.Get(k)
			if !v.IsArray() {
				// Not a list (a string, an object), which the API
				// refuses: by its JSON text, as a lenient upstream
				// may read it.
				n += countValue(r.enc, v)
				continue
			}
			v.ForEach(func(_, p gjson.Result) bool {
				if !p.IsObject() {
					n += countValue(r.enc, p) // a bare string or another value
					return true
				}
				n += countValue(r.enc, p.Get("text")) +
					unknownMembers(r.enc, p, func(k string) bool { return k == "type" || k == "text" })
				return true
			})
		}
		enc := it.Get("encrypted_content")
		size := len(stringOf(enc))
		if enc.Type != gjson.String && enc.Type != gjson.Null {
			size = len(enc.Raw) // not the API's shape: its JSON's bytes
		}
		return min(n+ceilDiv(int64(size), unknownPartBytesPerToken), maxTokens)
	case "item_reference":
		est.ServerContext = true
		return 0
	case "compaction":
		// Server-side compaction's output passed back: an opaque,
		// encrypted item that "carries forward key prior state and
		// reasoning into the next run"
		// (https://developers.openai.com/api/docs/guides/compaction).
		// How many tokens it expands to, OpenAI does not say, and its
		// bytes cannot tell (the state may be compressed): hidden
		// context, weighed at least by its bytes as any other item.
		est.ServerContext = true
		return ceilDiv(int64(len(it.Raw)), unknownPartBytesPerToken)
	case "computer_call_output":
		return tokensPerMessage + r.part(it.Get("output"), 0)
	case "image_generation_call":
		est.ServerContext = est.ServerContext || storedByID(typ, it)
		return ceilDiv(int64(len(it.Raw)), unknownPartBytesPerToken)
	default:
		return ceilDiv(int64(len(it.Raw)), unknownPartBytesPerToken)
	}
}

// content counts message content or tool output: a string or an array of
// parts; one object is read as a part when its type is one part knows
// (partTypes), else, as any other value, by its JSON text (countValue),
// as a lenient upstream that takes it writes it out.
func (r responsesCounter) content(c gjson.Result, depth int) int64 {
	if c.IsObject() {
		if _, ok := partTypes[c.Get("type").String()]; ok {
			return r.part(c, depth)
		}
	}
	if !c.IsArray() {
		return countValue(r.enc, c)
	}
	var n int64
	c.ForEach(func(_, p gjson.Result) bool {
		n += r.part(p, depth)
		return true
	})
	return n
}

// partTypes are the content part types part weighs by their members (any
// other is weighed as hidden context). An immutable table.
var partTypes = map[string]struct{}{
	"input_text": {}, "output_text": {}, "text": {}, "summary_text": {}, "reasoning_text": {}, "refusal": {},
	"input_image": {}, "computer_screenshot": {}, "input_file": {},
}

// part counts one content part.
func (r responsesCounter) part(p gjson.Result, depth int) int64 {
	if !p.IsObject() {
		// Lenient: a bare string part by its text, a list or another
		// value, which the API refuses, by its JSON text (countValue).
		return countValue(r.enc, p)
	}
	if depth > maxBlockDepth {
		return 0
	}
	typ := p.Get("type").String()
	if responsesPartAudio(typ, p) {
		*r.audio = true
	}
	// Members the part's type does not define (unknownmembers.go).
	extra := unknownMembers(r.enc, p, func(k string) bool { return responsesPartKnown(typ, k) })
	return min(r.partOf(typ, p)+extra, maxTokens)
}

// partOf counts one content part p, an object of type typ, by the
// members its type defines.
func (r responsesCounter) partOf(typ string, p gjson.Result) int64 {
	switch typ {
	case "input_text", "output_text", "text", "summary_text", "reasoning_text":
		return countValue(r.enc, p.Get("text"))
	case "refusal":
		return countValue(r.enc, p.Get("refusal"))
	case "input_image", "computer_screenshot":
		url := stringOf(p.Get("image_url")) // read once: a data URL holds the whole image
		if n, hidden, ok := imageAsDocument(r.enc, r.model, url); ok {
			*r.hidden = *r.hidden || hidden
			return n
		}
		wd, ht := dataURLSize(url)
		return imageTokens(r.model, p.Get("detail").String(), wd, ht)
	case "input_file":
		name := stringOf(p.Get("filename"))
		n := countText(r.enc, name)
		page := imageTokens(r.model, "high", 0, 0)
		mime, data := splitDataURL(stringOf(p.Get("file_data")))
		if data == "" { // file_id or file_url: the upstream fetches it; the window bounds it (hidden)
			*r.hidden = true
			return n
		}
		m, hidden := fileTokens(r.enc, inlineFile{b64: data, name: name, mime: mime}, page)
		*r.hidden = *r.hidden || hidden
		return n + m
	default:
		// A part type llmguard does not know (input_video, a media URL an
		// OpenAI-compatible upstream fetches): its bill is not in the body.
		*r.hidden = true
		return ceilDiv(int64(len(p.Raw)), unknownPartBytesPerToken)
	}
}

// responsesPartAudio reports whether a Responses content part p, an
// object of type typ, sends audio the upstream bills at the model's audio
// prices, as partSendsAudio reads a chat part: a part whose type names
// audio (an "input_audio" part, which OpenAI-compatible servers that map
// the Responses input onto chat accept), or one holding an "input_audio"
// member; an input_file whose file_data is a data:audio/… URL or whose
// filename or file_url path ends as an audio file does ("talk.mp3",
// audioMedia); an input_image whose image_url is a data:audio/… URL. Such
// a part weighed as text reserved at the text price.
func responsesPartAudio(typ string, p gjson.Result) bool {
	if strings.Contains(strings.ToLower(typ), "audio") || p.Get("input_audio").Exists() {
		return true
	}
	switch typ {
	case "input_file":
		mime, _ := splitDataURL(stringOf(p.Get("file_data")))
		url := stringOf(p.Get("file_url"))
		if i := strings.IndexAny(url, "?#"); i >= 0 {
			url = url[:i]
		}
		return audioMedia(mime, stringOf(p.Get("filename"))) || audioMedia("", url) || dataURLAudio(url)
	case "input_image", "computer_screenshot":
		return dataURLAudio(stringOf(p.Get("image_url")))
	}
	return false
}

// responsesSearchCalls is how many web search calls a Responses request
// with tools may make, each billed on top of the tokens (OpenAI's pricing
// page: web search tool calls per 1,000): none without a web_search tool,
// else its max_tool_calls (the most built-in tool calls the response
// makes, https://platform.openai.com/docs/api-reference/responses/create),
// or defaultWebSearchUses when that is not a positive count.
func responsesSearchCalls(tools, maxCalls gjson.Result) int64 {
	if n, _ := webSearchTools(tools); n == 0 {
		return 0
	}
	n, ok := tokenCount(maxCalls)
	if !ok {
		return defaultWebSearchUses
	}
	return min(n, maxWebSearchUses)
}

// previewSearchPriced reports whether a Responses request's tools hold
// OpenAI's web_search_preview tool (any dated version,
// "web_search_preview_2025_03_11") and family, the request's model
// family, is not a reasoning model (reasoningFamily): OpenAI bills such a
// model's preview searches $25 per 1,000 calls, not $10
// (https://platform.openai.com/docs/pricing, built-in tools). With both
// tools named, which one ran is unknown: the dearer is charged.
func previewSearchPriced(tools gjson.Result, family string) bool {
	preview := false
	eachTool(tools, func(typ, _ string, _ gjson.Result) {
		preview = preview || strings.HasPrefix(typ, "web_search_preview")
	})
	return preview && !reasoningFamily(family)
}

// reasoningFamily reports whether family names one of OpenAI's reasoning
// models, which its pricing page bills web_search_preview calls at $10
// per 1,000: the o-series (o1, o3, o4-mini…) and gpt-5 and later
// ("openai/" and "azure/" prefixes ignored). Any other name is taken for a
// model that does not reason, billed the preview's $25: a name llmguard
// does not know is charged the dearer fee.
func reasoningFamily(family string) bool {
	f := strings.ToLower(family)
	if i := strings.LastIndexByte(f, '/'); i >= 0 {
		f = f[i+1:]
	}
	if len(f) >= 2 && f[0] == 'o' && f[1] >= '1' && f[1] <= '9' {
		return true
	}
	if rest, ok := strings.CutPrefix(f, "gpt-"); ok && len(rest) > 0 && rest[0] >= '5' && rest[0] <= '9' {
		return true
	}
	return false
}
