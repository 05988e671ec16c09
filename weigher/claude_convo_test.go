package weigher

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// claudeConvo builds the bodies of one growing Anthropic /v1/messages agent
// conversation: a system prompt (text blocks, the first with a
// cache_control breakpoint), tools, enabled thinking, and turns of a real
// user message followed by an agent loop — assistant messages of a
// thinking block, text and tool_use blocks, user messages of tool_result
// blocks (now and then an image, now and then a redacted_thinking block)
// — until the assistant answers in text and the user writes again. Each
// body is the previous one's bytes up to the end of its messages, plus one
// step; past hi bytes the oldest whole turns are dropped (as agents trim
// their context) until the body is under lo. Not safe for concurrent use.
type claudeConvo struct {
	r       *rand.Rand
	salt    int
	lo, hi  int
	first   bool     // members before "messages" (system, tools…), else after
	msgs    []string // the messages, each one element's JSON
	real    []int    // indices in msgs of the real user messages (turn starts)
	pending bool     // the last message is a tool_use awaiting its result
	n       int      // steps taken
	div     int      // text lengths are divided by div (small bodies: shorter texts and turns)
	system  string   // the system prompt's text, shared with other conversations ("": the conversation's own)
	// rolling moves a cache_control breakpoint to the last block of the
	// last message at each body, as agents place Anthropic's prompt
	// caching breakpoints (the message before loses it): the body differs
	// from the previous one within that message.
	rolling bool
}

// newClaudeConvo returns the conversation of seed, of bodies between lo
// and hi bytes, its system prompt and tools before its messages when
// first.
func newClaudeConvo(seed uint64, lo, hi int, first bool) *claudeConvo {
	c := &claudeConvo{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), salt: int(seed), lo: lo, hi: hi, first: first, div: 1}
	if hi < 4<<10 {
		c.div = 4
	}
	c.userText()
	for len(c.body()) < lo {
		c.step()
	}
	return c
}

var convoWords = strings.Fields(`the token bucket refills at a steady rate and admits a burst up to its capacity
each request is weighed before it is sent and reconciled with what the upstream reports
func main() { for i := range 10 { fmt.Println(i) } } Задача 漢字 émoji 🚀 résumé naïve
reservation ledger tenant virtual key fail-open budget window refill capacity`)

// words is n words of text, escaped for a JSON string.
func (c *claudeConvo) words(n int) string {
	n = max(n/c.div, 2)
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(convoWords[c.r.IntN(len(convoWords))])
	}
	fmt.Fprintf(&b, " (%d.%d)", c.salt, c.n)
	return b.String()
}

// convoImage is a base64 PNG of 40×30 px.
var convoImage = func() string {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 40, 30))); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}()

