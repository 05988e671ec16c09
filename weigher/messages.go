package weigher

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Messages estimates an Anthropic /v1/messages request body
// (https://platform.claude.com/docs/en/api/messages).
//
// Claude's tokenizer is not public, so text — system (a string or text
// blocks), message content (a string or blocks), tool_use names and input
// JSON, tool_result content, the JSON of tool definitions (name, description,
// input_schema), the JSON of a structured output format (output_config's
// format, output_format) — is counted in o200k_base and multiplied by the model's
// safety factor (see claude.go). Figures Anthropic publishes in its own
// tokens are added unscaled: the chat framing (claudeTokensPerMessage per
// message, claudeTokensReply), the tool-use system prompt by model and
// tool_choice, Anthropic-defined tools (bash, text editor, computer use, memory),
// images by the vision rule (base64 images by their header's pixel size, URL
// and file images at the cap), and PDF documents by pages (see document.go).
// Thinking blocks count in every assistant turn on a model that keeps them
// all in its context (keepsEveryThinking: Opus 4.5 and later, Sonnet 4.6
// and later, any name not known to keep fewer; or a body with a
// clear_thinking edit), else only in the current one (those after the last
// user message that is not only tool results), as older models drop the
// thinking of previous turns; a thinking block weighs at least its
// signature (thinkingSignatureTokens). Enabled thinking adds
// claudeThinkingTokens.
//
// OutputTokens is max_tokens (required by the API), else the model's default
// output reservation. A "speed" other than "standard" (fast mode) sets
// ServiceTier to FastModeTier. A streamed request sets Stream and IncludeUsage (a
// Messages stream always reports usage). A body that is not a JSON object
// yields the byte-based estimate of [Weigher.Bytes] with Parsed false.
// Messages never panics and never keeps body.
func (w *Weigher) Messages(body []byte) Estimate { return w.messages(body, nil) }

// FastModeTier is the ServiceTier of a Messages request that asks for a
// "speed" other than "standard": Anthropic's fast mode, billed at a
// multiple of the model's standard rates (6x for Claude Opus 4.6, per
// https://platform.claude.com/docs/en/build-with-claude/fast-mode), which
// policy prices at its dearest tier.
const FastModeTier = "fast"

// messages is [Weigher.Messages] weighed as the model as resolves the body's
// model to (nil: the body's own). It resumes from a checkpoint of the
// body's prefix up to its last message when one holds (resume.go), as chat
// does, and weighs the body whole when that checkpoint's counts were made
// for another model.
func (w *Weigher) messages(body []byte, as func(string) string) Estimate {
	if est, ok := w.messagesFrom(body, as, resumeOn); ok {
		return est
	}
	est, _ := w.messagesFrom(body, as, resumeKeep)
	return est
}

