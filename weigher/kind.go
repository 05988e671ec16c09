package weigher

import "strings"

// Kind is the API a request calls, which decides how its body is weighed and
// how its response's usage is read. The zero value is KindOther.
type Kind uint8

const (
	// KindOther is any request the weigher does not weigh; it counts as a
	// request only.
	KindOther Kind = iota
	// KindChat is OpenAI POST /v1/chat/completions.
	KindChat
	// KindResponses is OpenAI POST /v1/responses.
	KindResponses
	// KindCompletions is OpenAI's legacy POST /v1/completions.
	KindCompletions
	// KindEmbeddings is OpenAI POST /v1/embeddings.
	KindEmbeddings
	// KindMessages is Anthropic POST /v1/messages.
	KindMessages
	// KindCountTokens is Anthropic POST /v1/messages/count_tokens: free of
	// charge upstream (https://platform.claude.com/docs/en/build-with-claude/token-counting,
	// "Token counting is free to use" with its own requests-per-minute
	// limit), so it is recognised — to be limited as a request and kept
	// apart from /v1/messages — but not weighed, and has no usage.
	KindCountTokens
)

var kindNames = [...]string{"other", "chat", "responses", "completions", "embeddings", "messages", "count_tokens"}

// String is the kind's metric-label name: "other", "chat", "responses",
// "completions", "embeddings", "messages", "count_tokens".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "other"
}

// Weighed reports whether requests of kind k are weighed in tokens; the
// others (KindOther, KindCountTokens) count as requests only.
func (k Kind) Weighed() bool { return k != KindOther && k != KindCountTokens }

// KindOf classifies a request by method and upstream path (query string
// removed; one trailing slash ignored). Only POST to the paths named on the
// Kind constants is weighed; anything else is KindOther.
func KindOf(method, path string) Kind {
	if method != "POST" {
		return KindOther
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	switch path {
	case "/v1/chat/completions":
		return KindChat
	case "/v1/responses":
		return KindResponses
	case "/v1/completions":
		return KindCompletions
	case "/v1/embeddings":
		return KindEmbeddings
	case "/v1/messages":
		return KindMessages
	case "/v1/messages/count_tokens":
		return KindCountTokens
	}
	return KindOther
}

// Weigh estimates body as a request of kind k: [Weigher.Chat],
// [Weigher.Responses], [Weigher.Completions], [Weigher.Embeddings] or
// [Weigher.Messages]. KindOther and KindCountTokens are not weighed: the
// zero Estimate (with Parsed true). Each checks the body in one flat pass
// first (syntax, nesting within [Options.MaxDepth], keys named twice), so a
// body too deep or ambiguous is reported (Estimate.TooDeep,
// Estimate.DuplicateKeys) before any recursive parser reads it. It never
// panics and never keeps body.
func (w *Weigher) Weigh(k Kind, body []byte) Estimate {
	var e Estimate
	switch k {
	case KindChat:
		e = w.Chat(body)
	case KindResponses:
		e = w.Responses(body)
	case KindCompletions:
		e = w.Completions(body)
	case KindEmbeddings:
		e = w.Embeddings(body)
	case KindMessages:
		e = w.Messages(body)
	default:
		return Estimate{Parsed: true}
	}
	return e
}

// ParseUsage reads the usage of a non-streamed JSON response of kind k:
// [ParseChatUsage], [ParseResponsesUsage], [ParseCompletionsUsage],
// [ParseEmbeddingsUsage] or [ParseMessagesUsage]. ok is false for a body with
// no usage (an error body), for a body nested deeper than [DefaultMaxDepth]
// (checked by a flat scan before anything parses it), and for KindOther and
// KindCountTokens. It never panics and never keeps body.
func ParseUsage(k Kind, body []byte) (Usage, bool) { return parseUsage(k, body, 0) }

// ParseUsage is [ParseUsage] with w's nesting limit ([Options.MaxDepth]):
// a response nested deeper is not read (ok false), so the request keeps its
// reservation.
func (w *Weigher) ParseUsage(k Kind, body []byte) (Usage, bool) {
	return parseUsage(k, body, w.maxDepth)
}

func parseUsage(k Kind, body []byte, maxDepth int) (Usage, bool) {
	switch k {
	case KindChat, KindCompletions:
		return parseChatUsage(body, maxDepth)
	case KindResponses:
		return parseResponsesUsage(body, maxDepth)
	case KindEmbeddings:
		return parseEmbeddingsUsage(body, maxDepth)
	case KindMessages:
		return parseMessagesUsage(body, maxDepth)
	}
	return Usage{}, false
}
