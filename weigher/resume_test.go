package weigher

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// resumeStep is one body of a resume timeline: weighed by a weigher whose
// cache holds the checkpoints of the steps before, it must give plain's
// estimate, resuming (or not) as said.
type resumeStep struct {
	name    string
	body    []byte
	resumes bool
}

// runResume weighs each step's body as a chat request with w and with
// plain, checking the estimates are the same and whether w resumed.
func runResume(t *testing.T, w *Weigher, steps []resumeStep) {
	t.Helper()
	runResumeKind(t, w, KindChat, steps)
}

// runResumeKind is runResume for bodies of kind k.
func runResumeKind(t *testing.T, w *Weigher, k Kind, steps []resumeStep) {
	t.Helper()
	p := plain(t)
	for i, s := range steps {
		before := w.CacheStats().Resumed
		got, want := w.Weigh(k, s.body), p.Weigh(k, s.body)
		if got != want {
			t.Fatalf("step %d (%s): resumed weigher %+v, plain %+v", i, s.name, got, want)
		}
		if resumed := w.CacheStats().Resumed > before; resumed != s.resumes {
			t.Errorf("step %d (%s): resumed %v, want %v", i, s.name, resumed, s.resumes)
		}
	}
}

// lastMessageEnd is where the last element of body's "messages" ends: the
// k of its checkpoint.
func lastMessageEnd(t *testing.T, body []byte) int {
	t.Helper()
	i := bytes.Index(body, []byte(`}],"tools"`))
	if i < 0 {
		t.Fatalf("no messages end in %q", body)
	}
	return i + 1
}

// splice is body[:at] + insert + body[at:].
func splice(body []byte, at int, insert string) []byte {
	return []byte(string(body[:at]) + insert + string(body[at:]))
}

// TestResumeGrowingConversations: growing conversations (the weigher's own
// and the agent benchmark's) resume at every turn but the first, with the
// estimate of a full weighing.
func TestResumeGrowingConversations(t *testing.T) {
	w := cachedWeigher(t, 4<<20)
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		var steps []resumeStep
		for i, b := range growingBodies(t, model, 7, 48<<10) {
			steps = append(steps, resumeStep{name: model + " turn", body: b, resumes: i > 0})
		}
		runResume(t, w, steps)
	}
	var steps []resumeStep
	for turns := 1; turns < 60; turns += 3 {
		steps = append(steps, resumeStep{name: "agent", body: agentBodyOf(3, turns, 2), resumes: turns > 1})
	}
	runResume(t, w, steps)
}

// TestResumeRefusals: what follows the resume point is checked as a full
// scan checks it, every refusal found: a repeated top-level key (one
// named before the point too), a key that is a field in another case,
// nesting past the limit, invalid JSON, a body cut short.
func TestResumeRefusals(t *testing.T) {
	w := cachedWeigher(t, 4<<20)
	base := agentBodyOf(4, 6, 2)
	k := lastMessageEnd(t, base)
	msg := `,{"role":"user","content":"one more question, long enough to be remembered by the count cache"}`
	deep := `,{"role":"user","content":` + strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth) + `}`
	steps := []resumeStep{
		{name: "first", body: base},
		{name: "again", body: base, resumes: true},
		{name: "model named twice", body: splice(base, k+1, `,"model":"gpt-4"`), resumes: true},
		{name: "max_tokens named twice", body: splice(base, k+1, `,"max_tokens":1`), resumes: true},
		{name: "messages named twice", body: splice(base, k+1, `,"messages":[]`), resumes: true},
		{name: "MODEL after the point", body: splice(base, k+1, `,"MODEL":"gpt-4"`), resumes: true},
		{name: "Max_Tokens after the point", body: splice(base, k+1, `,"Max_Tokens":9`), resumes: true},
		{name: "a case variant field in a new message", body: splice(base, k, `,{"role":"user","Content":"x"}`), resumes: true},
		{name: "a repeated key in a new message", body: splice(base, k, `,{"role":"user","role":"x"}`), resumes: true},
		{name: "too deep", body: splice(base, k, deep), resumes: true},
		{name: "invalid JSON after the point", body: splice(base, k, `,{"role":}`), resumes: true},
		{name: "not UTF-8 after the point", body: splice(base, k, ",{\"role\":\"\xff\"}"), resumes: true},
		{name: "cut short after the point", body: splice(base, k, msg)[:k+20], resumes: true},
		{name: "cut at the point", body: base[:k], resumes: true},
		{name: "the point is the end: resumed at the point before", body: base[:k-1], resumes: true},
		{name: "trailing data", body: append(bytes.Clone(base), `{}`...), resumes: true},
		{name: "no more messages", body: splice(base, k, `]}`)[:k+2], resumes: true},
		{name: "too many new elements to lay out", body: splice(base, k, strings.Repeat(",{}", 3000)), resumes: true},
		{name: "a number after the last message", body: splice(base, k, `,5`), resumes: true},
		{name: "a longer number", body: splice(base, k, `,5.5`), resumes: true},
		{name: "one more turn", body: splice(base, k, msg), resumes: true},
		{name: "one more turn again", body: splice(base, k, msg), resumes: true},
		{name: "the base: a point of the longer one", body: base, resumes: true},
	}
	runResume(t, w, steps)
}

