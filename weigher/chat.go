package weigher

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// Chat framing from OpenAI's cookbook "How to count tokens with tiktoken",
// section 6 "Counting tokens for chat completions API calls"
// (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken):
// for gpt-3.5-turbo-0125, gpt-4-0613, gpt-4o-2024-08-06 and
// gpt-4o-mini-2024-07-18 each message costs 3 tokens plus the tokens of each
// of its string fields (role, content, name), a name 1 more, and every reply
// is primed with 3 (<|start|>assistant<|message|>). On the cookbook's example
// conversation this equals the API's prompt_tokens: 129 (gpt-3.5-turbo,
// gpt-4), 124 (gpt-4o, gpt-4o-mini).
const (
	tokensPerMessage = 3 // tokens framing each message
	tokensPerName    = 1 // extra tokens for a message's "name"
	tokensReply      = 3 // tokens priming the reply
	// tokensPerToolCall frames each tool call of an assistant message, on
	// top of its name and arguments. OpenAI publishes no figure for this;
	// 3 mirrors the per-message framing.
	tokensPerToolCall = 3
	// unknownPartBytesPerToken prices a content part of a type this package
	// does not weigh (input_audio, and unknown types, which are also
	// hidden context: see partWeight) at one token per 4 bytes of its JSON,
	// a rough figure for data the model does not read as text.
	unknownPartBytesPerToken = 4
	// maxTokens caps any token figure read from a request (1e15 tokens), so
	// products never overflow.
	maxTokens = 1e15
)

// bodyString views b as a string without copying. The string must not
// outlive the call, nor be kept in a result: clone what is kept.
func bodyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Chat estimates an OpenAI /v1/chat/completions request body.
//
// InputTokens follows the cookbook's chat framing (see tokensPerMessage) and
// equals OpenAI's prompt_tokens for plain-text messages; it adds content-part
// text, images by OpenAI's tile/patch rules (see imageTokens), assistant
// tool_calls / function_call (name + arguments or a custom call's input,
// an object counted as its JSON text, + tokensPerToolCall), a content
// given as one object (objectContentTally), tool and
// legacy "functions" definitions by the cookbook's constants (see
// toolsCounter.count), and a json_schema response_format as the tokens of its
// JSON text. OutputTokens is max_completion_tokens, else max_tokens, else the
// model's default output reservation, raised by vLLM's min_tokens and
// ignore_eos, OpenRouter's reasoning.max_tokens, llama.cpp's n_predict,
// TabbyAPI's max_length and KoboldCpp's adapter.max_length (outputFloor) —
// times n (default 1), or llama.cpp's n_cmpl or TensorRT-LLM's best_of
// when larger, since each sequence generated may run to the limit.
//
// A body that is not a JSON object yields the byte-based estimate of
// [Weigher.Bytes] with Parsed false. Chat never panics and never keeps body.
func (w *Weigher) Chat(body []byte) Estimate { return w.chat(body, nil) }

// chat is [Weigher.Chat] weighed as the model as resolves the body's
// model to (nil: the body's own). It resumes from a checkpoint of the
// body's prefix when one holds (resume.go), and weighs the body whole
// when that checkpoint's counts were made for another model.
func (w *Weigher) chat(body []byte, as func(string) string) Estimate {
	if est, ok := w.chatFrom(body, as, resumeOn); ok {
		return est
	}
	est, _ := w.chatFrom(body, as, resumeKeep)
	return est
}

