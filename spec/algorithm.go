package spec

// Algorithm is how a rate limit that is not a calendar quota counts its
// units (limits[].algorithm). The zero value is TokenBucket, the default
// when a config names none. How each counts, and what it admits over a
// span, is package bucket's to state (bucket.Limit) and README's "Window
// algorithms".
type Algorithm uint8

// Algorithms, in the order of algorithmNames.
const (
	TokenBucket   Algorithm = iota // capacity units at most, refilled at rate units per period
	SlidingWindow                  // the sliding-window counter over windows aligned on the Unix epoch
	FixedWindow                    // at most capacity units in each window aligned on the Unix epoch
)

// algorithmNames is the config name of each Algorithm, indexed by its
// value: the one table of algorithms.
var algorithmNames = names[Algorithm]{
	TokenBucket:   "token_bucket",
	SlidingWindow: "sliding_window",
	FixedWindow:   "fixed_window",
}

// String is the algorithm's config name (token_bucket, sliding_window,
// fixed_window); a value outside the enum is "unknown(<n>)".
func (a Algorithm) String() string { return algorithmNames.of(a) }

// ParseAlgorithm returns the Algorithm whose config name is s; false if
// none is (the empty s included: a config that names none means
// TokenBucket, which is its caller's default to apply).
func ParseAlgorithm(s string) (Algorithm, bool) { return algorithmNames.parse(s) }

// AlgorithmNames returns every algorithm's config name in value order (a
// fresh slice the caller may keep).
func AlgorithmNames() []string { return algorithmNames.list() }

// OnLimit is what a request a limit denies does (limits[].on_limit). The
// zero value is OnLimitFail, the default.
type OnLimit uint8

// What a denied request does, in the order of onLimitNames.
const (
	OnLimitFail OnLimit = iota // answered 429 at once
	OnLimitWait                // held until the limit admits it, at most max_wait, then 429
)

// onLimitNames is the config name of each OnLimit, indexed by its value:
// the one table of on_limit values.
var onLimitNames = names[OnLimit]{OnLimitFail: "fail", OnLimitWait: "wait"}

// String is the value's config name ("fail", "wait"); a value outside the
// enum is "unknown(<n>)".
func (o OnLimit) String() string { return onLimitNames.of(o) }

// ParseOnLimit returns the OnLimit whose config name is s; false if none
// is (the empty s included: the caller's default is OnLimitFail).
func ParseOnLimit(s string) (OnLimit, bool) { return onLimitNames.parse(s) }

// OnLimitNames returns every on_limit value's config name in value order
// (a fresh slice the caller may keep).
func OnLimitNames() []string { return onLimitNames.list() }

// ChatOutputField is the member a chat completions request that names no
// output maximum gets one written in (upstreams[].chat_output_field): the
// two names OpenAI's chat API reads
// (https://platform.openai.com/docs/api-reference/chat/create:
// max_completion_tokens, and max_tokens, deprecated there but the one
// OpenAI-compatible servers read). The zero value, ChatOutputAuto, leaves
// the choice to the upstream's host (package proxy).
type ChatOutputField uint8

// Chat output members, in the order of chatOutputFieldNames.
const (
	ChatOutputAuto          ChatOutputField = iota // unset: chosen by the upstream's host
	ChatMaxTokens                                  // "max_tokens"
	ChatMaxCompletionTokens                        // "max_completion_tokens"
)

// chatOutputFieldNames is each ChatOutputField's member name, indexed by
// its value (ChatOutputAuto has none): the one table of them.
var chatOutputFieldNames = names[ChatOutputField]{
	ChatMaxTokens:           "max_tokens",
	ChatMaxCompletionTokens: "max_completion_tokens",
}

// String is the member's name; "" for ChatOutputAuto; a value outside the
// enum is "unknown(<n>)".
func (c ChatOutputField) String() string { return chatOutputFieldNames.of(c) }

// ParseChatOutputField returns the ChatOutputField whose member name is s;
// false if none is (the empty s included: unset is ChatOutputAuto).
func ParseChatOutputField(s string) (ChatOutputField, bool) { return chatOutputFieldNames.parse(s) }

// ChatOutputFieldNames returns the member names in value order,
// ChatOutputAuto's empty one left out (a fresh slice the caller may keep).
func ChatOutputFieldNames() []string { return chatOutputFieldNames.list() }
