package weigher

import (
	"math"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// scalarCases are raw values around parsedScalar's two fast paths (a
// string without a backslash, an integer of at most 15 digits) and just
// past them, where gjson.Parse decides.
var scalarCases = []string{
	`"gpt-4o-mini"`, `""`, `"a"`, `"é 日本"`, `"a\"b"`, `"a\\b"`, `"\u0041"`, `"a"b"`, `"abc`, `abc"`, `"`, `" "`,
	`0`, `7`, `256`, `007`, `123456789012345`, `1234567890123456`, `99999999999999999999`, `-1`, `+1`, `1.5`, `1e3`,
	`1 `, ` 1`, `12a`, `null`, `true`, `false`, `nan`, `NaN`, `inf`, `{}`, `[1]`, ``, ` `, `"x" `,
}

// sameAsParse fails t unless parsedScalar(raw) is gjson.Parse(raw), field
// for field.
func sameAsParse(t *testing.T, raw string) {
	t.Helper()
	got, want := parsedScalar(raw), gjson.Parse(raw)
	if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || math.Float64bits(got.Num) != math.Float64bits(want.Num) ||
		got.Index != want.Index || !slices.Equal(got.Indexes, want.Indexes) {
		t.Fatalf("parsedScalar(%q) = %+v, gjson.Parse %+v", raw, got, want)
	}
}

// TestParsedScalarSameAsGJSON: parsedScalar gives gjson.Parse's Result
// for strings, integers and what lies just past its fast paths.
func TestParsedScalarSameAsGJSON(t *testing.T) {
	for _, raw := range scalarCases {
		sameAsParse(t, raw)
	}
}

// FuzzParsedScalarSameAsGJSON: the same for any text.
func FuzzParsedScalarSameAsGJSON(f *testing.F) {
	for _, raw := range scalarCases {
		f.Add(raw)
	}
	f.Fuzz(sameAsParse)
}
