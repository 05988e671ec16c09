package weigher

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// Fault is why a request body cannot be weighed exactly as every upstream
// reads it; the proxy refuses such a body on a weighed endpoint rather than
// forward what it could not weigh. The zero value, FaultNone, means the body
// was weighed. Each fault has an API error code ([Fault.Code]), the
// `code` of the 400 the caller gets.
//
// Lenient upstreams read more than strict JSON (vLLM, LiteLLM and many
// OpenAI-compatible servers parse with Python's json.loads, which takes
// NaN, a byte-order mark, UTF-16 and UTF-32; Go servers use encoding/json,
// which turns invalid UTF-8 into U+FFFD and matches keys to fields
// ignoring case), so llmguard weighs only a UTF-8 JSON object in RFC 8259's
// strict syntax whose every reading is the same.
type Fault uint8

const (
	// FaultNone: the body was weighed.
	FaultNone Fault = iota
	// FaultInvalidJSON: not JSON in RFC 8259's strict grammar: NaN or
	// Infinity, a comment, single quotes, a trailing comma, data after the
	// value, a text cut short, an empty body…
	FaultInvalidJSON
	// FaultNotObject: valid JSON whose top level is not an object.
	FaultNotObject
	// FaultNotUTF8: not UTF-8 (RFC 8259 §8.1): UTF-16 or UTF-32 text, or
	// bytes that are not valid UTF-8.
	FaultNotUTF8
	// FaultByteOrderMark: a UTF-8 byte-order mark opens the body (RFC 8259
	// §8.1: senders must not add one).
	FaultByteOrderMark
	// FaultDuplicateKey: an object names a key twice ([DuplicateKeys]).
	FaultDuplicateKey
	// FaultCaseVariantKey: an object holds two keys that differ only in
	// case ("max_tokens" and "MAX_TOKENS"), or an object llmguard reads
	// holds a key that is one of its fields only when case is ignored
	// ("Model", "MAX_TOKENS" alone): a decoder that ignores case (Go's
	// encoding/json) reads it as the field, llmguard does not.
	FaultCaseVariantKey
	// FaultTooDeep: the body nests more arrays and objects than
	// [Options.MaxDepth].
	FaultTooDeep
	// FaultModelOutsideBody: the body names, beside its "model", other
	// models the upstream may serve and bill instead (a member in
	// [FallbackModelFields]: OpenRouter's "models", the "fallbacks" of
	// LiteLLM's proxy and of OpenRouter's Messages API…), while llmguard
	// prices, matches rules and settles on "model" alone.
	FaultModelOutsideBody
	// FaultExtraBody: the body's "extra_body" holds members other than
	// Gemini's "google" (or is not an object, or is "extra_body" in
	// another case): gateways such as LiteLLM's proxy merge them over the
	// top-level fields llmguard weighs (see extrabody.go).
	FaultExtraBody
	// FaultGatewayRetries: the body asks a gateway to retry the call
	// itself (a positive "num_retries" or "max_retries", in any case:
	// [GatewayRetryFields]), each attempt billed upstream, while llmguard
	// reserves and settles one.
	FaultGatewayRetries

	// numFaults counts the faults above and sizes the table.
	numFaults
)

// faultRow is everything known about one Fault.
type faultRow struct {
	// code is the API error code ([Fault.Code]).
	code string
	// what says the fault in a sentence, for the caller's message.
	what string
}

// faults is the table of faults, indexed by Fault.
var faults = [numFaults]faultRow{
	FaultNone:           {"", ""},
	FaultInvalidJSON:    {"invalid_json", "The request body is not JSON in strict RFC 8259 syntax"},
	FaultNotObject:      {"json_not_object", "The request body is JSON, but not a JSON object"},
	FaultNotUTF8:        {"invalid_utf8", "The request body is not UTF-8 (RFC 8259 §8.1)"},
	FaultByteOrderMark:  {"json_bom", "The request body starts with a byte-order mark, which RFC 8259 §8.1 forbids"},
	FaultDuplicateKey:   {"duplicate_key", "The JSON body names a key twice in one object"},
	FaultCaseVariantKey: {"case_variant_key", "The JSON body has a key that differs only in case from another key or from a field llmguard reads"},
	FaultTooDeep:        {"json_too_deep", "The JSON body nests more arrays and objects than llmguard accepts (its max_json_depth)"},
	FaultModelOutsideBody: {"model_outside_body", "The request body names models beside its \"model\" that the upstream may serve and bill instead " +
		"(model fallbacks), while llmguard prices the body's \"model\" alone"},
	FaultExtraBody: {"extra_body", "The request body's \"extra_body\" holds members other than \"google\", which a gateway merges over the " +
		"top-level fields llmguard weighs"},
	FaultGatewayRetries: {"gateway_retries", "The request body asks the gateway to retry the call itself, and an upstream may bill " +
		"every attempt while llmguard counts one"},
}