// chatFrom is chat, scanning from a resume point with resumeOn; ok is
// false when the point it resumed from was counted in another context.
// It makes the field check itself (parseOptions.callerChecks, counted):
// the top-level members in the walk that reads them, new messages in the
// walk that counts them; a refusal names the key checkFields names.
func (w *Weigher) chatFrom(body []byte, as func(string) string, mode resumeMode) (Estimate, bool) {
	// The top-level members are field-checked in the walk below that
	// reads them, and new messages in the walk that counts them
	// (messageTally), not by parseRequestWith.
	d, fallback, ok := w.parseRequestWith(body, parseOptions{fields: chatFields, resume: mode, counted: chatMessageFields, countedList: toolFields, callerChecks: true})
	if !ok {
		return fallback, true
	}
	// One deferred call (the piece memo's return, then the doc's close):
	// with two, chatFrom's returns passed the limit of open-coded defers
	// (returns × defers ≤ 15), and every request paid the runtime's
	// deferred-call records, some 250 instructions.
	var pieceBPE *bpeCounter
	var pieceMemo *memoCounter
	defer func() {
		if pieceMemo != nil && d.memo == nil { // else the doc's memo keeps it (piecesOf)
			pieceBPE.putMemo(pieceMemo)
		}
		d.close()
	}()
	var model, messages, tools, functions, maxCompletion, maxTok, responseFormat, prediction, prompt, toolChoice gjson.Result
	var choiceVals choiceFields      // n, n_cmpl, best_of
	var templateText [2]gjson.Result // vLLM's documents and chat_template_kwargs (templateFields)
	var unknownTop unknownTops       // top-level members the chat API does not define (chatTopKnown)
	var adapter gjson.Result         // KoboldCpp's chat adapter (koboldAdapterTokens)
	var search searchAsk             // web_search_options and plugins (searchAsk.fees)
	var floor outputFloor            // vLLM's min_tokens and ignore_eos, OpenRouter's reasoning.max_tokens, llama.cpp's n_predict, TabbyAPI's max_length
	thinks := false                  // a "thinking" member that may turn Claude's extended thinking on (Estimate.HiddenReasoning)
	var messageElems elements
	messagesAt := -1 // the index of "messages" among the members, when its key is written plain
	toolsAt := -1    // the index of "tools" among the members
	at := 0
	est := Estimate{Parsed: true}
	fine := true
	var fold []byte
	fallbackKey, fallbackWhy := "", FaultNone // the first member naming a model outside "model", or a refused extra_body (fallbackMember)
	// With the layout, values are walked raw (rawValue: a number not
	// parsed, a string not decoded), and the members read as numbers or
	// text are made gjson's (decoded) here: a member read for its type or
	// its JSON alone (temperature, messages, tools…) is not parsed, where
	// gjson.Parse of every value cost a warm 1 KiB body about 700
	// instructions, ParseFloat of a temperature nothing reads among them.
	// Without the layout, members come from gjson's ForEach, decoded (and
	// with their offsets, for OutputFields): the reference FuzzChat
	// compares with (sameAsPlain).
	rawWalk := d.lay != nil
	// The members a resumed scan took from its checkpoint, the prefix's
	// and the tail's, passed these checks in the body that filed it, at
	// the same place, byte for byte (vouchedMembers): not checked again.
	prefixEnd, tailFrom := d.vouchedMembers()
	// The members in a loop (topIter), not walk's callback: some 900
	// instructions of a warm 1 KiB body under callgrind.
	it := d.topMembers(rawWalk)
members:
	for it.next() {
		k, v := it.k, it.v
		// checkFields' check of the member, with the request's memo, as
		// parseRequestWith would have made it (the elements raw, as its
		// walk gives them).
		// A tools list remembered whole passed advisorTools before, byte
		// for byte (elements.remembered): not searched again, where the
		// 16 KiB load benchmark's list cost some 4,900 instructions a
		// request, searched a word at a time (TestRememberedToolsSameVerdicts).
		vouched := at < prefixEnd || at >= tailFrom
		if !vouched && (k != "tools" || !it.remembered()) {
			if fallbackKey, fallbackWhy = fallbackMember(k, v); fallbackWhy != FaultNone {
				break members
			}
		}
		if !vouched && !fieldValue(k, v.Type, chatFields) { // a scalar field has nothing to check
			raw := it.elements(v)
			raw.raw = true
			if _, _, fine = checkMember(k, v, raw, chatFields, 0, d.memo, &fold); !fine {
				break members
			}
		}
		if rawWalk {
			switch k {
			case "model", "max_completion_tokens", "max_tokens", "n", "n_cmpl", "best_of", "service_tier", "min_tokens", "n_predict", "max_length", "reasoning_effort":
				v = parsedScalar(v.Raw)
			}
		}
		switch k {
		case "model":
			model = v
		case "messages":
			messages, messageElems = v, it.elements(v)
			if d.lay != nil && d.span(d.lay.Members[at].Key) == `"messages"` {
				messagesAt = at
			}
		case "tools":
			tools, toolsAt = v, at
		case "tool_choice":
			toolChoice = v
		case "functions":
			functions = v
		case "prompt":
			prompt = v
		case "max_completion_tokens":
			maxCompletion = v
			addField(&est.OutputFields, FieldSpan{Start: int(it.at().Start), End: int(it.at().End)})
		case "max_tokens":
			maxTok = v
			est.NamesMaxTokens = true
			addField(&est.OutputFields, FieldSpan{Start: int(it.at().Start), End: int(it.at().End)})
		case "n", "n_cmpl", "best_of":
			choiceVals.read(k, v)
		case "stream":
			est.Stream = lenientTrue(v)
		case "stream_options":
			est.IncludeUsage = lenientTrue(v.Get("include_usage"))
		case "response_format":
			responseFormat = v
		case "web_search_options", "plugins":
			// Search results enter the prompt the upstream bills
			// (OpenRouter's plugins: web search, file parsing), and the
			// search is billed per request (searchAsk.fees).
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
			search.read(k, v)
		case "data_sources", "dataSources":
			// Azure OpenAI "On Your Data" (dataSources: its 2023 preview
			// extensions API): the upstream retrieves documents into the
			// prompt it bills.
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
		case extraBodyField, "google":
			// Gemini's context cache (hidden context) and thinking
			// budget (output beside the maximum: outputFloor).
			est.ServerContext = est.ServerContext || geminiCachedContent(k, v)
			floor.read(k, v)
		case "chat_template":
			// vLLM renders the prompt with a Jinja template the request
			// may carry: its loops and filters make any amount of input
			// from a few bytes, which the upstream bills.
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
		case "documents":
			templateText[0] = v
		case "chat_template_kwargs":
			templateText[1] = v
		case "service_tier":
			est.ServiceTier = serviceTier(v)
		case "prediction":
			prediction = v
		case "min_tokens", "ignore_eos", "reasoning", "n_predict", "max_length", "reasoning_effort":
			floor.read(k, v)
		case "adapter":
			// KoboldCpp's chat adapter: its max_length is the output
			// maximum of a body with neither max_tokens nor
			// max_completion_tokens (outputFloor); its role strings wrap
			// every message (koboldAdapterTokens).
			floor.read(k, v)
			adapter = v
		case "mm_processor_kwargs":
			// vLLM's multimodal processor arguments (the chat API's extra
			// parameters): they set how many tokens each image or video
			// becomes (Qwen2-VL's max_pixels, Phi-3-vision's num_crops)
			// by a rule of the model's own processor, which the image
			// rules here do not know: hidden context.
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
		case "audio", "modalities":
			est.Audio = est.Audio || asksAudio(k, v)
		default:
			if k == "thinking" {
				// Anthropic's extended thinking, which gateways
				// (LiteLLM, OpenRouter) pass to a Claude model from a
				// chat body: Claude 4 streams a summary of it and
				// bills the whole (thinkingAsks). Weighed by its text
				// as any member the chat API does not define.
				thinks = thinkingAsks(v)
			}
			unknownTop.note(chatTopKnown, k, v)
		}
		at++
	}
	if fallbackKey == "" && !fine {
		// A model named outside "model" after the member that failed
		// refuses the body first, as the walk for them did before the
		// field check.
		fallbackKey, fallbackWhy = fallbackModelsKey(d)
	}
	if fallbackKey != "" {
		return w.fallbackFault(body, fallbackKey, fallbackWhy), true
	}
	if !fine {
		// The reference check names the key, in body order (the messages
		// left to the counter included).
		key, field, _ := checkFields(d, chatFields, nil)
		return w.caseVariant(body, key, field), true
	}
	est.Model = modelNamed(model, as, w.names)
	est.ServerContext = est.ServerContext || onlineModel(est.Model)
	rules := w.chatRules(est.Model)
	if search.asked() {
		est.SearchContext, est.SearchResults = search.fees(est.Model)
	} else {
		// Without web_search_options and plugins the fees are the
		// model's alone, found with its rules (chatRules.search).
		est.SearchContext, est.SearchResults = rules.search, rules.searchResults
	}
	if !rules.openAI {
		// OpenAI caches prompts itself and charges no more for a write
		// (writes are free: https://developers.openai.com/api/docs/guides/prompt-caching):
		// its models skip the search, some 2,600 instructions of a 1 KiB body.
		est.CacheWrite, est.CacheWrite1h = asksCache(d.body)
	}
	encName, enc := rules.encoding, rules.counter(w)
	if b, ok := enc.(*bpeCounter); ok {
		// One piece memo for the request's texts (memoCounter), the
		// doc's memo's, or given back by the deferred call above.
		pieceBPE, pieceMemo = b, d.memo.piecesOf(b)
		enc = pieceMemo
	}

	var in int64
	var run resumeRun // the messages' tallies, for keepResumePoint
	var msgCtx uint64 // their count context
	keep := false
	if messages.IsArray() {
		fam, ctx := rules.family, rules.msgCtx // the family: the name its image rule keys off
		// The messages before the resume point, if any, counted before.
		before, same := d.memo.resumedSums(ctx)
		if !same {
			return Estimate{}, false
		}
		run.sums = before // startRun(before), in place: run is still zero
		// Messages are read raw (rawValue): an object's Result is the
		// same either way, and gjson.Parse's is not needed for the rest.
		messageElems.raw = true
		if messageElems.laid {
			// The messages where the scan found them, in a loop over
			// their spans (elements.eachAt's, without its closure call
			// for each, and each message's members found by a cursor
			// that goes forward: fieldsFrom): some 600 instructions of
			// a warm 1 KiB chat body under callgrind.
			fieldsAt := 0 // the first of the layout's Fields past the messages walked
			for _, sp := range messageElems.spans {
				m := rawValue(d.body[sp.Start:sp.End])
				var laid laidMembers
				laid, fieldsAt = d.fieldsFrom(sp, fieldsAt)
				t, ok := d.memo.countChecked(w.budget, ctx, m.Raw, func(check bool) (tally, bool) {
					return messageTallyIn(enc, fam, m, check, laid)
				})
				fine = fine && ok
				run.add(t, t, false)
			}
		} else {
			messageElems.eachAt(func(m gjson.Result, at jsonscan.Span) bool {
				t, ok := d.memo.countChecked(w.budget, ctx, m.Raw, func(check bool) (tally, bool) {
					// A new message's members as the scan found them: one
					// pass over it, not a second to find its keys and values.
					return messageTallyIn(enc, fam, m, check, d.fieldsOf(at))
				})
				fine = fine && ok
				run.add(t, t, false)
				return true
			})
		}
		if !fine || d.memo.unchecked() {
			// A new message failed its check (or one was left unchecked):
			// the reference check names the key, in body order.
			if key, field, ok := checkFields(d, chatFields, nil); !ok {
				return w.caseVariant(body, key, field), true
			}
		}
		sum := run.sums.cur
		in += sum.text
		est.ServerContext = est.ServerContext || sum.hidden
		est.Audio = est.Audio || sum.audio
		keep, msgCtx = messagesAt >= 0 && (w.budget == nil || !w.budget.over), ctx
	}
	if !messages.IsArray() && messages.Raw != "" && messages.Type != gjson.Null {
		// Not a list (one message as an object, a bare string): OpenAI
		// refuses it, a lenient upstream may read it as the
		// conversation. Weighed by its JSON text, as one message.
		in += tokensPerMessage + countValue(enc, messages)
	}
	if t, hidden := chatPromptTokens(enc, prompt); t > 0 || hidden {
		in += t
		est.ServerContext = est.ServerContext || hidden
	}
	if d.memo.unchecked() {
		// No element is left to the counter but messages' (countChecked
		// above): a guard, should another ever be.
		if key, field, ok := checkFields(d, chatFields, nil); !ok {
			return w.caseVariant(body, key, field), true
		}
	}
	in += tokensReply
	in += templateTokens(enc, templateText[:])
	in = unknownTop.add(enc, in)
	if adapter.Exists() {
		in = min(in+koboldAdapterTokens(enc, adapter, messages), maxTokens)
	}
	tc := newToolsCounter(enc, encName)
	tctx := rules.toolsCtx
	// OpenAI's chat takes function and custom tools only, but
	// OpenAI-compatible upstreams run tools of their own (Groq's
	// browser_search and code_interpreter): their results enter the
	// context billed. Whether a list holds one (serverTools) is kept with
	// its count, as hidden, so that a list remembered whole is not walked
	// again on every request; it is found for both lists alike (the count
	// depends on the list's bytes alone) and taken from tools only.
	// A "tools" list of the tail the scan vouched for counts what it
	// counted in the body that filed it (tailTools), without the hash
	// and lookup of its bytes (some 1,000 instructions of a warm 1 KiB
	// body's 574-byte list).
	tail := tailKeep{on: true, ctx: tctx}
	for i, list := range [...]gjson.Result{tools, functions} {
		if i == 0 && toolsAt >= tailFrom {
			if t, ok := d.memo.tailTools(tctx); ok {
				in += t.text
				est.ServerContext = est.ServerContext || t.hidden
				tail.tools, tail.toolsSet = t, true
				continue
			}
		}
		var t tally
		listFine := true
		if i == 0 {
			// A new "tools" list is field-checked in the walk that
			// counts it (parseOptions.countedList).
			// Its server-tool verdict is found in the same walk.
			t, listFine = d.memo.countChecked(w.budget, tctx, list.Raw, func(check bool) (tally, bool) {
				if check {
					n, hidden, ok := tc.countCheckedServer(list, toolFields)
					return tally{text: n, hidden: hidden}, ok
				}
				n, hidden := tc.countServer(list)
				return tally{text: n, hidden: hidden}, true
			})
		} else { // "functions", checked in the walk above
			t = d.memo.count(w.budget, tctx, list.Raw, func() tally {
				return tally{text: tc.count(list), hidden: serverTools(list)}
			})
		}
		if !listFine {
			// Refused as the walk above refuses a member that fails its
			// check: a model named outside "model" first, then the
			// reference check names the key, in body order.
			if k, why := fallbackModelsKey(d); k != "" {
				return w.fallbackFault(body, k, why), true
			}
			key, field, _ := checkFields(d, chatFields, nil)
			return w.caseVariant(body, key, field), true
		}
		in += t.text
		est.ServerContext = est.ServerContext || i == 0 && t.hidden
		if i == 0 && toolsAt > messagesAt && messagesAt >= 0 {
			tail.tools, tail.toolsSet = t, true // a member of the tail
		}
	}
	if keep {
		d.memo.keepResumePoint(d.lay, messagesAt, &run, msgCtx, tail)
	}
	in += toolChoiceTokens(enc, toolChoice)
	// A body without response_format (most) skips gjson's Get, which
	// parsed its path even on the absent member (about 150 instructions).
	if responseFormat.Exists() {
		if !responseFormat.IsObject() {
			in += countValue(enc, responseFormat) // not the API's shape: by its JSON text
		} else if js := responseFormat.Get("json_schema"); js.Exists() {
			in += countText(enc, js.Raw)
		}
	}
	// A model whose tokenizer is not public (Claude behind an
	// OpenAI-compatible gateway, a configured safety_factor) is scaled as
	// on every other kind; OpenAI's families have the factor 1.
	est.InputTokens = scaleBy(rules.factor, in)

	// Both limits given: reserve the larger, since upstreams differ in
	// which one wins (and one treats 0 as unset).
	mc, okC := tokenCount(maxCompletion)
	mt, okT := tokenCount(maxTok)
	out := max(mc, mt)
	if okC && !okT {
		est.MaxCompletionOnly = mc
	}
	if !okC && !okT {
		out = rules.defaultOut // w.defaultOutput(est.Model), held with the rules
		est.OutputDefaulted = true
	}
	// A Gemini model's reasoning_effort: a thinking budget. The family is
	// the one the rules hold (w.family of the same name): found again, it
	// cost each body a configured look-up, some 450 instructions of a warm
	// 1 KiB body for a name not configured (spec.AppendCanonModel).
	floor.gemini(rules.family)
	// The family's own default is held with the rules
	// (chatRules.hiddenReasoning: floor.hiddenReasoning's name stripping,
	// some 990 instructions of a warm 1 KiB body, found once a name).
	est.HiddenReasoning = floor.asksReasoning() || rules.hiddenReasoning || thinks
	out, est.OutputDefaulted = floor.apply(w, est.Model, out, est.OutputDefaulted)
	est.OutputPinned = floor.pins()
	choices := choiceVals.count()
	est.Choices = min(choices, maxTokens/max(1, min(out, maxTokens)))
	est.OutputTokens = min(out, maxTokens) * est.Choices
	if p := predictionTokens(enc, prediction); p > 0 {
		// Predicted Outputs: the rejected part of the prediction is
		// billed as output on top of what each choice writes.
		est.PredictionTokens = min(p, maxTokens/est.Choices) * est.Choices
		est.OutputTokens = min(est.OutputTokens+est.PredictionTokens, 2*maxTokens)
		est.OutputDefaulted = false // a learned reservation would drop it
	}
	return est, true
}

