package weigher

import (
	"github.com/tidwall/gjson"
)

// defaultCompletionMaxTokens is the legacy completions endpoint's own default
// max_tokens: "integer or null, Optional, Defaults to 16"
// (https://platform.openai.com/docs/api-reference/completions/create).
const defaultCompletionMaxTokens = 16

// Completions estimates a legacy OpenAI /v1/completions request body
// (https://platform.openai.com/docs/api-reference/completions/create).
//
// InputTokens is the prompt with no chat framing: a string counted in the
// model's encoding, a token array by its length, or an array of strings or
// token arrays (a batch of prompts) summed; plus the suffix once per prompt.
// An absent prompt is the API's default "<|endoftext|>", 1 token. A prompt
// object carrying llama.cpp's "multimodal_data" (images or audio, whose
// tokens the model's projector decides) also sets ServerContext: the
// model's largest input is reserved.
//
// OutputFields holds where the body's max_tokens value lies (whatever it
// is), for the proxy to write a pinned maximum there
// (output_reservation.pin).
//
// OutputTokens is max_tokens (absent, null, 0, a negative or a
// non-number: the model's output reservation and at least 16, since
// OpenAI's default of 16 is not llama.cpp's or Ollama's, see below;
// OutputDefaulted is then set, as for a chat body with no maximum) times
// max(n, best_of) — best_of completions are generated server-side and all
// billed ("it can quickly consume your token quota"), and best_of ≥ n —
// times the number of prompts, since each prompt gets its own choices; with
// echo the prompt is also returned in every choice, so its tokens are added
// once per choice (reconciliation refunds any excess), and OutputDefaulted
// is cleared (echo as a lenient upstream reads it, "true" included), so
// that such a body is never pinned: its reservation is not a maximum per
// completion. vLLM's min_tokens
// and ignore_eos raise the per-completion figure (outputFloor). Choices is
// max(n, best_of) times the number of prompts: the completions
// OutputTokens covers, each of which a stream must end.
//
// A streamed request sets Stream, and IncludeUsage when it sets
// stream_options.include_usage. A body that is not a JSON object yields the
// byte-based estimate of [Weigher.Bytes] with Parsed false. Completions never
// panics and never keeps body.
func (w *Weigher) Completions(body []byte) Estimate { return w.completions(body, nil) }