// TestResumeChangedPrefixes: a body whose bytes before the point differ
// from the remembered ones, or that shares them but is weighed for
// another model, encoding or nesting limit, is weighed as a fresh weigher
// weighs it.
func TestResumeChangedPrefixes(t *testing.T) {
	w := cachedWeigher(t, 4<<20)
	base := agentBodyOf(5, 8, 2)
	k := lastMessageEnd(t, base)
	edited := bytes.Clone(base)
	edited[k-40] = 'X' // a byte of the last message
	early := bytes.Replace(base, []byte("turn 1:"), []byte("turn I:"), 1)
	trimmed := bytes.Replace(base, []byte(`{"role":"user","content":"5 turn 0:`), []byte(`{"role":"user","content":"5 turn 0 (trimmed):`), 1)
	atK := bytes.Clone(base)
	atK[k-1] = ' ' // the last message ends one byte early
	steps := []resumeStep{
		{name: "first", body: base},
		{name: "a byte of the last message: resumed at the point before it", body: edited, resumes: true},
		{name: "an earlier turn edited", body: early},
		{name: "a turn dropped", body: trimmed},
		{name: "differs at the point: resumed at the point before", body: atK, resumes: true},
		{name: "base again", body: base, resumes: true},
	}
	runResume(t, w, steps)

	// The model named after the messages: the same prefix, counted for
	// another model or encoding, is counted again. The messages hold text
	// the encodings count apart and an image the models price apart.
	img := `{"role":"user","content":[{"type":"text","text":"Что на картинке? 画像には何がありますか"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}}]}`
	tail := func(model string) []byte {
		return []byte(`{"messages":[` + img + `,` + img + `],"model":"` + model + `"}`)
	}
	steps = []resumeStep{
		{name: "model after messages", body: tail("gpt-4o")},
		{name: "same model", body: tail("gpt-4o"), resumes: true},
		// The scans resume, the counts do not: weighed again, whole.
		{name: "another encoding", body: tail("gpt-4"), resumes: true},
		{name: "another model of the encoding", body: tail("gpt-4o-mini"), resumes: true},
		{name: "back to the first", body: tail("gpt-4o"), resumes: true},
		{name: "the first again", body: tail("gpt-4o"), resumes: true},
	}
	runResume(t, w, steps)

	// Another nesting limit sharing the cache: its checkpoints are its
	// own. The image part lies 6 levels deep: too deep for 5.
	deep := tail("gpt-4o")
	w.Chat(deep)
	shallow := *w
	shallow.maxDepth = 5
	p := plain(t)
	p.maxDepth = 5
	if got, want := shallow.Chat(deep), p.Chat(deep); got != want || !got.TooDeep {
		t.Fatalf("depth 5: %+v, plain %+v", got, want)
	}
}