// templateTokens counts the members of a chat (or embeddings) body that
// vLLM hands its chat template to render into the prompt it bills
// (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html,
// the chat API's extra parameters): "documents", a list of objects a RAG
// template writes out, and "chat_template_kwargs", variables any template
// may write out (tools, documents, a system text). Each is counted as the
// text of its JSON, an upper bound of the values a template writes once;
// absent or null, 0. Saturates at maxTokens.
func templateTokens(enc counter, members []gjson.Result) int64 {
	var n int64
	for _, v := range members {
		if v.Exists() && v.Type != gjson.Null {
			n = min(n+countText(enc, v.Raw), maxTokens)
		}
	}
	return n
}

// predictionTokens counts a chat request's Predicted Outputs "prediction"
// ({"type":"content","content": a string or text parts};
// https://platform.openai.com/docs/guides/predicted-outputs): its
// rejected tokens are billed as completion tokens ("still counted in the
// total completion tokens for purposes of billing", the API reference's
// completion_tokens_details), at most all of it. A member the API does
// not define, of the prediction or of a text part, and a "type" longer
// than any the API takes, are counted as unknownMember weighs them (a
// lenient upstream that writes the prediction out bills them); a part
// that is not an object, or whose text is not a string, as the text of
// its JSON, and so is a value of another shape; null or absent, 0.
// Saturates at maxTokens.
func predictionTokens(enc counter, v gjson.Result) int64 {
	if !v.Exists() || v.Type == gjson.Null {
		return 0
	}
	c := v.Get("content")
	if !v.IsObject() || (c.Type != gjson.String && !c.IsArray()) {
		return countText(enc, v.Raw)
	}
	var n int64
	rawMembers(v.Raw, func(k string, m gjson.Result) bool {
		switch k {
		case "content":
			if m.Type == gjson.String {
				n += countRaw(enc, m) // m is raw: its Str is not decoded
				break
			}
			rawElements(m.Raw, func(p gjson.Result) bool {
				if t := p.Get("text"); p.IsObject() && t.Type == gjson.String {
					n += countText(enc, t.String()) +
						unknownMembers(enc, p, func(k string) bool { return k == "type" || k == "text" })
				} else {
					n += countText(enc, p.Raw)
				}
				return true
			})
		case "type":
			n += definedMember(enc, k, m)
		default:
			n += unknownMember(enc, k, m)
		}
		n = min(n, maxTokens)
		return true
	})
	return n
}