func (c *claudeConvo) userText() {
	c.real = append(c.real, len(c.msgs))
	c.msgs = append(c.msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":%q}]}`, c.words(8+c.r.IntN(20))))
}

// step appends the next message of the conversation.
func (c *claudeConvo) step() {
	c.n++
	switch {
	case c.pending:
		c.pending = false
		result := fmt.Sprintf(`{"type":"tool_result","tool_use_id":"toolu_%d","content":%q}`, c.n, c.words(10+c.r.IntN(60)))
		if c.r.IntN(5) == 0 {
			result = fmt.Sprintf(`{"type":"tool_result","tool_use_id":"toolu_%d","content":[{"type":"text","text":%q},{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}}]}`, c.n, c.words(5), convoImage)
		}
		c.msgs = append(c.msgs, `{"role":"user","content":[`+result+`]}`)
	case strings.HasPrefix(c.msgs[len(c.msgs)-1], `{"role":"user"`):
		think := fmt.Sprintf(`{"type":"thinking","thinking":%q,"signature":"sig%d"}`, c.words(10+c.r.IntN(30)), c.n)
		if c.r.IntN(6) == 0 {
			think = fmt.Sprintf(`{"type":"redacted_thinking","data":"%s"}`, strings.Repeat("QUJD", (10+c.r.IntN(20))/c.div+1))
		}
		if c.r.IntN(4) < c.div/2+1 { // the answer: the user writes next
			c.msgs = append(c.msgs, fmt.Sprintf(`{"role":"assistant","content":[%s,{"type":"text","text":%q}]}`, think, c.words(10+c.r.IntN(30))))
			return
		}
		c.pending = true
		c.msgs = append(c.msgs, fmt.Sprintf(`{"role":"assistant","content":[%s,{"type":"text","text":%q},{"type":"tool_use","id":"toolu_%d","name":"read_file","input":{"path":"src/%d.go"}}]}`, think, c.words(4), c.n+1, c.n))
	default:
		c.userText()
	}
}

// next takes one step (trimming first when the body is past hi) and
// returns the body.
func (c *claudeConvo) next() []byte {
	if len(c.body()) >= c.hi && len(c.real) > 1 {
		for len(c.real) > 1 && len(c.body()) > c.lo {
			drop := c.real[1]
			c.msgs = c.msgs[drop:]
			c.real = c.real[1:]
			for i := range c.real {
				c.real[i] -= drop
			}
		}
	}
	c.step()
	return c.body()
}

// body is the request body of the messages so far.
func (c *claudeConvo) body() []byte {
	system, salt := c.system, ""
	if system == "" {
		system = fmt.Sprintf("%d You are a coding agent. Read files with the tools before you change them; keep answers short.", c.salt)
		salt = fmt.Sprint(c.salt)
	}
	head := fmt.Sprintf(`"system":[{"type":"text","text":%q,"cache_control":{"type":"ephemeral"}},{"type":"text","text":"The project is a reverse proxy in Go."}],`+
		`"tools":[{"name":"read_file","description":"%s reads a file of the repository","input_schema":{"type":"object","properties":{"path":{"type":"string","description":"the file's path"}},"required":["path"]}},{"type":"bash_20250124","name":"bash"}],"thinking":{"type":"enabled","budget_tokens":2048}`, system, salt)
	last := c.msgs[len(c.msgs)-1]
	if c.rolling {
		c.msgs[len(c.msgs)-1] = strings.TrimSuffix(last, `}]}`) + `,"cache_control":{"type":"ephemeral"}}]}`
	}
	msgs := `"messages":[` + strings.Join(c.msgs, ",") + `]`
	c.msgs[len(c.msgs)-1] = last
	if c.first {
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":4096,` + head + `,` + msgs + `}`)
	}
	return []byte(`{"max_tokens":4096,` + msgs + `,"model":"claude-sonnet-4-5",` + head + `,"stream":true}`)
}

// BenchmarkMessagesWarm weighs one growing Anthropic agent conversation
// (claudeConvo: thinking, tool use, images, system and tools before the
// messages) through the count cache, a body a step, between ¾ and 1¼ of 1
// KiB and 16 KiB (the bodies built outside the timer). For instruction
// counts inside the weighing:
//
//	go test -c -o /tmp/w.test ./weigher
//	GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	  --collect-atstart=no --toggle-collect='*weigher.(*Weigher).messages' \
//	  /tmp/w.test -test.run XXX -test.bench 'MessagesWarm/^16k$' -test.benchtime 200x -test.cpu 1
//
// and the same with 1200x: the difference over 1000 is one body's.
//
// The "-rolling" cells move a cache_control breakpoint to the last message
// at each body (claudeConvo.rolling).
func BenchmarkMessagesWarm(b *testing.B) {
	for _, cell := range []struct {
		size    int
		rolling bool
	}{{1 << 10, false}, {16 << 10, false}, {1 << 10, true}, {16 << 10, true}} {
		name := fmt.Sprintf("%dk", cell.size>>10)
		if cell.rolling {
			name += "-rolling"
		}
		size := cell.size
		b.Run(name, func(b *testing.B) {
			w := cachedWeigher(b, DefaultCacheBytes)
			c := newClaudeConvo(7, size*3/4, size*5/4, true)
			c.rolling = cell.rolling
			w.Messages(c.body())
			n := 0
			for b.Loop() {
				b.StopTimer()
				body := c.next()
				n += len(body)
				b.StartTimer()
				if e := w.Messages(body); !e.Parsed {
					b.Fatal(e.FaultDetail)
				}
			}
			b.ReportMetric(float64(n)/float64(b.N), "body-bytes/op")
		})
	}
}

// TestResumeMessagesGrowing: growing Anthropic agent conversations — the
// system prompt and tools before the messages or after them, trimmed as
// agents trim — give a full weighing's estimate at every step, and most
// bodies resume (all but the first and those a trim changed at their
// start).
func TestResumeMessagesGrowing(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := cachedWeigher(t, 4<<20)
	p := plain(t)
	for _, size := range []int{1 << 10, 4 << 10, 16 << 10} {
		for _, first := range []bool{true, false} {
			c := newClaudeConvo(uint64(size)+3, size*3/4, size*5/4, first)
			c.rolling = !first
			before := w.CacheStats().Resumed
			const n = 150
			for i := range n {
				body := c.body()
				if i > 0 {
					body = c.next()
				}
				if got, want := w.Messages(body), p.Messages(body); got != want {
					t.Fatalf("%d bytes, first %v, body %d: resumed %+v, plain %+v\n%s", size, first, i, got, want, body)
				}
			}
			resumed := w.CacheStats().Resumed - before
			t.Logf("%d bytes, system first %v: %d of %d bodies resumed", size, first, resumed, n)
			if resumed < n*2/3 {
				t.Errorf("%d bytes, system first %v: only %d of %d bodies resumed", size, first, resumed, n)
			}
		}
	}
}

// TestResumeMessagesTurns: the weight of an Anthropic message before the
// resume point depends on what follows it — an assistant message's
// thinking counts while its turn is the current one, and stops counting
// once a later user message is not only tool results — and a resumed
// request gives a full weighing's estimate at each step: the turn going
// on through tool results, a new user message ending it (with thinking
// blocks written plainly, with \u escapes, redacted), a user message of a
// tool result and text, a model named after the messages and changed, and
// members after the messages.
func TestResumeMessagesTurns(t *testing.T) {
	think := func(i int, typ string) string {
		return fmt.Sprintf(`{"role":"assistant","content":[{"type":%q,"thinking":"step %d: weigh the request, take from every bucket, then reconcile with what the upstream reports","signature":"s"},{"type":"tool_use","id":"t%d","name":"read_file","input":{"path":"a.go"}}]}`, typ, i, i)
	}
	// A redacted thinking block whose type is written with \u escapes:
	// the message's text holds no "thinking".
	escaped := `{"role":"assistant","content":[{"type":"redacted_th\u0069nking","data":"` + strings.Repeat("RUZH", 40) + `"},{"type":"tool_use","id":"t3","name":"read_file","input":{"path":"b.go"}}]}`
	redacted := `{"role":"assistant","content":[{"type":"redacted_thinking","data":"` + strings.Repeat("QUJD", 40) + `"},{"type":"text","text":"done reading the files, here is the plan"}]}`
	result := func(i int) string {
		return fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"package main // file %d, long enough to be remembered by the count cache"}]}`, i, i)
	}
	user := `{"role":"user","content":"and now make the refill rate configurable per tenant, please"}`
	mixed := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"ok"},{"type":"text","text":"also, a question of mine"}]}`
	body := func(model string, msgs ...string) []byte {
		return []byte(`{"max_tokens":1024,"system":[{"type":"text","text":"You are a coding agent working in a Go repository."}],"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` +
			strings.Join(msgs, ",") + `],"model":"` + model + `"}`)
	}
	first := `{"role":"user","content":"read a.go and tell me how the token bucket refills"}`
	var msgs []string
	grow := func(m ...string) []string { msgs = append(msgs, m...); return slices.Clone(msgs) }
	steps := []resumeStep{
		{name: "the first turn", body: body("claude-sonnet-4-5", grow(first, think(1, "thinking"))...)},
		{name: "a tool result: the turn goes on", body: body("claude-sonnet-4-5", grow(result(1))...), resumes: true},
		{name: "thinking again", body: body("claude-sonnet-4-5", grow(think(2, "thinking"), result(2))...), resumes: true},
		{name: "escaped thinking", body: body("claude-sonnet-4-5", grow(escaped, result(3))...), resumes: true},
		{name: "redacted thinking", body: body("claude-sonnet-4-5", grow(redacted)...), resumes: true},
		{name: "a user message ends the turn", body: body("claude-sonnet-4-5", grow(user)...), resumes: true},
		{name: "thinking in the new turn", body: body("claude-sonnet-4-5", grow(think(4, "thinking"), result(4), think(5, "thinking"))...), resumes: true},
		{name: "a tool result with text ends it too", body: body("claude-sonnet-4-5", grow(mixed)...), resumes: true},
		{name: "another model", body: body("claude-opus-4-7", msgs...), resumes: true},
		{name: "thinking, then another model", body: body("claude-opus-4-7", grow(think(6, "thinking"))...), resumes: true},
		{name: "back to the first model, a user message", body: body("claude-sonnet-4-5", grow(user)...), resumes: true},
	}
	w := cachedWeigher(t, 4<<20)
	runResumeKind(t, w, KindMessages, steps)

	// The turn's end after the point changes the estimate: without the
	// past tallies the resumed request would count the thinking above.
	p := plain(t)
	on := body("claude-sonnet-4-5", first, think(1, "thinking"), result(1))
	ended := body("claude-sonnet-4-5", first, think(1, "thinking"), user)
	resulted := body("claude-sonnet-4-5", first, think(1, "thinking"), result(1))
	if p.Messages(ended).InputTokens >= p.Messages(resulted).InputTokens {
		t.Fatalf("the thinking of an ended turn counts: %+v, %+v", p.Messages(ended), p.Messages(resulted))
	}
	w = cachedWeigher(t, 4<<20)
	base := body("claude-sonnet-4-5", first, think(1, "thinking"))
	k := bytes.LastIndex(base, []byte(`}]`)) + 1
	runResumeKind(t, w, KindMessages, []resumeStep{
		{name: "base", body: base},
		{name: "a tool result", body: on, resumes: true},
		{name: "base again: its point, filed under a shorter key than the longer body's, stays", body: base, resumes: true},
		{name: "again", body: base, resumes: true},
		{name: "a user message", body: ended, resumes: true},
		{name: "base again", body: base, resumes: true},
		{name: "members after the messages", body: splice(base, k+1, `,"stream":true,"tools":[{"name":"x","description":"reads a file from the repository","input_schema":{}}]`), resumes: true},
		{name: "model named twice", body: splice(base, k+1, `,"model":"claude-opus-4-7"`), resumes: true},
		{name: "MESSAGES after the point", body: splice(base, k+1, `,"MESSAGES":[]`), resumes: true},
		{name: "a case variant in a new message", body: splice(base, k, `,{"role":"user","Content":"x"}`), resumes: true},
		{name: "a non-object element", body: splice(base, k, `,"hello",{"role":"user","content":"hi there"}`), resumes: true},
	})
}