// messagesFrom is messages, scanning from a resume point with resumeOn; ok
// is false when the point it resumed from was counted in another context.
func (w *Weigher) messagesFrom(body []byte, as func(string) string, mode resumeMode) (Estimate, bool) {
	d, fallback, ok := w.parseRequestFrom(body, messagesFields, mode)
	if !ok {
		return fallback, true
	}
	defer d.close()
	var model, system, messages, tools, toolChoice, maxTok, thinking, contextManagement gjson.Result
	var formats [2]gjson.Result // output_config.format and output_format (structuredOutputTokens)
	var messageElems elements
	var unknownTop unknownTops // top-level members the Messages API does not define (messagesTopKnown)
	messagesAt := -1           // the index of "messages" among the members, when its key is written plain
	at := 0
	var plugins gjson.Result // OpenRouter's plugins (searchAsk.pluginFees)
	est := Estimate{Parsed: true}
	d.members(func(k string, v gjson.Result, elems elements) bool {
		switch k {
		case "model":
			model = v
		case "system":
			system = v
		case "messages":
			messages, messageElems = v, elems
			if d.lay != nil && d.span(d.lay.Members[at].Key) == `"messages"` {
				messagesAt = at
			}
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "max_tokens":
			maxTok = v
			addField(&est.OutputFields, spanOf(elems))
		case "thinking":
			thinking = v
		case "context_management":
			contextManagement = v
		case "output_config":
			formats[0] = v.Get("format")
		case "output_format":
			formats[1] = v
		case "stream":
			est.Stream = lenientTrue(v)
		case "speed":
			// Fast mode bills 2-6x the standard rates (Opus 4.6: 6x; the
			// fast-mode guide,
			// https://platform.claude.com/docs/en/build-with-claude/fast-mode):
			// any speed but "standard" is priced as FastModeTier.
			if v.Type != gjson.Null && (v.Type != gjson.String || v.Str != "standard") {
				est.ServiceTier = FastModeTier
			}
		case "inference_geo":
			// Data residency: inference pinned to a geography ("us") is
			// billed at 1.1x every token price (Opus 4.6, Sonnet 4.6 and
			// later; https://platform.claude.com/docs/en/build-with-claude/data-residency
			// and its pricing page). Anything but "global" (the default) or
			// null is taken as pinned.
			est.GeoPinned = v.Type != gjson.Null && (v.Type != gjson.String || v.Str != "global")
		case "container":
			// Agent Skills (container.skills): the upstream loads each
			// skill's metadata into the prompt, and its instructions and
			// files when the model uses it, none of it in the body
			// (https://docs.claude.com/en/docs/build-with-claude/skills-guide).
			// The API asks for the code execution tool beside them, which
			// marks the request too (serverTools); a body without it is
			// judged by what it names, not by what the API would accept.
			// A container id alone (reusing a container) brings files,
			// which only that tool reads.
			est.ServerContext = est.ServerContext || namesSkills(v)
		case "mcp_servers", "plugins":
			// Remote MCP servers: their tool results enter the context the
			// upstream bills; so do the results of OpenRouter's plugins
			// (web search, file parsing: chat's "plugins") on an
			// Anthropic-compatible endpoint that takes them (its web
			// search billed per request: searchAsk.pluginFees).
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
			if k == "plugins" {
				plugins = v
			}
		default:
			unknownTop.note(messagesTopKnown, k, v)
		}
		at++
		return true
	})
	est.IncludeUsage = est.Stream
	est.ServerContext = est.ServerContext || serverTools(tools)
	est.WebSearches = webSearchUses(tools)
	est.CodeExecutionMinutes = codeExecutionMinutes(tools)
	est.Model = modelNamed(model, as, w.names)
	est.ServerContext = est.ServerContext || onlineModel(est.Model)
	est.SearchContext, est.SearchResults = searchAsk{plugins: plugins}.pluginFees(est.Model)
	est.CacheWrite, est.CacheWrite1h = asksCache(d.body)
	encName := w.EncodingFor(est.Model)
	fam := w.family(est.Model) // the name its image and tool rules key off
	c := claudeCounter{enc: w.encoder(est.Model), model: fam, factor: w.claudeSafetyFactor(est.Model)}
	// Each element is counted on its own counter, so that its tally can be
	// remembered (see countCache).
	// A message is looked up through the memo of the field check, which
	// found it already (see elemMemo).
	count := func(tag, flags string, raw string, fn func(sub *claudeCounter), memo *elemMemo) {
		ctx := w.cache.context(tag, encName, fam, flags)
		sum := func() tally {
			sub := claudeCounter{enc: c.enc, model: c.model, factor: c.factor}
			fn(&sub)
			return tally{text: sub.text, fixed: sub.fixed, hidden: sub.hidden}
		}
		if memo != nil {
			c.add(memo.count(w.budget, ctx, raw, sum))
		} else {
			c.add(w.cache.count(w.budget, ctx, raw, sum))
		}
	}
	part := func(tag, flags string, raw string, fn func(sub *claudeCounter)) { count(tag, flags, raw, fn, nil) }

	part("messages.system", "", system.Raw, func(sub *claudeCounter) {
		switch {
		case system.IsArray():
			system.ForEach(func(_, b gjson.Result) bool {
				sub.block(b, false, 0)
				return true
			})
		case system.IsObject(): // one block, as message reads it
			sub.block(system, false, 0)
		default:
			sub.text += countValue(sub.enc, system) // a string by its text, another value by its JSON text
		}
	})

	if messages.IsArray() {
		past := w.cache.context("messages.message", encName, fam, "past")
		cur := w.cache.context("messages.message", encName, fam, "current")
		// A model that keeps every earlier turn's thinking in its context
		// (keepsEveryThinking; or a clear_thinking edit, whose keep may be
		// "all") weighs each message as the current turn: one context.
		everyTurn := keepsEveryThinking(fam) || clearsThinking(contextManagement)
		if everyTurn {
			past = cur
		}
		// The messages before the resume point, if any, counted before;
		// messageElems then holds only those after it.
		before, same := d.memo.resumedSums(past)
		if !same {
			return Estimate{}, false
		}
		// current is 0 unless a message after the point is a user's that
		// is not only tool results: the thinking of every assistant
		// message before the point is then an earlier turn's (the sum
		// before.past), else theirs counts as it did (before.cur).
		current := currentTurnStart(messageElems)
		if everyTurn {
			current = 0
		}
		if current > 0 {
			before.cur, before.noCur = before.past, false
		} else if before.noCur {
			return Estimate{}, false // resumed where only a later turn's end says what the messages before weigh
		}
		run := startRun(before)
		keep := messagesAt >= 0 && d.memo.resuming()
		i := 0
		messageElems.each(func(m gjson.Result) bool {
			if m.IsObject() {
				thinkingCounts := i >= current && m.Get("role").String() == "assistant"
				ctx := past
				if thinkingCounts {
					ctx = cur
				}
				weigh := func(thinking bool) func() tally {
					return func() tally {
						sub := claudeCounter{enc: c.enc, model: c.model, factor: c.factor}
						sub.message(m, thinking)
						return tally{text: sub.text, fixed: sub.fixed, hidden: sub.hidden}
					}
				}
				t := d.memo.count(w.budget, ctx, m.Raw, weigh(thinkingCounts))
				t.fixed += claudeTokensPerMessage
				tp := t
				if thinkingCounts && !everyTurn && keep && mayThink(m.Raw) {
					// What it weighs once a later user message makes its
					// turn an earlier one, for the checkpoint.
					tp = w.cache.count(w.budget, past, m.Raw, weigh(false))
					tp.fixed += claudeTokensPerMessage
				}
				run.add(t, tp, !everyTurn && i == current-1)
			} else if m.Type != gjson.Null {
				// Not a message (a bare string, a list): the API refuses
				// it, a lenient upstream may read it as one. Weighed by its
				// JSON text, as the messages member not given as a list.
				t := tally{text: countValue(c.enc, m), fixed: claudeTokensPerMessage}
				run.add(t, t, false)
			} else {
				run.add(tally{}, tally{}, false)
			}
			i++
			return true
		})
		c.add(run.sums.cur)
		if keep && (w.budget == nil || !w.budget.over) {
			d.memo.keepResumePoint(d.lay, messagesAt, &run, past, tailKeep{})
		}
	} else if messages.Raw != "" && messages.Type != gjson.Null {
		// Not a list (one message as an object, a bare string): the
		// API refuses it, a lenient upstream may read it as the
		// conversation. Weighed by its JSON text.
		c.text += countValue(c.enc, messages)
		c.fixed += claudeTokensPerMessage
	}
	c.fixed += claudeTokensReply

	if tools.IsArray() && len(tools.Raw) > 2 {
		choice := toolChoice.Get("type").String()
		count("messages.tools", choice, tools.Raw, func(sub *claudeCounter) { sub.tools(tools, choice) }, d.memo)
	} else if !tools.IsArray() && tools.Raw != "" && tools.Type != gjson.Null {
		// Not a list (one tool as an object, a string): the API refuses
		// it, a lenient upstream may read it. Weighed by its JSON text.
		c.text += countValue(c.enc, tools)
	}
	if toolChoice.Exists() {
		c.text += oddToolChoice(c.enc, toolChoice)
	}
	if t := thinking.Get("type").String(); t == "enabled" || t == "adaptive" {
		c.fixed += claudeThinkingTokens
	}
	// A gateway that takes Messages bodies for any model (LiteLLM's
	// /v1/messages) serves an o-series or Gemini name as that model,
	// which reasons unseen whether or not the body asks.
	est.HiddenReasoning = thinkingAsks(thinking) || hiddenReasoningFamily(fam)
	c.text = min(c.text+structuredOutputTokens(c.enc, formats[:]), maxTokens)
	c.text = unknownTop.add(c.enc, c.text)
	est.ServerContext = est.ServerContext || c.hidden
	est.InputTokens = min(scaleBy(w.claudeSafetyFactor(est.Model), c.text)+c.fixed, maxTokens)
	if at, ok := compactionTrigger(contextManagement); ok && est.InputTokens >= at {
		// Server-side compaction may run: a second sampling whose summary
		// and the message read after it the body does not show.
		est.ServerContext = true
	}

	out, ok := tokenCount(maxTok)
	if !ok {
		out = w.defaultOutput(est.Model)
		est.OutputDefaulted = true
	}
	est.OutputTokens, est.Choices = out, 1
	return est, true
}

