package weigher

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"
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
	head := fmt.Sprintf(`"system":[{"type":"text","text":"%d You are a coding agent. Read files with the tools before you change them; keep answers short.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"The project is a reverse proxy in Go."}],`+
		`"tools":[{"name":"read_file","description":"%d reads a file of the repository","input_schema":{"type":"object","properties":{"path":{"type":"string","description":"the file's path"}},"required":["path"]}},{"type":"bash_20250124","name":"bash"}],"thinking":{"type":"enabled","budget_tokens":2048}`, c.salt, c.salt)
	msgs := `"messages":[` + strings.Join(c.msgs, ",") + `]`
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
func BenchmarkMessagesWarm(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("%dk", size>>10), func(b *testing.B) {
			w := cachedWeigher(b, DefaultCacheBytes)
			c := newClaudeConvo(7, size*3/4, size*5/4, true)
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