// completions is [Weigher.Completions] weighed as the model as resolves the body's
// model to (nil: the body's own).
func (w *Weigher) completions(body []byte, as func(string) string) Estimate {
	d, fallback, ok := w.parseRequest(body, completionsFields)
	if !ok {
		return fallback
	}
	defer d.close()
	var model, prompt, suffix, maxTok gjson.Result
	var choiceVals choiceFields // n, n_cmpl, best_of
	echo := false
	var floor outputFloor      // vLLM's min_tokens and ignore_eos, llama.cpp's n_predict, TabbyAPI's max_length
	var unknownTop unknownTops // top-level members the completions API does not define (completionsTopKnown)
	var plugins gjson.Result   // OpenRouter's plugins (searchAsk.pluginFees)
	est := Estimate{Parsed: true}
	d.members(func(k string, v gjson.Result, elems elements) bool {
		switch k {
		case "model":
			model = v
		case "prompt":
			prompt = v
		case "plugins":
			// OpenRouter's plugins (web search, file parsing), which its
			// completions endpoint takes as its chat endpoint does: their
			// results enter the prompt it bills. Hidden context, and a
			// web search billed per request (searchAsk.pluginFees).
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
			plugins = v
		case "prompt_embeds":
			// vLLM's prompt embeddings (base64 tensors, one prompt token
			// per row, beside or instead of prompt): billed as prompt
			// tokens the body shows only as bytes. Hidden context.
			est.ServerContext = est.ServerContext || v.Type != gjson.Null
		case "suffix":
			suffix = v
		case "max_tokens":
			maxTok = v
			addField(&est.OutputFields, spanOf(elems))
		case "n", "n_cmpl", "best_of":
			// Per prompt (choiceFields).
			choiceVals.read(k, v)
		case "min_tokens", "ignore_eos", "n_predict", "max_length":
			floor.read(k, v)
		case "echo":
			// As a lenient upstream reads it (vLLM's pydantic takes
			// "true"): an echo reserved for is never pinned either.
			echo = lenientTrue(v)
		case "stream":
			est.Stream = lenientTrue(v)
		case "stream_options":
			est.IncludeUsage = lenientTrue(v.Get("include_usage"))
		default:
			unknownTop.note(completionsTopKnown, k, v)
		}
		return true
	})
	est.Model = modelNamed(model, as, w.names)
	est.ServerContext = est.ServerContext || onlineModel(est.Model)
	est.SearchContext, est.SearchResults = searchAsk{plugins: plugins}.pluginFees(est.Model)
	enc := w.encoder(est.Model)
	in, prompts, media := promptTally(enc, prompt)
	est.ServerContext = est.ServerContext || media
	if !prompt.Exists() || prompt.Type == gjson.Null {
		in, prompts = 1, 1 // "<|endoftext|>"
	}
	// The suffix as the API takes it (a string), or by its JSON text.
	in += mulCap(countValue(enc, suffix), max(prompts, 1))
	in = unknownTop.add(enc, in)
	est.InputTokens = w.scaled(est.Model, min(in, maxTokens))

	out, ok := tokenCount(maxTok)
	if !ok {
		// Absent, or named but not a positive count (null, 0, -1, "-1",
		// a word). OpenAI, vLLM and SGLang read an absent max_tokens as
		// 16 and OpenAI a null one too, but llama.cpp's server and
		// Ollama generate until the model stops or the context ends
		// (llama.cpp's -n/--predict "-1 = infinity"; Ollama's
		// num_predict "Default: -1, infinite generation",
		// docs/modelfile.md), and vLLM reads null so: which one an
		// upstream is, the body does not say. The model's output
		// reservation, as a chat body with no cap gets, and at least 16
		// (a model configured with default_max_output_tokens: 16 reserves
		// exactly the OpenAI default).
		out = max(w.defaultOutput(est.Model), defaultCompletionMaxTokens)
	}
	// ignore_eos with no maximum runs to the end of the context.
	out, est.OutputDefaulted = floor.apply(w, est.Model, out, !ok)
	est.OutputPinned = floor.pins()
	choices := choiceVals.count()
	// Each prompt gets its own choices, streamed under their own indexes
	// (prompt p's choice j is p×n + j): every one must finish for a stream
	// without "[DONE]" to have ended (Stream.Ended), and each may bill its
	// prompt (Ceiling).
	est.Choices = mulCap(choices, max(prompts, 1))
	est.OutputTokens = mulCap(out, est.Choices)
	if echo {
		est.OutputTokens = min(est.OutputTokens+mulCap(in, choices), maxTokens)
		// Not the model's default times Choices any more: a learned
		// reservation must not replace it and drop the echoed prompts.
		est.OutputDefaulted = false
	}
	return est
}

// Embeddings estimates an OpenAI /v1/embeddings request body
// (https://platform.openai.com/docs/api-reference/embeddings/create):
// InputTokens is the input — a string, a token array, or an array of
// strings or token arrays — counted like a completions prompt, with no
// framing, and the text of the shapes OpenAI-compatible servers add
// (embeddingsInputTokens: input objects, vLLM's "messages"), what it
// cannot weigh in them (an image) marking the estimate ServerContext;
// OutputTokens is 0 (an embedding generates no tokens). A body that
// is not a JSON object yields the byte-based estimate of [Weigher.Bytes]
// with OutputTokens 0 and Parsed false. Embeddings never panics and never
// keeps body.
func (w *Weigher) Embeddings(body []byte) Estimate { return w.embeddings(body, nil) }

