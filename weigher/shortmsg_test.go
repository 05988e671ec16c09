package weigher

import (
	"strings"
	"testing"
)

// TestShortMessagesCheckedWhenCounted: a chat body whose short new
// messages (under minCachedBytes, not remembered) are field-checked in the
// walk that counts them is weighed, refused or not, as the plain weigher
// weighs it, with the same key named: variants in a short message alone,
// beside long ones, after a variant in a member before the messages, in a
// body resumed from a remembered prefix, and none.
func TestShortMessagesCheckedWhenCounted(t *testing.T) {
	long := func(i int) string {
		return `{"role":"user","content":"message ` + strings.Repeat("long enough to be remembered ", 3) + string(rune('a'+i)) + `"}`
	}
	short := `{"role":"user","content":"hi"}`
	bad := `{"role":"user","Content":"hi"}`
	bad2 := `{"ROLE":"user","content":"yo"}`
	badCall := `{"role":"assistant","tool_calls":[{"function":{"Name":"f"}}]}`
	for _, m := range []string{short, bad, bad2, badCall} {
		if len(m) >= minCachedBytes {
			t.Fatalf("%s: not short", m)
		}
	}
	msgs := []string{long(0), long(1), long(2)}
	body := func(pre string, ms []string) []byte {
		return []byte(`{"model":"gpt-4o"` + pre + `,"messages":[` + strings.Join(ms, ",") + `],"max_tokens":50}`)
	}
	w := cachedWeigher(t, 1<<20)
	p := plain(t)
	for i, tc := range []struct {
		first, second []byte
		refused       bool
	}{
		{body("", msgs), body("", append(msgs, short)), false},
		{body("", msgs), body("", append(msgs, short, long(3), short)), false},
		{body("", msgs), body("", append(msgs, bad)), true},
		{body("", msgs), body("", append(msgs, short, bad2)), true},
		{body("", msgs), body("", append(msgs, badCall)), true},
		{body("", msgs), body("", append(msgs, bad, bad2)), true},
		{body("", msgs), body(`,"N":1`, append(msgs, bad)), true},
		{body("", msgs), body("", []string{bad, long(0), long(1)}), true},
		{body("", msgs), body("", []string{short, bad2}), true},
		{body("", msgs), body("", []string{short}), false},
	} {
		w.Chat(tc.first)
		got, want := w.Chat(tc.second), p.Chat(tc.second)
		if got != want {
			t.Errorf("case %d: %+v, plain %+v", i, got, want)
		}
		if got.Parsed == tc.refused {
			t.Errorf("case %d: parsed %v, want %v: %+v", i, got.Parsed, !tc.refused, got)
		}
		sameAsPlain(t, KindChat, tc.second)
	}
}

// TestManyShortMessagesCheckedPastTheCap: past maxDeferredShort short
// messages, the rest are checked apart, and the verdicts are the plain
// weigher's: a variant among the first ones, past the cap, and none.
func TestManyShortMessagesCheckedPastTheCap(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	p := plain(t)
	n := maxDeferredShort + 40
	for _, at := range []int{-1, 3, maxDeferredShort - 1, maxDeferredShort, n - 1} {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = `{"role":"user","content":"hi"}`
		}
		if at >= 0 {
			ms[at] = `{"role":"user","CONTENT":"hi"}`
		}
		b := []byte(`{"model":"gpt-4o","messages":[` + strings.Join(ms, ",") + `]}`)
		got, want := w.Chat(b), p.Chat(b)
		if got != want || got.Parsed != (at < 0) {
			t.Errorf("variant at %d: %+v, plain %+v", at, got, want)
		}
	}
}