// oddToolChoice weighs what a Messages "tool_choice" (v) holds beyond
// the shape whose tool-use system prompt claudeToolPrompt counts
// ({"type": a string, "name": a string, "disable_parallel_tool_use": a
// boolean}, https://platform.claude.com/docs/en/api/messages): a choice
// that is not an object, or a type or name that is not a string, or a
// disable_parallel_tool_use that is not a boolean, which the API refuses
// and a lenient upstream may write out, by its JSON text; any other
// member by its key and value (unknownMember); 0 otherwise. It is
// weighed whether or not the body has tools.
func oddToolChoice(enc counter, v gjson.Result) int64 {
	if !v.IsObject() {
		return countValue(enc, v)
	}
	var n int64
	rawMembers(v.Raw, func(k string, m gjson.Result) bool {
		switch k {
		case "type", "name":
			if m.Type != gjson.String || len(m.Raw) > framingMaxBytes {
				// Not a string, or longer than any type or tool name the
				// API takes (a name is at most 64 characters): by its
				// text.
				n += countValue(enc, m)
			}
		case "disable_parallel_tool_use":
			if m.Type != gjson.True && m.Type != gjson.False {
				n += countValue(enc, m)
			}
		default:
			n += unknownMember(enc, k, m)
		}
		return true
	})
	return min(n, maxTokens)
}