// row is f's row; a value beyond the table reads as FaultInvalidJSON.
func (f Fault) row() faultRow {
	if f < numFaults {
		return faults[f]
	}
	return faults[FaultInvalidJSON]
}

// Code is the API error code of f: "invalid_json", "json_not_object",
// "invalid_utf8", "json_bom", "duplicate_key", "case_variant_key",
// "json_too_deep", "model_outside_body", "extra_body", "gateway_retries";
// "" for FaultNone.
func (f Fault) Code() string { return f.row().code }

// String is f's code, "none" for FaultNone.
func (f Fault) String() string {
	if f == FaultNone {
		return "none"
	}
	return f.Code()
}

// Message is f's sentence for the caller, detail (where and what, from
// Estimate.FaultDetail) appended when not empty.
func (f Fault) Message(detail string) string {
	m := f.row().what
	if detail != "" {
		m += ": " + detail
	}
	return m + "."
}

// maxShownKey bounds, in bytes, a key quoted back in a fault's detail.
const maxShownKey = 64

// scanFault is the fault and detail of a body that jsonscan refused.
func scanFault(body []byte, err error) (Fault, string) {
	e, ok := err.(*jsonscan.Error)
	if !ok {
		return FaultInvalidJSON, ""
	}
	at := e.Offset
	switch e.Reason {
	case jsonscan.TooDeep:
		return FaultTooDeep, fmt.Sprintf("more than %d levels at byte %d", e.MaxDepth, at)
	case jsonscan.ByteOrderMark:
		return FaultByteOrderMark, "EF BB BF at byte 0"
	case jsonscan.NotUTF8:
		return FaultNotUTF8, fmt.Sprintf("byte %d (0x%02X) is not UTF-8 text; send UTF-8, not UTF-16, UTF-32 or a legacy encoding", at, byteAt(body, at))
	case jsonscan.DuplicateKey:
		return FaultDuplicateKey, "key " + keyAt(body, at) + " at byte " + strconv.Itoa(at)
	case jsonscan.CaseVariantKey:
		return FaultCaseVariantKey, "key " + keyAt(body, at) + " at byte " + strconv.Itoa(at) + " differs only in case from another key of its object"
	case jsonscan.Truncated:
		if len(bytesTrimSpace(body)) == 0 {
			return FaultInvalidJSON, "the body is empty"
		}
		return FaultInvalidJSON, fmt.Sprintf("the JSON text ends early (byte %d)", at)
	case jsonscan.Trailing:
		return FaultInvalidJSON, fmt.Sprintf("data follows the JSON value at byte %d", at)
	}
	return FaultInvalidJSON, syntaxDetail(body, at)
}

// syntaxDetail names what stands at the byte where the grammar failed.
func syntaxDetail(body []byte, at int) string {
	c := byteAt(body, at)
	var what string
	switch {
	case c == 'N' || c == 'I' || c == '-' && at+1 < len(body) && body[at+1] == 'I':
		what = "NaN and Infinity are not JSON numbers"
	case c == '/' || c == '#':
		what = "comments are not JSON"
	case c == '\'':
		what = "JSON strings take double quotes"
	case c >= 0x20 && c < 0x7f:
		what = "unexpected " + strconv.QuoteRune(rune(c))
	default:
		what = fmt.Sprintf("unexpected byte 0x%02X", c)
	}
	return fmt.Sprintf("%s (byte %d)", what, at)
}

func byteAt(b []byte, i int) byte {
	if i >= 0 && i < len(b) {
		return b[i]
	}
	return 0
}

// keyAt is the key whose opening quote is at off, quoted and cut to
// maxShownKey bytes.
func keyAt(body []byte, off int) string {
	if off < 0 || off >= len(body) {
		return `""`
	}
	return shownKey(gjson.Parse(bodyString(body[off:])).Str)
}

// shownKey quotes key for a message, cut to maxShownKey bytes.
func shownKey(key string) string {
	if len(key) > maxShownKey {
		key = key[:maxShownKey] + "…"
	}
	return strconv.Quote(key)
}

func bytesTrimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// notObjectDetail names the JSON type of a valid body's top level.
func notObjectDetail(root gjson.Result) string {
	switch {
	case root.IsArray():
		return "its top level is an array"
	case root.Type == gjson.String:
		return "its top level is a string"
	case root.Type == gjson.Number:
		return "its top level is a number"
	case root.Type == gjson.True, root.Type == gjson.False:
		return "its top level is a boolean"
	}
	return "its top level is null"
}