// TestResumeHiddenInput: a message before the point that refers to input
// the body does not hold (a file by id) still marks the estimate
// ServerContext when the scan resumes after it.
func TestResumeHiddenInput(t *testing.T) {
	file := `{"role":"user","content":[{"type":"text","text":"summarize the attached report, please, in a few lines"},{"type":"file","file":{"file_id":"file-abc123"}}]}`
	body := []byte(`{"model":"gpt-4o","messages":[` + file + `]}`)
	more := []byte(`{"model":"gpt-4o","messages":[` + file + `,{"role":"assistant","content":"It says the quarter went well."}]}`)
	runResume(t, cachedWeigher(t, 1<<20), []resumeStep{
		{name: "a file by id", body: body},
		{name: "one more turn", body: more, resumes: true},
	})
	if e := plain(t).Chat(more); !e.ServerContext {
		t.Fatalf("a file by id is not hidden input: %+v", e)
	}
}

// TestResumeOtherKinds: a Responses or Anthropic body with a chat body's
// prefix is not weighed from the chat body's checkpoint.
func TestResumeOtherKinds(t *testing.T) {
	w := cachedWeigher(t, 4<<20)
	base := agentBodyOf(6, 8, 2)
	w.Chat(base)
	w.Chat(base)
	p := plain(t)
	for _, k := range []Kind{KindResponses, KindMessages, KindCompletions} {
		before := w.CacheStats().Resumed
		if got, want := w.Weigh(k, base), p.Weigh(k, base); got != want {
			t.Fatalf("%s: %+v, plain %+v", k, got, want)
		}
		if w.CacheStats().Resumed != before {
			t.Errorf("%s resumed from a chat checkpoint", k)
		}
	}
}

// TestResumeMemoryIsBounded: many conversations, each a new prefix, fill
// the table and evict; its size never changes, and what it holds is what
// its sets hold.
func TestResumeMemoryIsBounded(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := cachedWeigher(t, 1<<20)
	tab := w.cache.resume.Load()
	if got, want := tab.bytes(), int64(1<<20/resumeShare); got > want || got < want*9/10 {
		t.Fatalf("table of %d bytes for a 1 MiB cache, want about %d", got, want)
	}
	for i := range 3000 {
		w.Chat(agentBodyOf(100+i, 2, 1))
	}
	if w.cache.resume.Load() != tab {
		t.Fatal("the table was replaced")
	}
	full := 0
	for i := range tab.sets {
		for _, cp := range tab.sets[i].ways {
			if cp.np > 0 {
				full++
			}
		}
	}
	if full > len(tab.sets)*resumeWays || full < len(tab.sets)*resumeWays/2 {
		t.Errorf("%d checkpoints in %d slots", full, len(tab.sets)*resumeWays)
	}
	t.Logf("%d sets of %d bytes: %d checkpoints of %d bytes", len(tab.sets), tab.bytes()/int64(len(tab.sets)), full, resumeEntryBytes)
}