// structuredOutputTokens counts the output formats of a Messages body,
// its "output_config"'s "format" and the older top-level "output_format"
// (structured outputs: {"type": "json_schema", "schema": …},
// https://platform.claude.com/docs/en/build-with-claude/structured-outputs):
// the API turns the schema into context of the prompt it bills, so each
// is counted as the text of its JSON (in o200k_base tokens, scaled later
// with the rest of the text); absent or null, 0. Saturates at maxTokens.
func structuredOutputTokens(enc counter, formats []gjson.Result) int64 {
	var n int64
	for _, f := range formats {
		if f.Exists() && f.Type != gjson.Null {
			n = min(n+countText(enc, f.Raw), maxTokens)
		}
	}
	return n
}

// currentTurnStart is the index of the first message of the current
// assistant turn: one past the last user message carrying anything but
// tool_result blocks (-1 + 1 = 0 when there is none). Thinking blocks before
// it belong to previous turns.
func currentTurnStart(messages elements) int {
	last, i := -1, 0
	messages.each(func(m gjson.Result) bool {
		if m.IsObject() {
			// Role and content are found without decoding them: this walk
			// visits every message of the conversation, remembered or not.
			var role, content gjson.Result
			rawMembers(m.Raw, func(k string, v gjson.Result) bool {
				switch k {
				case "role":
					role = v
				case "content":
					content = v
				}
				return true
			})
			if rawString(role) == "user" && !onlyToolResults(content) {
				last = i
			}
		}
		i++
		return true
	})
	return last + 1
}

