package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTopUsageEscapesInText: an answer whose strings hold escaped quotes
// and backslashes, some of them spelling a usage member ("\"usage\":{…}"),
// yields its one top-level usage and nothing from its text, whole and in
// pieces of every size from 1 to 16 bytes: a scan that stepped past a
// backslash without reading what it escapes would take an escaped quote
// for the string's end and read the text's decoy as members.
func TestTopUsageEscapesInText(t *testing.T) {
	decoy := `\",\"usage\":{\"completion_tokens\":1},\"x\":\"`
	for _, body := range []string{
		`{"id":"` + decoy + `","usage":{"completion_tokens":3000}}`,
		`{"choices":[{"message":{"content":"say \"hi\" \\ ` + decoy + `"}}],"usage":{"completion_tokens":3000}}`,
		`{"a":"\\","b":"\\\"","c":"` + decoy + `\\\\","usage":{"completion_tokens":3000}}`,
		`{"a":"` + strings.Repeat(`\"`, 40) + decoy + `","usage":{"completion_tokens":3000}}`,
	} {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: not JSON: %v", body, err)
		}
		for size := 1; size <= 16; size++ {
			got, _ := scanInPieces([]byte(body), size)
			if len(got) != 1 || got[0] != string(doc["usage"]) {
				t.Errorf("%s in pieces of %d: usages %q, want only %s", body, size, got, doc["usage"])
			}
		}
	}
}
