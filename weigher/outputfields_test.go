package weigher

import "testing"

// OutputFields point at exactly the output-maximum values of each flavor,
// whatever the spacing, escapes and member order, through both the laid-out
// scan and gjson's walk; OutputDefaulted and Choices say how OutputTokens
// was made.
func TestOutputFields(t *testing.T) {
	cases := []struct {
		name      string
		kind      Kind
		body      string
		want      []string // the values' text, in body order
		defaulted bool
		choices   int64
	}{
		{name: "chat max_tokens", kind: KindChat, body: `{"model":"gpt-4o","max_tokens":  300 ,"messages":[]}`, want: []string{"300"}, choices: 1},
		{name: "chat both", kind: KindChat, body: ` {"max_completion_tokens":"50","model":"gpt-4o","messages":[],"max_tokens":null,"n":3}`, want: []string{`"50"`, "null"}, choices: 3},
		{name: "chat escaped key", kind: KindChat, body: `{"model":"gpt-4o","max\u005ftokens":7,"messages":[]}`, want: []string{"7"}, choices: 1},
		{name: "chat none", kind: KindChat, body: `{"model":"gpt-4o","messages":[],"n":2}`, defaulted: true, choices: 2},
		{name: "chat null only", kind: KindChat, body: `{"model":"gpt-4o","messages":[],"max_tokens":null}`, want: []string{"null"}, defaulted: true, choices: 1},
		{name: "responses", kind: KindResponses, body: "{\n\"model\":\"gpt-4o\",\"input\":\"hi\",\"max_output_tokens\":\t1000}", want: []string{"1000"}, choices: 1},
		{name: "responses none", kind: KindResponses, body: `{"model":"gpt-4o","input":"hi"}`, defaulted: true, choices: 1},
		{name: "messages", kind: KindMessages, body: `{"max_tokens":1024,"model":"claude-sonnet-4-5","messages":[]}`, want: []string{"1024"}, choices: 1},
		{name: "messages none", kind: KindMessages, body: `{"model":"claude-sonnet-4-5","messages":[]}`, defaulted: true, choices: 1},
		{name: "completions", kind: KindCompletions, body: `{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens" : 64 }`, want: []string{"64"}, choices: 1},
		{name: "completions null, 2 prompts × best_of 3", kind: KindCompletions, body: `{"max_tokens":null,"prompt":["a","b"],"n":2,"best_of":3}`, want: []string{"null"}, defaulted: true, choices: 6},
		{name: "completions -1 escaped key", kind: KindCompletions, body: `{"prompt":"hi","max_\u0074okens":-1}`, want: []string{"-1"}, defaulted: true, choices: 1},
		{name: "completions string 0", kind: KindCompletions, body: `{"prompt":"hi","max_tokens":"0"}`, want: []string{`"0"`}, defaulted: true, choices: 1},
		{name: "completions none", kind: KindCompletions, body: `{"prompt":"hi"}`, defaulted: true, choices: 1},
		{name: "completions echo none", kind: KindCompletions, body: `{"prompt":"hi","echo":true}`, choices: 1},
		{name: "completions echo \"true\" none", kind: KindCompletions, body: `{"prompt":"hi","echo":"true"}`, choices: 1},
	}
	for _, noLayout := range []bool{false, true} {
		w := testWeigher(t)
		if noLayout {
			w = plain(t)
		}
		for _, c := range cases {
			e := w.Weigh(c.kind, []byte(c.body))
			if !e.Parsed {
				t.Fatalf("%s (noLayout %v): not parsed: %v", c.name, noLayout, e.Fault)
			}
			var got []string
			for _, f := range e.OutputFields {
				if f.End != 0 {
					got = append(got, c.body[f.Start:f.End])
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("%s (noLayout %v): fields %q, want %q", c.name, noLayout, got, c.want)
				continue
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("%s (noLayout %v): field %d is %q, want %q", c.name, noLayout, i, got[i], c.want[i])
				}
			}
			if e.OutputDefaulted != c.defaulted || e.Choices != c.choices {
				t.Errorf("%s (noLayout %v): defaulted %v choices %d, want %v %d", c.name, noLayout, e.OutputDefaulted, e.Choices, c.defaulted, c.choices)
			}
		}
	}
}