// mayThink reports whether the message raw (its JSON text) may hold a
// thinking or redacted_thinking block, whose weight depends on the turn:
// a block type names "thinking" in its text, written out or with \u
// escapes (no other escape writes a letter).
func mayThink(raw string) bool {
	return strings.Contains(raw, "thinking") || strings.Contains(raw, `\u`)
}

// message counts one message's content (a string or blocks); thinking
// tells whether its thinking blocks count (the current assistant turn).
func (c *claudeCounter) message(m gjson.Result, thinking bool) {
	var r, content gjson.Result
	rawMembers(m.Raw, func(k string, v gjson.Result) bool {
		switch k {
		case "role":
			r = v
		case "content":
			content = v
		default:
			// A member the API does not define: a lenient upstream may
			// write it into the prompt (unknownmembers.go).
			c.text += unknownMember(c.enc, k, v)
		}
		return true
	})
	if r.Type != gjson.String {
		// A role that is not a string (an object, a number), which the
		// API refuses: by its JSON text, as a lenient upstream may
		// write it out (null or absent: nothing).
		c.text += countValue(c.enc, r)
	}
	switch {
	case content.IsArray():
		content.ForEach(func(_, b gjson.Result) bool {
			c.block(b, thinking, 0)
			return true
		})
	case content.IsObject():
		// One block where a list of them was expected: a lenient
		// Anthropic-compatible server reads it as that block.
		c.block(content, thinking, 0)
	default:
		c.text += countValue(c.enc, content)
	}
}

// onlyToolResults reports whether content is an array of tool_result
// blocks only.
func onlyToolResults(content gjson.Result) bool {
	only := content.IsArray()
	content.ForEach(func(_, b gjson.Result) bool {
		only = b.Get("type").String() == "tool_result"
		return only
	})
	return only
}

// maxBlockDepth bounds the recursion into nested content blocks
// (tool_result → document → content …); a block deeper is weighed by its
// JSON text, as hidden context (claudeCounter.block).
const maxBlockDepth = 4

// claudeCounter sums a Messages request: text in o200k_base tokens (scaled
// later by the safety factor), fixed in Claude tokens.
type claudeCounter struct {
	enc         counter
	model       string
	factor      float64 // the model's safety factor, which scales text
	text, fixed int64
	// hidden: a block refers to content the body does not hold (a document
	// by file id or URL): Estimate.ServerContext.
	hidden bool
}

// add adds an element's tally.
func (c *claudeCounter) add(t tally) {
	c.text += t.text
	c.fixed += t.fixed
	c.hidden = c.hidden || t.hidden
}