// FuzzResumeChat: a remembered chat (or Responses) body, edited anywhere
// (bytes cut and inserted), is weighed as a fresh weigher weighs it.
func FuzzResumeChat(f *testing.F) {
	base := agentBodyOf(8, 6, 1)
	k := bytes.Index(base, []byte(`}],"tools"`)) + 1
	input := bytes.Replace(base, []byte(`"messages":[`), []byte(`"input":[`), 1)
	f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","content":"and then?"}`), false)
	f.Add(base, uint16(k+1), uint16(0), []byte(`,"model":"gpt-4"`), false)
	f.Add(base, uint16(k), uint16(3), []byte(`]`), false)
	f.Add(base, uint16(k-5), uint16(1), []byte(`!`), false)
	f.Add([]byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("a long enough message ", 5)+`"}],"model":"gpt-4o"}`), uint16(130), uint16(0), []byte(`,{"role":"assistant","content":"b"}`), false)
	f.Add(input, uint16(k-3), uint16(0), []byte(`,{"type":"message","role":"user","content":"more"}`), true)
	f.Add(input, uint16(k-2), uint16(0), []byte(`,"model":"gpt-4"`), true)
	w := cachedWeigher(f, 1<<20)
	p := plain(f)
	f.Fuzz(func(t *testing.T, body []byte, at, cut uint16, insert []byte, responses bool) {
		kind := KindChat
		if responses {
			kind = KindResponses
		}
		w.Weigh(kind, body) // files its checkpoint
		a := min(int(at), len(body))
		c := min(a+int(cut), len(body))
		edited := append(append(append([]byte(nil), body[:a]...), insert...), body[c:]...)
		if got, want := w.Weigh(kind, edited), p.Weigh(kind, edited); got != want {
			t.Fatalf("%s %q after %q: %+v, plain %+v", kind, edited, body, got, want)
		}
	})
}

// TestResumeResponses: a Responses conversation resent with one more item
// resumes after its last input item, with the estimate of a full
// weighing; refusals after the point are found, a model named after the
// input and changed is counted again, hidden input before the point still
// marks the estimate.
func TestResumeResponses(t *testing.T) {
	item := func(i int) string {
		role := [...]string{"user", "assistant"}[i%2]
		return fmt.Sprintf(`{"type":"message","role":%q,"content":[{"type":"input_text","text":"turn %d: the bucket refills at a steady rate, Задача 漢字 %d"}]}`, role, i, i)
	}
	file := `{"type":"message","role":"user","content":[{"type":"input_file","file_id":"file-abc123"}]}`
	body := func(n int, rest string) []byte {
		var items []string
		for i := range n {
			items = append(items, item(i))
		}
		return []byte(`{"model":"gpt-4o","instructions":"be brief","input":[` + strings.Join(items, ",") + `]` + rest + `}`)
	}
	var steps []resumeStep
	for n := 1; n < 12; n++ {
		steps = append(steps, resumeStep{name: "turn", body: body(n, `,"max_output_tokens":100`), resumes: n > 1})
	}
	base := body(11, `,"max_output_tokens":100`)
	k := bytes.LastIndex(base, []byte(`}]`)) + 1
	steps = append(steps,
		resumeStep{name: "model named twice", body: splice(base, k+1, `,"model":"gpt-4"`), resumes: true},
		resumeStep{name: "INPUT after the point", body: splice(base, k+1, `,"INPUT":[]`), resumes: true},
		resumeStep{name: "invalid after the point", body: splice(base, k, `,{"type":}`), resumes: true},
		resumeStep{name: "an item after the point", body: splice(base, k, ","+item(99)), resumes: true},
	)
	w := cachedWeigher(t, 4<<20)
	runResumeKind(t, w, KindResponses, steps)
	// A file by id before the point (hidden input: the estimate reserves
	// the model's whole input, whatever the counts).
	hidden := []byte(strings.Replace(string(base), `"input":[`, `"input":[`+file+`,`, 1))
	runResumeKind(t, w, KindResponses, []resumeStep{
		{name: "a file by id", body: hidden},
		{name: "one more item", body: splice(hidden, len(file)+k+1, ","+item(100)), resumes: true},
	})
	if e := plain(t).Responses(hidden); !e.ServerContext {
		t.Fatalf("a file by id is not hidden input: %+v", e)
	}
	after := func(model string) []byte {
		return []byte(strings.Replace(string(body(6, "")), `"model":"gpt-4o",`, "", 1)[:len(body(6, ""))-len(`"model":"gpt-4o",`)-1] + `,"model":"` + model + `"}`)
	}
	runResumeKind(t, w, KindResponses, []resumeStep{
		{name: "model after input", body: after("gpt-4o")},
		{name: "again", body: after("gpt-4o"), resumes: true},
		{name: "another encoding", body: after("gpt-4"), resumes: true},
	})
}

