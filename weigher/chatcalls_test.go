package weigher

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// callsPerCall is callsArrayTally as it was made before it: rawElements
// finds each call, and callsTally walks it (the reference).
func callsPerCall(enc counter, arr string, check bool) (n int64, ok bool) {
	ok = true
	var fold []byte
	rawElements(arr, func(c gjson.Result) bool {
		t, cok := callsTally(enc, c, check && ok, &fold)
		ok = ok && cok
		n += t
		return true
	})
	return n, ok
}

// callsArrayCases are tool_calls arrays: function and custom calls, other
// members before and after, blanks, escapes, case variants (checked:
// refused), calls that are not objects, a function that is not one, and
// arguments that are not a string.
var callsArrayCases = []string{
	`[]`,
	`[ ]`,
	`[{"id":"call_1","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"rate limits\", \"top_k\": 3}"}}]`,
	`[{"function":{"name":"a","arguments":"{}"}},{"function":{"name":"b","arguments":"{\"x\":1}"}}]`,
	` [ { "id" : "c" , "function" : { "name" : "f" , "arguments" : "x" } } , { "custom" : { "name" : "g" , "input" : "free text" } } ] `,
	"[\n\t{\"function\":{\"arguments\":\"a\\\"b\\\\c\\u00e9\",\"name\":\"f\\n\"},\"type\":\"function\"}\n]",
	`[{"function":{"name":"f","Arguments":"x"}}]`,
	`[{"Function":{"name":"f","arguments":"x"}}]`,
	`[{"function":{"name":"f","arguments":"x"},"ID":"y"}]`,
	`[{"function":{"name":"f","arguments":"x"}},{"function":{"NAME":"g","arguments":"y"}},{"function":{"Name":"h"}}]`,
	`[{"custom":{"name":"g","Input":"x"}}]`,
	`["call",1,null,true,[{"function":{"name":"f"}}],{"function":{"name":"f","arguments":"x"}}]`,
	`[{"function":"not an object","custom":["x"]}]`,
	`[{"function":{"name":"f","arguments":{"query":"an object","n":[1,2,{"k":"v"}]}}}]`,
	`[{"function":{"name":"f","arguments":null}},{"function":{"name":7,"arguments":12.5e3}}]`,
	`[{"function":{}},{},{"custom":{}}]`,
	`[{"id":"a\"b","function":{"name":"f","arguments":"]}"},"x":{"function":{"name":"nested"}}}]`,
	`[{"fun\u0063tion":{"name":"f","arguments":"x"}}]`,
	`[{"function":{"n\u0061me":"f","arguments":"x"}}]`,
}

// sameCallsTally fails t unless callsArrayTally of arr (when it is an
// array that passes the strict scan) gives the reference's count and
// verdict, checked and not.
func sameCallsTally(t *testing.T, enc counter, arr string) {
	t.Helper()
	if jsonscan.Check([]byte(arr), jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
		return
	}
	arr = strings.Trim(arr, " \t\r\n")
	if arr == "" || arr[0] != '[' {
		return
	}
	for _, check := range []bool{true, false} {
		var fold []byte
		got, gotOK := callsArrayTally(enc, arr, check, &fold)
		want, wantOK := callsPerCall(enc, arr, check)
		if got != want || gotOK != wantOK {
			t.Fatalf("%s (check %v): %d, %v; per call %d, %v", arr, check, got, gotOK, want, wantOK)
		}
	}
}

// TestCallsArrayTallySameAsPerCall: the one-pass walk of a message's
// tool calls counts and checks them as the per-call walk does.
func TestCallsArrayTallySameAsPerCall(t *testing.T) {
	enc := testWeigher(t).encoders[EncodingO200k]
	refused := 0
	for _, c := range callsArrayCases {
		sameCallsTally(t, enc, c)
		if _, ok := callsPerCall(enc, c, true); !ok {
			refused++
		}
	}
	if refused < 4 {
		t.Errorf("only %d cases fail the field check", refused)
	}
}

// FuzzCallsArrayTallySameAsPerCall: the same on any array that passes the
// strict scan.
func FuzzCallsArrayTallySameAsPerCall(f *testing.F) {
	for _, c := range callsArrayCases {
		f.Add(c)
	}
	enc := testWeigher(f).encoders[EncodingO200k]
	f.Fuzz(func(t *testing.T, arr string) {
		sameCallsTally(t, enc, arr)
	})
}