// block counts one content block. thinking tells whether thinking blocks
// count (the current assistant turn).
func (c *claudeCounter) block(b gjson.Result, thinking bool, depth int) {
	if !b.IsObject() {
		// Lenient: a bare string block by its text, a list or another
		// value, which the API refuses, by its JSON text (countValue).
		c.text += countValue(c.enc, b)
		return
	}
	if depth > maxBlockDepth {
		// Nested past any shape the API takes (tool_result → document →
		// content is three deep): the API refuses it, but a lenient
		// upstream that writes blocks out may read all of it, text,
		// images and documents by URL alike. Not walked further, it is
		// weighed by its JSON text and as hidden context (the model's
		// largest input, which bounds what one call reads of it);
		// dropped, five nested tool_result blocks had 3,000 words at the
		// bottom weigh nothing.
		c.text += countText(c.enc, b.Raw)
		c.hidden = true
		return
	}
	typ := b.Get("type").String()
	if known := blockWeighed(typ); known {
		// Members the block's type does not define, which a lenient
		// upstream may write into the prompt (unknownmembers.go),
		// whatever the turn; a block of an unknown type is weighed whole.
		c.text += unknownMembers(c.enc, b, func(k string) bool { return claudeBlockKnown(typ, k) })
	}
	switch typ {
	case "text":
		c.text += countValue(c.enc, b.Get("text"))
	case "image":
		src := b.Get("source")
		c.fixed += c.image(src)
		c.text += unknownMembers(c.enc, src, claudeSourceKnown)
	case "document":
		c.document(b, depth)
	case "search_result":
		c.text += countValue(c.enc, b.Get("title")) + countValue(c.enc, b.Get("source"))
		c.blocks(b.Get("content"), thinking, depth)
	case "thinking":
		if thinking {
			// Its text, or its signature at 4 bytes a token when that
			// weighs more: a block whose display is "omitted" (the
			// default of Opus 4.7 and later) comes back with an empty
			// text and the thinking the model reads again only in its
			// signature (thinkingSignatureTokens).
			text := countValue(c.enc, b.Get("thinking"))
			c.text += text
			c.fixed += max(thinkingSignatureTokens(b)-text, 0)
		}
	case "redacted_thinking":
		if thinking {
			data := b.Get("data")
			size := len(stringOf(data))
			if data.Type != gjson.String && data.Type != gjson.Null {
				size = len(data.Raw) // not the API's shape: its JSON's bytes
			}
			c.fixed += ceilDiv(int64(size), unknownPartBytesPerToken)
		}
	case "tool_use", "server_tool_use", "mcp_tool_use":
		c.fixed += claudeTokensPerToolUse
		c.text += countValue(c.enc, b.Get("name"))
		if in := b.Get("input"); in.Exists() {
			c.text += countText(c.enc, in.Raw)
		}
	default:
		if toolResultType(typ) {
			c.fixed += claudeTokensPerToolUse
			c.blocks(b.Get("content"), thinking, depth)
			return
		}
		// Unknown block (a type newer than this code, or an
		// Anthropic-compatible server's own, such as one naming a file or
		// a URL to fetch): its bill cannot be read from it, so the
		// request reserves the model's largest input (hidden), with one
		// token per unknownPartBytesPerToken of JSON on top, as chat's
		// and Responses' unknown parts do.
		c.fixed += ceilDiv(int64(len(b.Raw)), unknownPartBytesPerToken)
		c.hidden = true
	}
}

// blocks counts content that is a string or an array of blocks.
func (c *claudeCounter) blocks(content gjson.Result, thinking bool, depth int) {
	if content.IsObject() { // one block, as message reads it
		c.block(content, thinking, depth+1)
		return
	}
	if !content.IsArray() {
		c.text += countValue(c.enc, content)
		return
	}
	content.ForEach(func(_, b gjson.Result) bool {
		c.block(b, thinking, depth+1)
		return true
	})
}

// image is one image's tokens by the vision rule; only base64 sources have a
// readable size.
func (c *claudeCounter) image(src gjson.Result) int64 {
	if src.Get("type").String() == "base64" {
		wd, ht := base64ImageSize(stringOf(src.Get("data")))
		return claudeImageTokens(c.model, wd, ht)
	}
	return claudeImageTokens(c.model, 0, 0)
}

// document counts a document block: a base64 file by fileTokens (a PDF by
// pages; hidden when its pages cannot be read), plain text by its text,
// a content source by its blocks, a URL or file as hidden context (nothing
// of its own: the request reserves the model's largest input); plus
// its title and context.
func (c *claudeCounter) document(b gjson.Result, depth int) {
	c.text += countValue(c.enc, b.Get("title")) + countValue(c.enc, b.Get("context"))
	src := b.Get("source")
	c.text += unknownMembers(c.enc, src, claudeSourceKnown)
	page := claudeImageTokens(c.model, 0, 0)
	switch src.Get("type").String() {
	case "base64":
		// The larger of the text part, scaled by the model's safety factor
		// as all Claude text is (it went in unscaled), and the page part
		// (page images already in Claude's own tokens).
		pages, text, hidden := fileParts(c.enc, inlineFile{b64: stringOf(src.Get("data")), mime: stringOf(src.Get("media_type"))}, page)
		if scaleBy(c.factor, text) > pages {
			c.text += text
		} else {
			c.fixed += pages
		}
		c.hidden = c.hidden || hidden
	case "text":
		c.text += countValue(c.enc, src.Get("data"))
	case "content":
		c.blocks(src.Get("content"), false, depth)
	default: // "url", "file": the upstream fetches it; the window bounds it (hidden)
		c.hidden = true
	}
}

