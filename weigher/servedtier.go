package weigher

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/spec"
)

// servedTierNames are the service tier names an answer names most often
// (OpenAI's "default", "priority", "flex", "scale" and the "auto" of a
// request; "standard"; Groq's "on_demand"), kept without a copy: an answer
// naming one costs no allocation.
var servedTierNames = [...]string{"default", "priority", "flex", "scale", "auto", "standard", "on_demand"}

// servedTier is the spec.Usage.ServiceTier of an answer whose top-level
// service_tier member's value is raw, as written in a document that passed
// jsonscan's check ("" when the member is absent): "" for null (or an
// empty string), the name for a string of at most
// spec.MaxServiceTierBytes bytes (decoded when it holds an escape; one of
// servedTierNames taken without allocation, another copied out of the
// body), spec.TierUnread for anything else (a longer string, a number, an
// object...), which prices as the dearest tier. It never keeps raw.
func servedTier(raw string) string {
	switch {
	case raw == "" || raw == "null":
		return ""
	case len(raw) < 2 || raw[0] != '"':
		return spec.TierUnread
	}
	name := raw[1 : len(raw)-1]
	if strings.IndexByte(name, '\\') >= 0 {
		if len(name) > 6*spec.MaxServiceTierBytes {
			return spec.TierUnread // longer than the limit however it decodes
		}
		name = gjson.Parse(raw).Str
	}
	for _, n := range servedTierNames {
		if name == n {
			return n
		}
	}
	if len(name) > spec.MaxServiceTierBytes {
		return spec.TierUnread
	}
	return strings.Clone(name)
}

// joinTiers is the service tier of two readings of one answer that name
// a and b (two members of the name, two chunks of one stream): the one
// named when the other names none or both name the same, else
// spec.TierUnread (the upstream contradicts itself: priced at the
// dearest).
func joinTiers(a, b string) string {
	switch {
	case a == b || b == "":
		return a
	case a == "":
		return b
	}
	return spec.TierUnread
}

// AnswerServedTier is the service tier a whole JSON answer body names in
// its top-level service_tier member, read as the usage readers read it
// (servedTier: "" for none or null, a name of at most
// spec.MaxServiceTierBytes bytes, spec.TierUnread for anything else), for
// an answer settled without a usage (its text counted instead): served at
// priority, it costs priority's prices all the same. Body must have passed
// jsonscan's check (Weigher.AnswerOutputTokens counted it). It never keeps
// body.
func AnswerServedTier(body []byte) string {
	return servedTier(gjson.GetBytes(body, "service_tier").Raw)
}

// ServedTierOf is the service tier an answer names in a service_tier
// member whose value is raw (the value's bytes, JSON whitespace around it
// allowed), read as the usage readers read it: "" for none (raw empty) or
// null, the name of a string of at most spec.MaxServiceTierBytes bytes, an
// escape decoded, spec.TierUnread for anything else (a longer string, a
// number, an object, bytes that are not a JSON value), which prices as the
// dearest tier. For a member read as it passes, unchecked (an answer
// relayed unread); it never keeps raw.
func ServedTierOf(raw []byte) string {
	raw = bytes.Trim(raw, " \t\r\n")
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] != '"' {
		return spec.TierUnread // not a string as written
	}
	return servedTier(string(raw))
}

// JoinServedTiers is the service tier of two readings of one answer that
// name a and b (two chunks of one stream, two members of the name): the one
// named when the other names none or both name the same, else
// spec.TierUnread (priced at the dearest).
func JoinServedTiers(a, b string) string { return joinTiers(a, b) }