// choiceFields are the members that set how many completions a body
// asks for: "n" (OpenAI's), "n_cmpl" (llama.cpp's, which its server reads
// before "n": make_llama_cmpl_schema, "n" its fallback alias) and
// "best_of" (the sequences vLLM's completions and TensorRT-LLM's chat
// generate to return n: ChatCompletionRequest's sampling parameters,
// tensorrt_llm/serve/openai_protocol.py), by index in that order.
type choiceFields [3]gjson.Result

// read keeps v when k is one of the choice fields, and reports whether it
// was.
func (c *choiceFields) read(k string, v gjson.Result) bool {
	switch k {
	case "n":
		c[0] = v
	case "n_cmpl":
		c[1] = v
	case "best_of":
		c[2] = v
	default:
		return false
	}
	return true
}

// count is how many completions the body asks for: the largest of the
// fields, each read as tokenCount reads a count, at least 1.
func (c *choiceFields) count() int64 {
	n := int64(1)
	for _, v := range c {
		if k, ok := tokenCount(v); ok && k > n {
			n = k
		}
	}
	return n
}

// tokenCount reads a non-negative token count, capped at maxTokens.
//
// A numeric string ("100") counts as its number: lenient upstreams
// (pydantic-based OpenAI-compatible servers) coerce it, so ignoring it would
// let a caller reserve nothing for an answer the upstream does produce.
// So does a string Python's int() or float() reads and Go's ParseFloat
// does not as it stands: digits of another script ("１００００",
// fullwidth; numericText). A string past float64's range ("1e400") reads
// as its infinity, so at maxTokens, as the JSON number 1e400 does.
func tokenCount(r gjson.Result) (int64, bool) {
	if r.Type == gjson.String {
		s := strings.TrimSpace(r.Str)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			var ok bool
			if s, ok = numericText(s); !ok {
				return 0, false
			}
			if f, err = strconv.ParseFloat(s, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
				return 0, false
			}
		}
		r = gjson.Result{Type: gjson.Number, Num: f}
	}
	if r.Type != gjson.Number || !(r.Num > 0) { // !(>) also rejects NaN
		// 0 (or -0) reads as no cap: gateways that drop zero fields, or
		// read 0 as "unset", forward it uncapped.
		return 0, false
	}
	if r.Num >= maxTokens {
		return maxTokens, true
	}
	return int64(math.Ceil(r.Num)), true
}