// tools counts the tool definitions and the tool-use system prompt.
func (c *claudeCounter) tools(tools gjson.Result, choice string) {
	c.fixed += claudeToolPrompt(c.model, choice)
	tools.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() {
			// Not a tool (a string, a list): the API refuses it, a
			// lenient upstream may read it. Weighed by its JSON text.
			c.text += countValue(c.enc, t)
			return true
		}
		typ := t.Get("type").String()
		if typ == "" || typ == "custom" || definedTool(typ) {
			// Members the tool's type does not define, which a lenient
			// upstream may write into the prompt (unknownmembers.go); a
			// server tool is weighed by its whole JSON below.
			c.text += unknownMembers(c.enc, t, func(k string) bool { return claudeToolKnown(typ, k) })
		}
		if typ == "" || typ == "custom" {
			c.text += countValue(c.enc, t.Get("name")) + countValue(c.enc, t.Get("description"))
			if schema := t.Get("input_schema"); schema.Exists() {
				c.text += countText(c.enc, schema.Raw)
			}
			// Tool use examples: example inputs the API writes into the
			// tool definitions of the system prompt it builds
			// (https://platform.claude.com/docs/en/agents-and-tools/tool-use/define-tools).
			if ex := t.Get("input_examples"); ex.Exists() && ex.Type != gjson.Null {
				c.text += countText(c.enc, ex.Raw)
			}
			return true
		}
		for _, d := range definedTools {
			if strings.HasPrefix(typ, d.prefix) {
				c.fixed += d.tokens
				return true
			}
		}
		c.text += countText(c.enc, t.Raw) // server tools: their JSON
		return true
	})
}

// Server-side compaction's trigger, in input tokens
// (https://platform.claude.com/docs/en/build-with-claude/compaction-threshold):
// 150,000 by default, at least 50,000.
const (
	compactionTriggerDefault = 150000
	compactionTriggerMin     = 50000
)

// compactionTrigger reads a Messages "context_management" value: ok when
// its "edits" list holds a compaction edit (a "type" starting "compact_",
// such as "compact_20260112"), at the input, in tokens, from which it
// compacts — its trigger's "value", 150,000 when it names none, and
// 50,000 (the least the API takes) when the value is not a count at or
// above it, or its trigger is of another type. A request whose estimated
// input reaches it may sample twice in one call: the compaction reads the
// whole conversation and writes a summary, the message then reads that
// summary (its usage's "iterations", ParseMessagesUsage), context the body
// does not show.
func compactionTrigger(cm gjson.Result) (at int64, ok bool) {
	if !cm.IsObject() {
		return 0, false
	}
	edits := cm.Get("edits")
	if !edits.IsArray() {
		return 0, false
	}
	at = compactionTriggerDefault
	edits.ForEach(func(_, e gjson.Result) bool {
		if !strings.HasPrefix(e.Get("type").String(), "compact_") {
			return true
		}
		ok = true
		trig := e.Get("trigger")
		if trig.Type == gjson.Null || !trig.Exists() {
			return true
		}
		n, read := tokenCount(trig.Get("value"))
		if !read || n < compactionTriggerMin || trig.Get("type").String() != "input_tokens" {
			n = compactionTriggerMin
		}
		at = min(at, n)
		return true
	})
	return at, ok
}

// namesSkills reports whether a Messages body's container member v names
// Agent Skills: an object whose "skills" member is anything but null or an
// empty array (a lenient upstream may take a single skill object).
func namesSkills(v gjson.Result) bool {
	if !v.IsObject() {
		return false
	}
	sk := v.Get("skills")
	if !sk.Exists() || sk.Type == gjson.Null {
		return false
	}
	if !sk.IsArray() {
		return true
	}
	found := false
	sk.ForEach(func(_, _ gjson.Result) bool {
		found = true
		return false
	})
	return found
}