// TestResumeConcurrent: conversations weighed at once, sharing their first
// bytes (so their checkpoints share sets), each give plain's estimates
// (run with -race for the table's locking).
func TestResumeConcurrent(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	p := plain(t)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for turns := 1; turns < 40; turns++ {
				b := agentBodyOf(1, turns, 1+g%3) // one system prompt: the same first bytes
				if got, want := w.Chat(b), p.Chat(b); got != want {
					errs <- fmt.Errorf("conversation %d, %d turns: %+v, plain %+v", g, turns, got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if w.CacheStats().Resumed == 0 {
		t.Error("no conversation resumed")
	}
}

// TestResumePointHashes: every point a growing conversation files holds
// the seeded hash of its own prefix (and that prefix's tail), whether it
// was hashed afresh, continued from the pass that confirmed the point
// resumed at, or carried from that checkpoint: a wrong hash would only
// stop later bodies resuming there, which the resume counts of other
// tests need not notice.
func TestResumePointHashes(t *testing.T) {
	w := cachedWeigher(t, 4<<20)
	// Two messages a step: the fourth last message's end lies before the
	// point resumed at (a point carried from the checkpoint resumed from).
	var last []byte
	msgs := []string{}
	for step := range 10 {
		for _, role := range []string{"user", "assistant"} {
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"message %d of step %d, long enough for the count cache to hold it"}`, role, len(msgs), step))
		}
		last = []byte(`{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `]}`)
		w.Chat(last)
	}
	if r := w.CacheStats().Resumed; r < 8 {
		t.Fatalf("%d of 10 bodies resumed, want at least 8", r)
	}
	points := 0
	for i := range w.cache.resume.Load().sets {
		s := &w.cache.resume.Load().sets[i]
		for _, cp := range s.ways {
			for _, pt := range cp.points[:cp.np] {
				k := int(pt.k)
				if k > len(last) || string(pt.tail[:]) != string(last[k-resumeTailBytes:k]) {
					t.Fatalf("point at %d: not a prefix of the conversation's last body", k)
				}
				if want := prefixHashOf(w.cache.seed, string(last[:k])); pt.h != want {
					t.Errorf("point at %d: hash %x, the prefix's %x", k, pt.h, want)
				}
				points++
			}
		}
	}
	if points < 3 {
		t.Fatalf("%d points filed, want at least 3", points)
	}
}

// TestPrefixHashIncremental checks prefixHash, which continues one hasher
// pass from the per-seed base, against prefixHashOf made afresh, for
// prefixes asked for in growing, equal and shrinking order, under and
// over the hasher's 1 KiB block, and after a request on another cache
// (another seed) left the pooled hasher in its state.
func TestPrefixHashIncremental(t *testing.T) {
	var sb strings.Builder
	for i := 0; sb.Len() < 5000; i++ {
		fmt.Fprintf(&sb, `{"role":"user","content":"turn %d of the talk"},`, i*i)
	}
	body := sb.String()
	a, b := newCountCache(1<<20), newCountCache(1<<20)
	ks := []int{64, 300, 300, 241, 1000, 1023, 1024, 1025, 1088, 1089, 2100, 700, 4096, 4999, 0, 5000}
	m := &elemMemo{}
	for _, c := range []*countCache{a, b, a} {
		m.cache, m.body = c, body
		for _, k := range ks {
			if got, want := m.prefixHash(k), prefixHashOf(c.seed, body[:k]); got != want {
				t.Fatalf("prefixHash(%d) = %x, made afresh %x", k, got, want)
			}
		}
	}
	if a.seed != b.seed && prefixHashOf(a.seed, body[:300]) == prefixHashOf(b.seed, body[:300]) {
		t.Error("two seeds gave one prefix hash")
	}
}