// messageTokens counts one chat message: framing, role, content (a string or
// an array of parts), name, tool calls and refusal, as the tally's text; its
// hidden is set when the message holds a part whose bill the body does not
// show (a stored file, an unweighable file, an unknown part: see partWeight). One walk of the message's
// members does both.
func messageTokens(enc counter, model string, m gjson.Result) tally {
	t, _ := messageTally(enc, model, m, false)
	return t
}

// messageTally is messageTokens that, when check, also field-checks the
// message m (an object of a top-level "messages" array) in the same walk
// of its members: ok is what checkFieldsAt(m, chatMessageFields, 2, nil)
// says (each member goes through checkMember as there, in order), and the
// count is the whole message's either way. A new message is so walked
// once where the field check and the count walked it apart
// (TestMessageTallySameAsSeparatePasses, FuzzMessageTallySameAsSeparatePasses).
func messageTally(enc counter, model string, m gjson.Result, check bool) (t tally, ok bool) {
	return messageTallyIn(enc, model, m, check, laidMembers{})
}

// messageTallyIn is messageTally walking m's members as laid gives them:
// as the strict scan recorded them when it holds them (it must then be
// m's own: doc.fieldsOf of m's span), else as rawMembers finds them. The
// tally and ok are messageTally's either way (FuzzChatFieldsSameAsRawWalk,
// TestMessageTallyInSameAsRaw).
func messageTallyIn(enc counter, model string, m gjson.Result, check bool, laid laidMembers) (t tally, ok bool) {
	if !m.IsObject() {
		// checkElements checks objects only. A message that is not one (a
		// bare string, a list, a number): OpenAI refuses it, a lenient
		// upstream may read it as a message's text. Weighed by its JSON
		// text (countValue), as one message; null as nothing.
		if m.Type == gjson.Null {
			return tally{}, true
		}
		return tally{text: tokensPerMessage + countValue(enc, m)}, true
	}
	n := int64(tokensPerMessage)
	hidden, audio := false, false
	ok = true
	var fold []byte
	laid.each(m.Raw, func(k string, v gjson.Result) bool {
		// The parts of a content array and the calls of a tool_calls
		// array are checked in the walks that count them (as
		// checkElements checks them: each object, its members in order),
		// the rest by checkMember.
		nested := v.IsArray() && (k == "content" || k == "tool_calls")
		if check && ok && !nested {
			if !fieldValue(k, v.Type, chatMessageFields) {
				_, _, ok = checkMember(k, v, elements{v: v, raw: true}, chatMessageFields, 2, nil, &fold)
			}
		}
		switch k {
		case "role":
			// A known role's count is the counter's (roleTokens); another
			// string by its text, another value (an object, a number),
			// which the API refuses, by its JSON text, as a lenient
			// upstream writes it out.
			n += roleTokens(enc, v)
		case "refusal":
			n += countValue(enc, v)
		case "name":
			n += countValue(enc, v) + tokensPerName
		case "content":
			switch {
			case v.IsArray():
				rawElements(v.Raw, func(p gjson.Result) bool {
					t, pok := partTally(enc, model, p, check && ok, &fold)
					ok = ok && pok
					n += t.text
					hidden = hidden || t.hidden
					audio = audio || t.audio
					return true
				})
			case v.IsObject():
				// A single part where an array of them was expected: a
				// lenient upstream reads it as the one part it is
				// (checkMember above has checked its members).
				t := objectContentTally(enc, model, v)
				n += t.text
				hidden = hidden || t.hidden
				audio = audio || t.audio
			default:
				// A string by its text; another value (a number of
				// any length), by its JSON text.
				n += countValue(enc, v)
			}
		case "tool_calls":
			if v.IsArray() {
				// One pass over the calls (chatcalls.go).
				t, cok := callsArrayTally(enc, v.Raw, check && ok, &fold)
				ok = ok && cok
				n += t
			} else {
				// Not a list (one call as an object, a string): the API
				// refuses it, a lenient upstream may read it. Weighed by
				// its JSON text (null: nothing).
				n += countValue(enc, v)
			}
		case "function_call":
			t, _ := callTally(enc, v, false, nil)
			n += t
		case "reasoning", "reasoning_content", "reasoning_details":
			n += reasoningTokens(enc, v, 0)
		case "audio":
			// An assistant message's earlier audio answer, by id
			// ({"audio": {"id": "audio_…"}}): the upstream reads that
			// audio back as input, at audio prices, and the body does not
			// hold it.
			if v.Type != gjson.Null {
				hidden, audio = true, true
			}
		default:
			// A member no API defines (a lenient upstream may write it
			// into the prompt), or a tool_call_id past any the API
			// takes: unknownmembers.go.
			n += memberTokens(enc, k, v, chatMessageKnown(k))
		}
		return true
	})
	return tally{text: min(n, maxTokens), hidden: hidden, audio: audio}, ok
}