// thinkingSignatureTokens is the weight of a thinking block's (b)
// "signature", at one token per unknownPartBytesPerToken bytes of its
// string: the thinking, encrypted, that the model reads again when the
// block comes back. With display "omitted" (the default of Claude Opus
// 4.7 and later models) the block's "thinking" is empty and the signature
// alone carries it, so the text cannot bound what the block bills. A
// signature that is not a string is an unknown member's business
// (unknownMembers): 0.
func thinkingSignatureTokens(b gjson.Result) int64 {
	sig := b.Get("signature")
	if sig.Type != gjson.String {
		return 0
	}
	return ceilDiv(int64(len(sig.Raw)), unknownPartBytesPerToken)
}

// keepsEveryThinking reports whether a Messages request for model (its
// family name, stripped with canonicalModel) keeps the thinking blocks of
// every earlier assistant turn in the context it bills as input: Claude
// Opus 4.5 and later Opus models, Sonnet 4.6 and later Sonnet models and
// Claude Mythos keep them all; Opus 4.1 and earlier, Sonnet 4.5 and
// earlier, Haiku through 4.5, and Claude 3 and before keep only the last
// assistant turn's (https://platform.claude.com/docs/en/build-with-claude/extended-thinking,
// "Thinking block preservation"). Any name not known to keep only the last
// turn (a later Claude, another vendor's model behind an
// Anthropic-compatible endpoint, whose template writes them out) is taken
// to keep them all.
func keepsEveryThinking(model string) bool {
	model = canonicalModel(model)
	if !isClaude(model) {
		return true
	}
	for _, p := range [...]string{"claude-1", "claude-2", "claude-3", "claude-instant"} {
		if strings.HasPrefix(model, p) {
			return false
		}
	}
	for _, f := range [...]struct {
		prefix string
		last   int // the last minor version that keeps only the last turn
	}{{"claude-opus-4", 1}, {"claude-sonnet-4", 5}, {"claude-haiku-4", 5}} {
		if minor, ok := claudeMinor(model, f.prefix); ok {
			return minor > f.last
		}
	}
	return true
}

// claudeMinor is the minor version of model after prefix ("claude-opus-4"):
// 0 for the name alone, with a suffix ("@…", ":…") or a date
// ("-20250514"); the number after the dash otherwise ("-5",
// "-5-20251101"). ok is false when model does not continue prefix so.
func claudeMinor(model, prefix string) (minor int, ok bool) {
	rest, ok := strings.CutPrefix(model, prefix)
	if !ok {
		return 0, false
	}
	if rest == "" || rest[0] == '@' || rest[0] == ':' {
		return 0, true
	}
	if rest[0] != '-' {
		return 0, false
	}
	n := 1
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	switch v := rest[1:n]; {
	case v == "":
		return 0, false
	case len(v) == 8: // a date: the first model of the family
		return 0, true
	case len(v) > 3:
		return 0, false
	default:
		m, _ := strconv.Atoi(v)
		return m, true
	}
}

// clearsThinking reports whether a Messages body's context_management
// (cm) holds a thinking-clearing edit (clear_thinking_20251015), whose
// "keep" may hold every earlier turn's thinking blocks in the context
// ("all"), on any model: the body is then weighed with them all.
func clearsThinking(cm gjson.Result) bool {
	found := false
	cm.Get("edits").ForEach(func(_, e gjson.Result) bool {
		found = strings.HasPrefix(e.Get("type").String(), "clear_thinking")
		return !found
	})
	return found
}

// thinkingAsks reports whether a Messages "thinking" member v may turn
// extended thinking on: any value but null, false and an object whose
// "type" is "disabled" (read ignoring case and surrounding space, as a
// lenient upstream may). Claude 4 and later models stream a summary of
// their thinking, or none ("display": "omitted"), and bill the whole of it
// as output ("you're charged for the full thinking tokens, not the
// summary tokens", https://platform.claude.com/docs/en/build-with-claude/extended-thinking),
// so a stream of such a request without a usage is not charged its text
// alone (Estimate.HiddenReasoning).
func thinkingAsks(v gjson.Result) bool {
	switch {
	case !v.Exists() || v.Type == gjson.Null || v.Type == gjson.False:
		return false
	case v.IsObject():
		t := v.Get("type")
		return t.Type != gjson.String || !strings.EqualFold(strings.TrimSpace(t.Str), "disabled")
	}
	return true
}