// embeddings is [Weigher.Embeddings] weighed as the model as resolves the body's
// model to (nil: the body's own).
func (w *Weigher) embeddings(body []byte, as func(string) string) Estimate {
	d, fallback, ok := w.parseRequest(body, embeddingsFields)
	if !ok {
		fallback.OutputTokens = 0
		return fallback
	}
	defer d.close()
	var model, input, messages, template, kwargs gjson.Result
	var alt [len(embeddingsAltInputs)]gjson.Result
	d.members(func(k string, v gjson.Result, elems elements) bool {
		switch k {
		case "model":
			model = v
		case "input":
			input = v
		case embeddingsAltInputs[0]:
			alt[0] = v
		case embeddingsAltInputs[1]:
			alt[1] = v
		case embeddingsAltInputs[2]:
			alt[2] = v
		case "messages":
			messages = v
		case "chat_template":
			template = v
		case "chat_template_kwargs":
			kwargs = v
		}
		return true
	})
	est := Estimate{Parsed: true}
	est.Model = modelNamed(model, as, w.names)
	enc := w.encoder(est.Model)
	in, hidden := embeddingsInputTokens(enc, input)
	for _, a := range alt {
		n, h := embeddingsInputTokens(enc, a)
		in, hidden = min(in+n, maxTokens), hidden || h
	}
	m, mHidden := embeddingsMessages(enc, w.family(est.Model), messages)
	// vLLM renders chat-style embeddings messages with a chat template, as
	// it does chat (see the chat reader): a template the request carries
	// is hidden context, the variables it passes are counted.
	est.ServerContext = hidden || mHidden || template.Exists() && template.Type != gjson.Null
	est.InputTokens = w.scaled(est.Model, min(in+m+templateTokens(enc, []gjson.Result{kwargs}), maxTokens))
	return est
}

// embeddingsAltInputs are the members in which OpenAI-compatible embedding
// servers take their text in place of OpenAI's "input": "texts" (Cohere's
// embed API and servers that mirror it), "inputs" (Hugging Face's Text
// Embeddings Inference /embed) and "prompt" (Ollama's older
// /api/embeddings). A lenient upstream (one that routes them to the same
// handler, or reads them as aliases of "input") embeds, and bills, the
// text it finds there, so each is weighed as an input too
// (embeddingsInputTokens), in addition to "input" when both are present.
// The sum is capped at maxTokens.
var embeddingsAltInputs = [...]string{"texts", "inputs", "prompt"}

// promptTokens counts a completions prompt: a string, a token array (its
// length), or an array of strings and token arrays. prompts is how many
// prompts it holds (a flat token array is one). Objects where the API takes
// strings and token arrays (a prompt, or prompts, as {"text": …}), which a
// lenient upstream may read as text, are weighed by their JSON text, each
// a prompt.
func promptTokens(enc counter, p gjson.Result) (tokens, prompts int64) {
	tokens, prompts, _ = promptTally(enc, p)
	return tokens, prompts
}

// promptTally is promptTokens, and media: whether a prompt object carries
// llama.cpp's "multimodal_data" (base64 images or audio its
// "prompt_string" marks with media markers: POST /completion, "A JSON
// object which optionally contains multimodal data", tools/server
// README). Each medium becomes as many tokens as the model's projector
// makes of it, which its base64 text does not bound (a small image can
// become hundreds): hidden context (Estimate.ServerContext).
func promptTally(enc counter, p gjson.Result) (tokens, prompts int64, media bool) {
	switch {
	case p.Type == gjson.String:
		return countText(enc, p.Str), 1, false
	case p.IsObject():
		return min(countValue(enc, p), maxTokens), 1, multimodalPrompt(p)
	case !p.IsArray():
		return 0, 0, false
	}
	flat := false
	p.ForEach(func(_, e gjson.Result) bool {
		switch {
		case e.Type == gjson.Number:
			tokens++
			flat = true
		case e.Type == gjson.String:
			tokens += countText(enc, e.Str)
			prompts++
		case e.IsArray():
			e.ForEach(func(_, x gjson.Result) bool {
				// A token id is one token; anything else in a token
				// array (a string, a list), which the API refuses, by its
				// JSON text, as a lenient upstream may read it.
				if x.Type == gjson.Number {
					tokens++
				} else {
					tokens += max(1, countValue(enc, x))
				}
				return true
			})
			prompts++
		case e.IsObject():
			tokens += countValue(enc, e)
			prompts++
			media = media || multimodalPrompt(e)
		}
		return true
	})
	if flat {
		prompts++
	}
	return min(tokens, maxTokens), prompts, media
}

// multimodalPrompt reports whether o, a prompt object, has a
// "multimodal_data" member (any one, if named twice) holding anything but
// null or an empty list.
func multimodalPrompt(o gjson.Result) (media bool) {
	o.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "multimodal_data" && v.Type != gjson.Null {
			media = !v.IsArray()
			v.ForEach(func(_, _ gjson.Result) bool { media = true; return false })
		}
		return !media
	})
	return media
}

// mulCap is a × b for non-negative a, b, saturating at maxTokens.
func mulCap(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxTokens/b {
		return maxTokens
	}
	return min(a*b, maxTokens)
}