// callsTally counts the call c, an element of a message's tool_calls (a
// value as rawValue gives it): its "function"'s callTally, 0 when c is
// not an object. When check it also field-checks c as checkElements
// checks an element of a tool_calls array (checkMember with
// chatToolCallFields at depth 4, a function object's members with
// callFields at depth 5, in order): ok false when that fails.
func callsTally(enc counter, c gjson.Result, check bool, fold *[]byte) (n int64, ok bool) {
	ok = true
	if !c.IsObject() {
		// checkElements checks objects only. Not a call (a string, a
		// list): the API refuses it, a lenient upstream may read it.
		// Weighed by its JSON text.
		return countValue(enc, c), true
	}
	rawMembers(c.Raw, func(k string, v gjson.Result) bool {
		if (k == "function" || k == "custom") && !v.IsObject() {
			n += countValue(enc, v) // not the API's shape: by its JSON text
		}
		if (k == "function" || k == "custom") && v.IsObject() {
			// A function call's name and arguments, or a custom tool
			// call's name and input (custom tools, whose calls carry free
			// text: https://platform.openai.com/docs/guides/function-calling#custom-tools).
			t, fok := callTallyOf(enc, v, callKinds[k], check && ok, fold)
			n += t
			ok = ok && fok
			return true
		}
		if check && ok {
			if !fieldValue(k, v.Type, chatToolCallFields) {
				_, _, ok = checkMember(k, v, elements{v: v, raw: true}, chatToolCallFields, 4, nil, fold)
			}
		}
		n += memberTokens(enc, k, v, chatToolCallKnown(k)) // unknownmembers.go
		return true
	})
	return n, ok
}

// callTally counts one tool or function call, fn, a value as rawValue
// gives it: {"name", "arguments"}, their text and tokensPerToolCall; 0
// when fn is not an object. Its members are found in one raw walk, where
// gjson's Get scanned the object once for each. When check it also
// field-checks fn's members as checkFieldsAt(fn, callFields, …) does
// (checkMember, in order): ok false when that fails.
func callTally(enc counter, fn gjson.Result, check bool, fold *[]byte) (n int64, ok bool) {
	return callTallyOf(enc, fn, callKinds["function"], check, fold)
}

// callKind is where one kind of chat tool call holds its text: the
// member of its arguments (the name is "name" in every kind) and the
// fields its members are checked with.
type callKind struct {
	args   string
	fields *fields
}

// callKinds are the tool call kinds of a chat message's tool_calls, by
// the member that holds the call: a function call's "function"
// ({"name", "arguments"}) and a custom tool call's "custom" ({"name",
// "input"}). An immutable table.
var callKinds = map[string]callKind{
	"function": {args: "arguments", fields: callFields},
	"custom":   {args: "input", fields: customCallFields},
}

// callTallyOf is callTally for a call of kind ck: its name and its
// arguments (ck.args), each a string counted as its text or any other
// value counted as its JSON text (countValue: a lenient upstream takes
// arguments given as an object and writes them out), and
// tokensPerToolCall; the members checked with ck.fields when check.
func callTallyOf(enc counter, fn gjson.Result, ck callKind, check bool, fold *[]byte) (n int64, ok bool) {
	if !fn.IsObject() {
		// Not the API's shape (a function_call given as a string): by
		// its JSON text, as a lenient upstream may read it.
		return countValue(enc, fn), true
	}
	ok = true
	var name, args gjson.Result
	var extra int64 // members it does not know (unknownmembers.go)
	rawMembers(fn.Raw, func(k string, v gjson.Result) bool {
		if check && ok {
			if !fieldValue(k, v.Type, ck.fields) {
				_, _, ok = checkMember(k, v, elements{v: v, raw: true}, ck.fields, 5, nil, fold)
			}
		}
		switch k {
		case "name":
			name = v
		case ck.args:
			args = v
		default:
			extra += unknownMember(enc, k, v)
		}
		return true
	})
	return tokensPerToolCall + countValue(enc, name) + countValue(enc, args) + extra, ok
}

// chatPromptTokens weighs a chat body's top-level "prompt", which
// OpenRouter's chat endpoint takes in place of "messages" ("Either
// "messages" or "prompt" is required",
// https://openrouter.ai/docs/api/reference/overview) and bills as a user
// message: a string as one (framing, role and text), an array as a
// completions prompt (promptTokens: strings by their text, token arrays
// by their length) or by its JSON text, whichever is more, as hidden
// context when one of its objects carries llama.cpp's multimodal_data
// (promptTally); any other
// value by its JSON text, an object also as hidden context (a stored
// prompt named by id, as the Responses API's "prompt" is). An absent or
// null prompt weighs nothing.
func chatPromptTokens(enc counter, p gjson.Result) (tokens int64, hidden bool) {
	switch {
	case p.Raw == "" || p.Type == gjson.Null:
		return 0, false
	case p.Type == gjson.String:
		return tokensPerMessage + countText(enc, "user") + countValue(enc, p), false
	case p.IsArray():
		t, _, media := promptTally(enc, p)
		return tokensPerMessage + countText(enc, "user") + max(t, countValue(enc, p)), media
	}
	return countValue(enc, p), p.IsObject()
}

// countValue counts v, a member an upstream writes into the prompt as
// text: a string by its text, null or an absent member as 0, and any
// other value (an object, an array, a number) by its JSON text, as a
// lenient upstream that takes it writes it out.
func countValue(enc counter, v gjson.Result) int64 {
	switch {
	case v.Type == gjson.String:
		return countRaw(enc, v)
	case v.Type == gjson.Null, v.Raw == "":
		return 0
	}
	return countText(enc, v.Raw)
}

// objectContentTally weighs a chat message's content given as one
// object instead of a string or an array of parts: as the part it is
// when its "type" is one partTally knows (text, refusal, image_url, file,
// input_audio), else as its JSON text, which a lenient upstream writes
// into the prompt — and, when it names a type, as hidden context as that
// part in an array is (partWeight), and as audio when it sends audio
// (partSendsAudio): a "video_url" or "audio_url" object an upstream reads
// as its one part fetches media the body does not hold (weighed as its
// JSON text alone, some 25 tokens).
func objectContentTally(enc counter, model string, v gjson.Result) tally {
	typ := v.Get("type")
	switch typ.String() {
	case "text", "refusal", "image_url", "file", "input_audio":
		t, _ := partTally(enc, model, v, false, nil)
		return t
	}
	t := tally{text: countText(enc, v.Raw), audio: partSendsAudio(v)}
	if typ.Type == gjson.String && typ.Str != "" {
		// A part type (an object without one stays its JSON text).
		_, t.hidden = partWeight(enc, model, v)
	}
	return t
}

