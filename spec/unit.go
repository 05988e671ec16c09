package spec

import (
	"strconv"
	"strings"
)

// Unit is what a limit counts. The zero value is UnitRequests.
type Unit uint8

// Units a limit may count, in the order of unitNames.
const (
	UnitRequests     Unit = iota // 1 per call
	UnitTokens                   // input + output tokens
	UnitInputTokens              // input tokens (cached included)
	UnitOutputTokens             // output tokens (reasoning included)
	UnitUSD                      // micro-USD
	UnitConcurrent               // requests in flight at once (1 per call, given back when it ends)
)

// unitNames is the config name of each Unit, indexed by its value: the one
// table of units.
var unitNames = names[Unit]{
	UnitRequests:     "requests",
	UnitTokens:       "tokens",
	UnitInputTokens:  "input_tokens",
	UnitOutputTokens: "output_tokens",
	UnitUSD:          "usd",
	UnitConcurrent:   "concurrent",
}

// String is the unit's config name; UnitUSD is "usd" although its amounts
// are micro-USD. A value outside the enum is "unknown(<n>)".
func (u Unit) String() string { return unitNames.of(u) }

// MicroUSD is the name the ledger, budget alerts and usage reports give the
// amounts of UnitUSD, which are micro-USD (a config says "usd").
const MicroUSD = "micro_usd"

// AmountUnit names u's amounts where they are written as numbers (ledger
// records, alert payloads, usage reports): MicroUSD for UnitUSD, else u's
// config name.
func (u Unit) AmountUnit() string {
	if u == UnitUSD {
		return MicroUSD
	}
	return u.String()
}

// Amount is n units of u as a caller reads them in an error message:
// "1200 tokens", "3 requests", and for UnitUSD (micro-USD) dollars to the
// micro-dollar, exactly: Amount(UnitUSD, 34296) is "$0.034296",
// Amount(UnitUSD, -1500000) "-$1.500000". A unit outside the enum prints
// its String.
func (u Unit) Amount(n int64) string {
	if u != UnitUSD {
		return strconv.FormatInt(n, 10) + " " + strings.ReplaceAll(u.String(), "_", " ")
	}
	sign, m := "", uint64(n)
	if n < 0 {
		sign, m = "-", -m // two's complement: exact for math.MinInt64 too
	}
	frac := strconv.FormatUint(m%1_000_000, 10)
	return sign + "$" + strconv.FormatUint(m/1_000_000, 10) + "." + strings.Repeat("0", 6-len(frac)) + frac
}

// unitTokens counts a token unit's tokens in a usage, indexed by Unit; nil
// for the units that do not count tokens (requests, usd). Negative counts
// count as zero.
var unitTokens = []func(Usage) int64{
	UnitTokens:       func(t Usage) int64 { return max(t.InputTokens, 0) + max(t.OutputTokens, 0) },
	UnitInputTokens:  func(t Usage) int64 { return max(t.InputTokens, 0) },
	UnitOutputTokens: func(t Usage) int64 { return max(t.OutputTokens, 0) },
	UnitUSD:          nil,
}

// PerCall reports whether the unit counts calls, whatever they weigh:
// requests (1 per call) and concurrent (1 slot per call in flight).
func (u Unit) PerCall() bool { return u == UnitRequests || u == UnitConcurrent }

// CountsTokens reports whether the unit counts tokens of any kind.
func (u Unit) CountsTokens() bool { return int(u) < len(unitTokens) && unitTokens[u] != nil }

// Tokens is t's size in token unit u, in tokens (input and output for
// tokens, cached input included; output with reasoning included); 0 for a
// unit that does not count tokens (see CountsTokens).
func (u Unit) Tokens(t Usage) int64 {
	if !u.CountsTokens() {
		return 0
	}
	return unitTokens[u](t)
}

// ParseUnit returns the Unit whose config name is s; false if none is.
func ParseUnit(s string) (Unit, bool) { return unitNames.parse(s) }

// UnitNames returns every unit's config name, in value order (a fresh
// slice the caller may keep).
func UnitNames() []string { return unitNames.list() }