// TestResumeArrayBeforeTheArray: a chat body whose tools come before its
// messages, and a Responses body whose instructions are items before its
// input, resume too (the lists before kept Unlaid in the checkpoint: their
// readers find their elements with gjson), with the estimate of a full
// weighing.
func TestResumeArrayBeforeTheArray(t *testing.T) {
	item := func(i int) string {
		return fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"turn %d: the bucket refills at a steady rate"}]}`, i)
	}
	var items []string
	var rsteps []resumeStep
	for i := range 8 {
		items = append(items, item(i))
		rsteps = append(rsteps, resumeStep{name: "instructions first", resumes: i > 0,
			body: []byte(`{"model":"gpt-4o","instructions":[` + item(100) + `,` + item(101) + `],"input":[` + strings.Join(items, ",") + `]}`)})
	}
	runResumeKind(t, cachedWeigher(t, 4<<20), KindResponses, rsteps)

	var steps []resumeStep
	for turns := 1; turns < 20; turns += 2 {
		b := agentBodyOf(9, turns, 2)
		tools := b[bytes.Index(b, []byte(`,"tools":[`)) : len(b)-1]
		b = append(bytes.Replace(b[:len(b)-len(tools)-1], []byte(`"max_tokens":256`), append([]byte(`"max_tokens":256`), tools...), 1), '}')
		steps = append(steps, resumeStep{name: "tools first", body: b, resumes: turns > 1})
	}
	runResume(t, cachedWeigher(t, 4<<20), steps)
}

// FuzzResumeMessages: a remembered Anthropic body (its system and tools
// before or after the messages, duplicate keys, members after the
// messages), edited anywhere (bytes cut and inserted: a prefix changed,
// the last turn changed, a turn added, a user message ending the current
// turn, a member added after the messages), then grown again by the same
// insert, is weighed as a fresh weigher weighs it, field by field.
func FuzzResumeMessages(f *testing.F) {
	for i, first := range []bool{true, false} {
		c := newClaudeConvo(uint64(40+i), 1500, 4000, first)
		base := c.next()
		k := bytes.LastIndex(base, []byte(`]}]`)) + 3
		if !first {
			k = bytes.Index(base, []byte(`]}],"model"`)) + 3
		}
		f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","content":"and then?"}`))
		f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"ok"}]}`))
		f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"assistant","content":[{"type":"thinking","thinking":"hmm, let me see"}]}`))
		f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","content":[{"type":"t\u006fol_result","content":"ok"}]}`))
		f.Add(base, uint16(k+1), uint16(0), []byte(`,"model":"claude-opus-4-7"`))
		f.Add(base, uint16(k+1), uint16(0), []byte(`,"messages":[]`))
		f.Add(base, uint16(k+1), uint16(0), []byte(`,"system":"be brief"`))
		f.Add(base, uint16(k-20), uint16(3), []byte(`abc`))
		f.Add(base, uint16(40), uint16(1), []byte(`X`))
		f.Add(base, uint16(k), uint16(2), []byte(`]}`))
	}
	// A breakpoint moved: the last message loses its cache_control, a new
	// one carries it.
	c := newClaudeConvo(42, 1500, 4000, true)
	c.rolling = true
	rolled := c.next()
	marker := `,"cache_control":{"type":"ephemeral"}`
	j := bytes.LastIndex(rolled, []byte(marker))
	f.Add(rolled, uint16(j), uint16(len(marker)+3), []byte(`}]},{"role":"user","content":[{"type":"text","text":"next one"`+marker+`}]}`))
	f.Add(rolled, uint16(j), uint16(len(marker)+3), []byte(`}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"ok"`+marker+`}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("a long enough message ", 5)+`"},{"role":"assistant","content":[{"type":"thinking","thinking":"`+strings.Repeat("so ", 30)+`"}]}],"model":"claude-sonnet-4-5","max_tokens":5}`), uint16(215), uint16(0), []byte(`,{"role":"user","content":"b"}`))
	w := cachedWeigher(f, 1<<20)
	p := plain(f)
	f.Fuzz(func(t *testing.T, body []byte, at, cut uint16, insert []byte) {
		w.Messages(body) // files its checkpoint
		a := min(int(at), len(body))
		c := min(a+int(cut), len(body))
		edited := append(append(append([]byte(nil), body[:a]...), insert...), body[c:]...)
		if got, want := w.Messages(edited), p.Messages(edited); got != want {
			t.Fatalf("%q after %q: %+v, plain %+v", edited, body, got, want)
		}
		again := append(append(append([]byte(nil), edited[:a+len(insert)]...), insert...), edited[a+len(insert):]...)
		if got, want := w.Messages(again), p.Messages(again); got != want {
			t.Fatalf("%q after %q: %+v, plain %+v", again, edited, got, want)
		}
	})
}

// TestResumeSharedSystemPrompt: many conversations sharing a long system
// prompt (and tools) before their messages, stepped in turn, each resume
// from its own previous body: their checkpoints are not all filed in one
// set of the table.
func TestResumeSharedSystemPrompt(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	shared := strings.Repeat("You are the support agent of one company; follow its policies, cite them, and never promise refunds. ", 12)
	w := cachedWeigher(t, 4<<20)
	p := plain(t)
	const convos, steps = 64, 6
	var cs []*claudeConvo
	for i := range convos {
		c := &claudeConvo{r: rand.New(rand.NewPCG(uint64(i), 1)), salt: i, lo: 3000, hi: 8000, first: true, div: 1, system: shared}
		c.userText()
		cs = append(cs, c)
		w.Messages(c.body())
	}
	before := w.CacheStats().Resumed
	for s := range steps {
		for i, c := range cs {
			body := c.next()
			if got, want := w.Messages(body), p.Messages(body); got != want {
				t.Fatalf("conversation %d, step %d: %+v, plain %+v", i, s, got, want)
			}
		}
	}
	resumed := int(w.CacheStats().Resumed - before)
	t.Logf("%d of %d bodies resumed", resumed, convos*steps)
	if resumed < convos*steps*3/4 {
		t.Errorf("only %d of %d bodies resumed", resumed, convos*steps)
	}
}

// TestResumeMessagesEarlierPoints: a body that differs from the last one
// in its last elements resumes at a point before them — agents moving a
// prompt-caching breakpoint to the last message (the one before loses
// it), or marking the last two user messages — with a full weighing's
// estimate; and a point whose messages' weight an element after it
// decided (a user message ending the turn, since replaced by a tool
// result) is not resumed from with the wrong weight.
func TestResumeMessagesEarlierPoints(t *testing.T) {
	cc := func(msg string) string {
		return strings.TrimSuffix(msg, `}]}`) + `,"cache_control":{"type":"ephemeral"}}]}`
	}
	user := func(i int) string {
		return fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"question %d: how does the bucket refill when the clock steps back?"}]}`, i)
	}
	asst := func(i int) string {
		return fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"%d: the refill is clamped, so I should read bucket.go before answering","signature":"s"},{"type":"tool_use","id":"t%d","name":"read_file","input":{"path":"bucket.go"}}]}`, i, i)
	}
	result := func(i int) string {
		return fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"func refill(now time.Time) { if now.Before(b.last) { return } } // %d"}]}`, i, i)
	}
	body := func(msgs ...string) []byte {
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are a coding agent.","messages":[` + strings.Join(msgs, ",") + `]}`)
	}
	w := cachedWeigher(t, 4<<20)
	runResumeKind(t, w, KindMessages, []resumeStep{
		{name: "one breakpoint", body: body(user(1), asst(1), cc(result(1)))},
		{name: "moved: resumed before the last message", body: body(user(1), asst(1), result(1), asst(2), cc(result(2))), resumes: true},
		{name: "moved again", body: body(user(1), asst(1), result(1), asst(2), result(2), asst(3), cc(result(3))), resumes: true},
		{name: "two breakpoints", body: body(user(1), asst(1), result(1), asst(2), result(2), asst(3), cc(result(3)), asst(4), cc(result(4))), resumes: true},
		{name: "two moved: resumed before the third last", body: body(user(1), asst(1), result(1), asst(2), result(2), asst(3), result(3), asst(4), cc(result(4)), asst(5), cc(user(5))), resumes: true},
		{name: "and again", body: body(user(1), asst(1), result(1), asst(2), result(2), asst(3), result(3), asst(4), result(4), asst(5), cc(user(5)), asst(6), cc(result(6))), resumes: true},
	})
	// Two breakpoints moved, the previous body weighed alone: the point at
	// the end of its fourth last element holds.
	w = cachedWeigher(t, 4<<20)
	runResumeKind(t, w, KindMessages, []resumeStep{
		{name: "two breakpoints, alone", body: body(user(1), asst(1), result(1), asst(2), cc(result(2)), asst(3), cc(result(3)))},
		{name: "two moved", body: body(user(1), asst(1), result(1), asst(2), result(2), asst(3), cc(result(3)), asst(4), cc(result(4))), resumes: true},
	})
	// The point after asst(1) was filed by a body whose user(2) ended the
	// turn after it; a body that has a tool result there instead weighs
	// asst(1)'s thinking as the current turn's.
	w = cachedWeigher(t, 4<<20)
	runResumeKind(t, w, KindMessages, []resumeStep{
		{name: "a turn ended after asst(1)", body: body(user(1), asst(1), user(2))},
		{name: "a tool result instead", body: body(user(1), asst(1), result(1)), resumes: true},
		{name: "the ended turn again", body: body(user(1), asst(1), user(2)), resumes: true},
		{name: "a tool result and a user message", body: body(user(1), asst(1), result(1), user(3)), resumes: true},
	})
	if p := plain(t); p.Messages(body(user(1), asst(1), result(1))).InputTokens <= p.Messages(body(user(1), asst(1), user(2))).InputTokens {
		t.Fatal("the current turn's thinking does not count")
	}
}