// partTally is one content part p (a value as rawValue gives it) as
// partWeight and partAudio weigh it: a string part and a text
// or refusal part are read in one raw walk of p; parts of other types
// (files, images, audio) by those readers, with gjson. When check it also
// field-checks p as checkElements checks an element of a message's
// content array (checkMember with chatPartFields at depth 4, in order):
// ok false when that fails.
func partTally(enc counter, model string, p gjson.Result, check bool, fold *[]byte) (t tally, ok bool) {
	if !p.IsObject() {
		// Lenient: a bare string part by its text, a list or another
		// value, which the API refuses, by its JSON text (countValue).
		return tally{text: countValue(enc, p)}, true
	}
	ok = true
	var typ, text, refusal gjson.Result
	inputAudio := false
	var extra int64 // members it does not know (unknownmembers.go)
	rawMembers(p.Raw, func(k string, v gjson.Result) bool {
		if check && ok {
			if !fieldValue(k, v.Type, chatPartFields) {
				_, _, ok = checkMember(k, v, elements{v: v, raw: true}, chatPartFields, 4, nil, fold)
			}
		}
		switch k {
		case "type":
			typ = v
		case "text":
			text = v
		case "refusal":
			refusal = v
		case "input_audio":
			inputAudio = true // partAudio: Get("input_audio").Exists()
		default:
			if !chatPartKnown(k) {
				extra += unknownMember(enc, k, v)
			} else {
				extra += definedMember(enc, k, v) // a cache_control past any the API takes
			}
		}
		return true
	})
	// A type that is not a string (rawString "") is none of these: gjson's
	// String gives its JSON text, which equals no type name.
	switch rawString(typ) {
	case "text":
		return tally{text: min(countValue(enc, text)+extra, maxTokens), audio: inputAudio}, ok
	case "refusal":
		return tally{text: min(countValue(enc, refusal)+extra, maxTokens), audio: inputAudio}, ok
	}
	n, hidden := partWeight(enc, model, p) // its own members' extra included
	return tally{text: n, hidden: hidden, audio: partSendsAudio(p)}, ok
}

// stringOf is r's text when r is a JSON string, else "".
func stringOf(r gjson.Result) string {
	if r.Type != gjson.String {
		return ""
	}
	return r.String()
}

// partAudio reports whether a chat content part sends audio: an
// input_audio part (or any part holding an "input_audio" member).
func partAudio(p gjson.Result) bool {
	return p.IsObject() && (p.Get("type").String() == "input_audio" || p.Get("input_audio").Exists())
}

// partSendsAudio reports whether a chat content part sends audio the
// upstream bills at the model's audio prices: partAudio's input_audio, a
// part of a type that names audio (vLLM's "audio_url", which its server
// fetches: https://docs.vllm.ai/en/latest/features/multimodal_inputs.html),
// or a file or image part whose data URL or file name says audio
// ("data:audio/wav;base64,…", "talk.mp3"), which a gateway hands to a
// model that reads audio (LiteLLM's file parts to Gemini), whose usage then
// reports audio tokens (prompt_tokens_details.audio_tokens), priced 8–16×
// text on OpenAI's audio models. Such a part weighed as text reserved its
// hidden context at the text price.
//
// One pass over p's members (each member's first occurrence read, as
// gjson's Get reads it): an image part's data URL may be megabytes, and a
// Get of each member it lacks would pass over it again.
func partSendsAudio(p gjson.Result) bool {
	if !p.IsObject() {
		return false
	}
	var typ, f, img gjson.Result
	var seenType, seenFile, seenImage, inputAudio bool
	p.ForEach(func(k, v gjson.Result) bool {
		switch k.String() {
		case "type":
			if !seenType {
				typ, seenType = v, true
			}
		case "input_audio":
			inputAudio = true
			return false
		case "file":
			if !seenFile {
				f, seenFile = v, true
			}
		case "image_url":
			if !seenImage {
				img, seenImage = v, true
			}
		}
		return true
	})
	if inputAudio || strings.Contains(strings.ToLower(typ.String()), "audio") {
		return true
	}
	if f.IsObject() {
		mime, _ := splitDataURL(stringOf(f.Get("file_data")))
		if audioMedia(mime, stringOf(f.Get("filename"))) {
			return true
		}
	}
	url := img.String()
	if img.IsObject() {
		url = stringOf(img.Get("url"))
	}
	return dataURLAudio(url)
}

// dataURLAudio reports whether url is a data URL whose media type says
// audio ("data:audio/wav;base64,…", audioMedia), in any case.
func dataURLAudio(url string) bool {
	if len(url) <= len("data:") || !strings.EqualFold(url[:len("data:")], "data:") {
		return false
	}
	mime := url[len("data:"):]
	if i := strings.IndexAny(mime, ";,"); i >= 0 {
		mime = mime[:i]
	}
	return audioMedia(mime, "")
}

// audioExtensions are the file name endings audioMedia reads as audio (a
// gateway may take the type from the name). An immutable table.
var audioExtensions = [...]string{".wav", ".mp3", ".flac", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".aif", ".aiff", ".weba", ".mpga"}

