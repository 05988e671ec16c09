package weigher

import (
	"strings"
	"testing"
)

// TestResponsesSplitTextCountedWhole: a Responses stream without a usage
// whose upstream sends each text of its answer at one level only — item
// 0's first part in deltas, its second only in content_part.done, item 1
// only in output_item.done, item 2 only in content_part.added, item 3
// only in the terminal event's output — is counted every text, each once
// (matched by bytes alone, each level fitted in the bytes the deltas
// counted, and the stream was counted about one fifth of its text). An
// honest stream (the same text at every level) is counted once, and two
// items holding the same text are two texts.
func TestResponsesSplitTextCountedWhole(t *testing.T) {
	text := func(w string) string { return strings.TrimSpace(strings.Repeat(w+" ", 40)) }
	a, b, c, d, e := text("alpha"), text("bravo"), text("circa"), text("delta"), text("extra")
	ev := func(typ, rest string) [2]string { return [2]string{typ, `{"type":"` + typ + `"` + rest + `}`} }
	msg := func(parts ...string) string {
		var ps []string
		for _, p := range parts {
			ps = append(ps, `{"type":"output_text","text":"`+p+`"}`)
		}
		return `{"type":"message","role":"assistant","content":[` + strings.Join(ps, ",") + `]}`
	}
	idx := func(i, j int) string {
		return `,"output_index":` + string(rune('0'+i)) + `,"content_index":` + string(rune('0'+j))
	}
	part := func(typ string, i, j int, p string) [2]string {
		return ev(typ, idx(i, j)+`,"part":{"type":"output_text","text":"`+p+`"}`)
	}
	item := func(typ string, i int, m string) [2]string {
		return ev(typ, `,"output_index":`+string(rune('0'+i))+`,"item":`+m)
	}
	deltas := func(i, j int, p string) [][2]string {
		var out [][2]string
		for _, w := range strings.SplitAfter(p, " ") {
			out = append(out, ev("response.output_text.delta", idx(i, j)+`,"delta":"`+w+`"`))
		}
		return out
	}
	completed := func(out string) [2]string {
		return ev("response.completed", `,"response":{"status":"completed","output":[`+out+`]}`)
	}
	var split [][2]string
	split = append(split, item("response.output_item.added", 0, msg()), part("response.content_part.added", 0, 0, ""))
	split = append(split, deltas(0, 0, a)...)
	split = append(split,
		part("response.content_part.done", 0, 0, ""), // a lenient upstream's empty part
		part("response.content_part.done", 0, 1, b),
		item("response.output_item.done", 0, msg("", "")),
		item("response.output_item.done", 1, msg(c)),
		item("response.output_item.added", 2, msg()), part("response.content_part.added", 2, 0, d),
		completed(msg()+`,`+msg()+`,`+msg()+`,`+msg(e)))
	var honest [][2]string
	for i, p := range []string{a, b} {
		honest = append(honest, item("response.output_item.added", i, msg()), part("response.content_part.added", i, 0, ""))
		honest = append(honest, deltas(i, 0, p)...)
		honest = append(honest, ev("response.output_text.done", idx(i, 0)+`,"text":"`+p+`"`),
			part("response.content_part.done", i, 0, p), item("response.output_item.done", i, msg(p)))
	}
	honest = append(honest, completed(msg(a)+`,`+msg(b)))
	twice := [][2]string{item("response.output_item.done", 0, msg(a)), item("response.output_item.done", 1, msg(a)), completed("")}
	twiceInOutput := append(deltas(0, 0, a), completed(msg(a)+`,`+msg(a)))
	for _, tc := range []struct {
		name   string
		events [][2]string
		want   string
	}{
		{name: "split across levels", events: split, want: a + b + c + d + e},
		{name: "honest", events: honest, want: a + b},
		{name: "the same text in two items", events: twice, want: a + a},
		{name: "the same text in two output items, one streamed", events: twiceInOutput, want: a + a},
	} {
		s := NewStream(KindResponses)
		var got strings.Builder
		for _, e := range tc.events {
			u := s.Event([]byte(e[0]), []byte(e[1]))
			got.WriteString(u.Text)
		}
		if got.Len() != len(tc.want) || strings.Count(got.String(), "a") != strings.Count(tc.want, "a") {
			t.Errorf("%s: counted %d bytes (%q), want %d (%q)", tc.name, got.Len(), abbrev(got.String()), len(tc.want), abbrev(tc.want))
		}
	}
}
