package weigher

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// tailBody is a chat body of n turns whose members after "messages" are
// tail (each led by ',').
func tailBody(n int, tail string) []byte {
	msgs := []string{`{"role":"system","content":"You are a careful assistant. Use the tools when a question needs data."}`}
	for i := range n {
		role := [...]string{"user", "assistant"}[i%2]
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"turn %d: the token bucket refills at a steady rate, Задача 漢字 %d"}`, role, i, i))
	}
	return []byte(`{"model":"gpt-4o-mini","messages":[` + strings.Join(msgs, ",") + `]` + tail + `}`)
}

// tailTools is a tools list of two function tools, as agents send it.
const tailTools = `,"tools":[{"type":"function","function":{"name":"search_docs","description":"Search the documentation index and return the matching passages","parameters":{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"top_k":{"type":"integer"}},"required":["query"]}}},{"type":"function","function":{"name":"run_sql","description":"Run a read-only SQL query","parameters":{"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}}}]`

// TestTailSameEstimates: a body that resumes from the checkpoint of the
// one before it, and whose members after "messages" are that body's, has
// them vouched (the scan stops, the walk does not check them, the tools
// count is the checkpoint's) with the estimate of a full weighing; a tail
// that differs in one byte, in length, or a duplicate key the tail brings
// is weighed (or refused) as a full weighing does. Each step weighs the
// conversation's previous body first (which files its checkpoint).
func TestTailSameEstimates(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	const tail = tailTools + `,"max_tokens":256,"temperature":0.2`
	oneByte := strings.Replace(tail, "read-only", "read-onlY", 1)
	deep := `,"tools":[{"type":"function","function":{"name":"f","parameters":` + strings.Repeat(`{"a":`, 20) + `1` + strings.Repeat(`}`, 20) + `}}]`
	steps := []struct {
		name      string
		prev, cur []byte
		vouched   bool
	}{
		{"next turn", tailBody(4, tail), tailBody(5, tail), true},
		{"next turn, trailing space", append(tailBody(4, tail), ' '), append(tailBody(5, tail), ' '), true},
		{"tools one byte off", tailBody(4, tail), tailBody(5, oneByte), false},
		{"tail longer", tailBody(4, tail), tailBody(5, tail+" "), false},
		{"max_tokens changed", tailBody(4, tail), tailBody(5, strings.Replace(tail, "256", "257", 1)), false},
		{"tail shorter", tailBody(4, tail), tailBody(5, tailTools), false},
		{"model named in the tail", tailBody(4, tail+`,"n":2`), tailBody(5, tail+`,"n":2`), true},
		{"tools only", tailBody(4, tailTools), tailBody(5, tailTools), true},
		{"no tools", tailBody(4, `,"max_tokens":256`), tailBody(5, `,"max_tokens":256`), true},
		{"deep tools", tailBody(4, deep), tailBody(5, deep), true},
		{"a key of the prefix again", tailBody(4, tail), tailBody(5, tail+`,"model":"gpt-4o"`), false},
		{"a key of the prefix in another case", tailBody(4, tail), tailBody(5, tail+`,"Model":"gpt-4o"`), false},
		{"many members", tailBody(4, tail+`,"a":1,"b":2,"c":3,"d":4`), tailBody(5, tail+`,"a":1,"b":2,"c":3,"d":4`), false},
		{"shorter, resumed at an earlier point", tailBody(6, tail), tailBody(4, tail), true},
	}
	for _, s := range steps {
		w := cachedWeigher(t, 4<<20)
		p := plain(t)
		w.Chat(s.prev)
		before := w.cache.tails.Load()
		got, want := w.Chat(s.cur), p.Chat(s.cur)
		if got != want {
			t.Errorf("%s: %+v, plain %+v", s.name, got, want)
		}
		if vouched := w.cache.tails.Load() > before; vouched != s.vouched {
			t.Errorf("%s: tail vouched %v, want %v", s.name, vouched, s.vouched)
		}
		// Again: the body now resumes from its own checkpoint.
		if got := w.Chat(s.cur); got != want {
			t.Errorf("%s again: %+v, plain %+v", s.name, got, want)
		}
	}
}

// TestTailNearMisses: bodies that differ from the one that filed the
// checkpoint only after its "messages" (a byte of the tools list, a key
// named twice across the tail, a list too deep, another model) weigh as a
// full weighing does, byte by byte over the tail.
func TestTailNearMisses(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	const tail = tailTools + `,"max_tokens":256`
	base := tailBody(5, tail)
	k := bytes.LastIndex(base, []byte(`],"tools"`)) + 1
	deep := `,"tools":[{"type":"function","function":{"name":"f","parameters":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}}]`
	edits := []string{
		tail + `,"max_tokens":256`,
		tail + `,"max_Tokens":256`,
		strings.Replace(tail, `"query"`, `"QUERY"`, 1),
		strings.Replace(tail, `"type":"object"`, `"type":"object","type":"object"`, 1),
		deep,
		tail + `,"model":"gpt-4"`,
		tail + `,"functions":[]`,
		tail + `,"TEMPERATURE":0.2`,
		tail + `,"extra_body":{"models":["gpt-4o","claude-3-opus"]}`,
		tail + `,"messages":[]`,
		tail[:len(tail)-1],
		tail + `,`,
	}
	for i, e := range edits {
		w := cachedWeigher(t, 4<<20)
		p := plain(t)
		w.Chat(tailBody(4, tail))
		body := append(append(append([]byte(nil), base[:k]...), e...), '}')
		if got, want := w.Chat(body), p.Chat(body); got != want {
			t.Errorf("edit %d %q: %+v, plain %+v", i, e, got, want)
		}
	}
}

// FuzzResumeTail weighs a body, then the body with one more turn and its
// members after "messages" edited, through the cache and plain: the same
// estimate, whether the tail is vouched or not.
func FuzzResumeTail(f *testing.F) {
	const tail = tailTools + `,"max_tokens":256,"temperature":0.2`
	f.Add([]byte(tail), uint16(0), uint16(0), []byte(``))
	f.Add([]byte(tail), uint16(10), uint16(1), []byte(`X`))
	f.Add([]byte(tail), uint16(0), uint16(0), []byte(`,"model":"x"`))
	f.Add([]byte(tail), uint16(uint16(len(tail))), uint16(0), []byte(`,"Max_tokens":1`))
	w := cachedWeigher(f, 1<<20)
	p := plain(f)
	f.Fuzz(func(t *testing.T, tl []byte, at, cut uint16, insert []byte) {
		w.Chat(tailBody(3, string(tl))) // files its checkpoint, with its tail
		a := min(int(at), len(tl))
		c := min(a+int(cut), len(tl))
		edited := append(append(append([]byte(nil), tl[:a]...), insert...), tl[c:]...)
		for _, body := range [][]byte{tailBody(4, string(tl)), tailBody(4, string(edited))} {
			if got, want := w.Chat(body), p.Chat(body); got != want {
				t.Fatalf("%q: %+v, plain %+v", body, got, want)
			}
		}
	})
}

// TestRoleTokensSameAsCounted: a role's count taken from the counter's
// table (roleTokens) is the count of its text, for every encoding with a
// table, and any other role (escaped, unknown) is counted, one that is not
// a string by its JSON text.
func TestRoleTokensSameAsCounted(t *testing.T) {
	w := testWeigher(t)
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		bc, ok := w.chatRules(model).counter(w).(*bpeCounter)
		if !ok {
			t.Fatalf("%s: not a bpeCounter", model)
		}
		mc := bc.takeMemo()
		for _, r := range append(chatRoles[:], `us\u0065r`, "User", "critic", "", "user ") {
			v := rawValue(`"` + r + `"`)
			if got, want := roleTokens(mc, v), countRaw(mc, v); got != want || got <= 0 && r != "" {
				t.Errorf("%s %q: %d tokens, counted %d", model, r, got, want)
			}
		}
		// A role the API refuses (a number, an object) is weighed by its
		// JSON text, as a lenient upstream writes it out (adv10).
		for _, raw := range []string{`12`, `{"name":"user"}`} {
			v := rawValue(raw)
			if got, want := roleTokens(mc, v), countText(mc, raw); got != want || got <= 0 {
				t.Errorf("%s: role %s: %d tokens, want its JSON text's %d", model, raw, got, want)
			}
		}
		bc.putMemo(mc)
	}
}