// audioMedia reports whether a media type (mime) or file name says audio:
// a type "audio/…", or a name with an ending of audioExtensions, in any
// case.
func audioMedia(mime, name string) bool {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(mime)), "audio/") {
		return true
	}
	name = strings.ToLower(name)
	for _, e := range audioExtensions {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// asksAudio reports whether a chat request's top-level "audio" or
// "modalities" member (k, value v) asks for audio output: "audio" set to
// anything but null, or "modalities" holding anything but "text" (a
// spelling llmguard does not know may be one an upstream reads as audio).
func asksAudio(k string, v gjson.Result) bool {
	if k == "audio" {
		return v.Type != gjson.Null
	}
	audio := false
	if v.IsArray() {
		v.ForEach(func(_, m gjson.Result) bool {
			audio = audio || m.Type != gjson.String || m.Str != "text"
			return !audio
		})
	} else {
		audio = v.Type != gjson.Null
	}
	return audio
}

// partWeight weighs one content part: text (and refusal) parts by their
// text, image_url parts by imageTokens, file parts by fileTokens, others
// by unknownPartBytesPerToken. hidden is true when the bill cannot be
// known from the body (the caller reserves the model's largest input,
// Estimate.ServerContext): a stored file (file_id), an inline file
// fileTokens cannot weigh, and a part of a type llmguard does not know
// (video_url, audio_url and other media an OpenAI-compatible upstream
// such as vLLM fetches and bills) unless it sends audio (partAudio).
func partWeight(enc counter, model string, p gjson.Result) (n int64, hidden bool) {
	if !p.IsObject() {
		// Lenient: a bare string part by its text, another value by its
		// JSON text (as partTally).
		return countValue(enc, p), false
	}
	typ := p.Get("type").String()
	switch typ {
	case "text", "refusal", "file", "image_url":
		// Members no API defines, which a lenient upstream may write
		// into the prompt (unknownmembers.go); a part of another type
		// is weighed whole.
		n, hidden = partWeightOf(enc, model, typ, p)
		return min(n+unknownMembers(enc, p, chatPartKnown), maxTokens), hidden
	}
	return partWeightOf(enc, model, typ, p)
}

// partWeightOf is partWeight of the part p, an object of type typ, by
// the members its type defines.
func partWeightOf(enc counter, model, typ string, p gjson.Result) (n int64, hidden bool) {
	switch typ {
	case "text":
		return countValue(enc, p.Get("text")), false
	case "refusal":
		return countValue(enc, p.Get("refusal")), false
	case "file":
		// {"type":"file","file":{"file_data":"data:…;base64,…","filename"}}
		// or {"file":{"file_id"}}: weighed like Responses' input_file.
		f := p.Get("file")
		name := stringOf(f.Get("filename"))
		n := countText(enc, name) + unknownMembers(enc, f, chatFileKnown)
		page := imageTokens(model, "high", 0, 0)
		mime, data := splitDataURL(stringOf(f.Get("file_data")))
		if data == "" { // stored: the window bounds it (hidden)
			return n, true
		}
		m, hidden := fileTokens(enc, inlineFile{b64: data, name: name, mime: mime}, page)
		return n + m, hidden
	case "image_url":
		img := p.Get("image_url")
		url := img.String() // the older shape: "image_url": "https://…"
		var extra int64     // members it does not know (unknownmembers.go)
		if img.IsObject() {
			url = stringOf(img.Get("url"))
			extra = unknownMembers(enc, img, chatImageURLKnown)
		}
		if n, hidden, ok := imageAsDocument(enc, model, url); ok {
			return n + extra, hidden
		}
		wd, ht := dataURLSize(url)
		return imageTokens(model, img.Get("detail").String(), wd, ht) + extra, false
	default:
		// Audio parts (an input_audio part, or one holding an input_audio
		// member) are Estimate.Audio's: see partAudio.
		return ceilDiv(int64(len(p.Raw)), unknownPartBytesPerToken), !partAudio(p)
	}
}

// serviceTier is v as an Estimate's ServiceTier: a string of at most 32
// bytes, copied out of the body; "" otherwise.
func serviceTier(v gjson.Result) string {
	if v.Type != gjson.String || len(v.Str) > 32 {
		return ""
	}
	return strings.Clone(v.Str)
}

// lenientTrue reports whether v reads as true to an upstream that parses
// booleans leniently, as pydantic's lax mode does (vLLM and other
// OpenAI-compatible servers): JSON true, the strings "true", "1", "on",
// "t", "y" or "yes" in any case and with blanks around, or the number 1.
// A strict upstream refuses all but true; a lenient one streams for
// "stream": "true", and a flag read as false there would leave the stream
// without its usage asked for, settled on llmguard's own count.
func lenientTrue(v gjson.Result) bool {
	switch v.Type {
	case gjson.True:
		return true
	case gjson.Number:
		f, err := strconv.ParseFloat(v.Raw, 64) // a raw walk's values (rawValue) carry Raw only
		return err == nil && f == 1 || v.Num == 1
	case gjson.String:
		str := v.Str
		if str == "" {
			str = rawString(v)
		}
		switch strings.ToLower(strings.TrimSpace(str)) {
		case "true", "1", "on", "t", "y", "yes":
			return true
		}
	}
	return false
}

// onlineModel reports whether model asks OpenRouter for web search by its
// ":online" suffix (https://openrouter.ai/docs/features/web-search), any
// case: the search results enter the input the upstream bills.
func onlineModel(model string) bool {
	const suffix = ":online"
	return len(model) >= len(suffix) && strings.EqualFold(model[len(model)-len(suffix):], suffix)
}

// openAIModel reports whether model, stripped (canonicalModel), names an
// OpenAI model: "gpt-…", "chatgpt-…", or an o-series reasoning model
// ("o1", "o3-mini", "o4-mini").
func openAIModel(model string) bool {
	if strings.HasPrefix(model, "gpt-") || strings.HasPrefix(model, "chatgpt-") {
		return true
	}
	return len(model) >= 2 && model[0] == 'o' && '1' <= model[1] && model[1] <= '9' && (len(model) == 2 || model[2] == '-')
}

// numericText is s with each decimal digit of another script (Unicode's
// Nd: fullwidth, Arabic-Indic, Devanagari…) written as its ASCII digit,
// as Python's int() and float() read it; ok is false when s holds none
// (nothing to rewrite). Nd's digits come in runs of ten from zero, so a
// digit's value is its place in its run.
func numericText(s string) (string, bool) {
	var b []byte
	for i, c := range s {
		if c >= utf8.RuneSelf && unicode.IsDigit(c) {
			if b == nil {
				b = append(make([]byte, 0, len(s)), s[:i]...)
			}
			zero := c
			for unicode.IsDigit(zero - 1) {
				zero--
			}
			b = append(b, byte('0'+(c-zero)%10))
			continue
		}
		if b != nil {
			b = utf8.AppendRune(b, c)
		}
	}
	if b == nil {
		return s, false
	}
	return string(b), true
}
