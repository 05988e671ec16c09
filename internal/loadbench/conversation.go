package loadbench

import (
	"math/rand/v2"
	"strconv"
)

// Shape is what the bodies of one cell look like. The zero value is not
// usable: Size must be positive.
type Shape struct {
	// Size is the body size, in bytes, the cell is named for. Bodies range
	// from ¾ to 1¼ of it (mean about Size), growing by one turn of about
	// Size/16 bytes (at least turnMinBytes) at a time, in both modes.
	Size int
	// Stream asks for an SSE answer with usage
	// (stream_options.include_usage, as agent frameworks send it).
	Stream bool
	// Warm resends a growing conversation: each request is the previous
	// one's messages, byte for byte, plus one turn (the assistant's answer
	// and the next user message). When the body passes 1¼ Size, its oldest
	// exchanges are dropped until it is back under ¾ Size, as a chat
	// framework trims history to fit a context window: the system prompt,
	// the tools and every message kept are the bytes sent before, so only
	// the first body of a conversation is new text (the benchmark sends it
	// before measuring). Cold (false) builds every body from new text:
	// every message, the system prompt and the tool descriptions carry text
	// never sent before, so no cache keyed on content can help.
	Warm bool
}

// benchModel is the model every body names: priced in llmguard's embedded
// table and weighed with o200k_base.
const benchModel = "gpt-4o-mini"

// maxTokens is every body's max_tokens; the mock answers min(it, 16) tokens.
const maxTokens = 256

// turnMinBytes is the smallest turn: an assistant message and a user
// message with a few words each.
const turnMinBytes = 160

// conversation builds one worker's request bodies. Not safe for concurrent
// use; each worker has its own.
type conversation struct {
	pool  *textPool
	r     *rand.Rand
	shape Shape

	system []byte // the system message
	tools  []byte // `,"tools":[…]`
	msgs   []byte // the messages after the system message, each led by ','
	users  []int  // offsets in msgs of each user message's ',', oldest first
	tail   []byte // max_tokens, stream… and the closing brace
	body   []byte // the last body, reused
	step   int    // cold: index into the size schedule
	open   bool   // a conversation has been started
}

// newConversation returns the body builder of one worker; seed decides all
// of its text.
func newConversation(pool *textPool, shape Shape, seed uint64) *conversation {
	c := &conversation{pool: pool, r: rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d)), shape: shape}
	c.tail = append(c.tail, `,"max_tokens":`...)
	c.tail = strconv.AppendInt(c.tail, maxTokens, 10)
	c.tail = append(c.tail, `,"temperature":0.2`...)
	if shape.Stream {
		c.tail = append(c.tail, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	c.tail = append(c.tail, '}')
	return c
}

func (c *conversation) lo() int   { return c.shape.Size * 3 / 4 }
func (c *conversation) hi() int   { return c.shape.Size * 5 / 4 }
func (c *conversation) turn() int { return max(c.shape.Size/16, turnMinBytes) }

// size is the length of the body the current messages make.
func (c *conversation) size() int {
	return len(`{"model":"`+benchModel+`","messages":[]`) + len(c.system) + len(c.msgs) + len(c.tools) + len(c.tail)
}

// next returns the next request body. It is valid until the next call.
func (c *conversation) next() []byte {
	if c.shape.Warm {
		if !c.open {
			c.start(c.lo())
		} else {
			if c.size() >= c.hi() {
				c.trim(c.lo())
			}
			c.addTurn()
		}
	} else {
		target := c.lo() + c.step*c.turn()
		if target >= c.hi() {
			c.step, target = 0, c.lo()
		}
		c.step++
		c.start(target)
	}
	b := append(c.body[:0], `{"model":"`+benchModel+`","messages":[`...)
	b = append(b, c.system...)
	b = append(b, c.msgs...)
	b = append(b, ']')
	b = append(b, c.tools...)
	b = append(b, c.tail...)
	c.body = b
	return b
}

// start begins a new conversation — new system prompt, tool descriptions
// and messages — of at least target bytes, ending with a user message.
func (c *conversation) start(target int) {
	c.open = true
	c.system = c.message(c.system[:0], "system", kindProse, max(c.shape.Size/32, 80))
	c.tools = c.appendTools(c.tools[:0])
	c.msgs, c.users = c.msgs[:0], append(c.users[:0], 0)
	c.msgs = append(c.msgs, ',')
	c.msgs = c.userMessage(c.msgs, max(c.turn()/2, 60))
	for c.size() < target {
		c.addTurn()
	}
}

// addTurn appends the assistant's answer to the last user message (one in
// three a tool call, its result and a short answer) and the next user
// message.
func (c *conversation) addTurn() {
	n := c.turn()
	if c.r.IntN(3) == 0 {
		c.msgs = append(c.msgs, ',')
		c.msgs = c.toolCall(c.msgs, n/2)
		n /= 2
	}
	c.msgs = append(c.msgs, ',')
	kind := kindProse
	if c.r.IntN(2) == 0 {
		kind = kindCode
	}
	c.msgs = c.message(c.msgs, "assistant", kind, n*11/20)
	c.users = append(c.users, len(c.msgs))
	c.msgs = append(c.msgs, ',')
	c.msgs = c.userMessage(c.msgs, n*9/20)
}

// trim drops the oldest exchanges (a user message and the answers to it)
// as long as the body stays at least target bytes and one exchange is
// left; the conversation still starts with a user message after the
// system prompt.
func (c *conversation) trim(target int) {
	drop := 0
	for drop+1 < len(c.users) && c.size()-c.users[drop+1] >= target {
		drop++
	}
	if drop == 0 {
		return
	}
	cut := c.users[drop]
	c.msgs = c.msgs[:copy(c.msgs, c.msgs[cut:])]
	c.users = c.users[:copy(c.users, c.users[drop:])]
	for i := range c.users {
		c.users[i] -= cut
	}
}

// userMessage appends a user message of about n bytes: prose, prose in
// another language, code or JSON.
func (c *conversation) userMessage(b []byte, n int) []byte {
	kinds := [...]textKind{kindProse, kindProse, kindProse, kindProse, kindForeign, kindForeign, kindCode, kindCode, kindJSON, kindJSON}
	return c.message(b, "user", kinds[c.r.IntN(len(kinds))], n)
}

// message appends {"role":role,"content":"[nonce] text"} of about n bytes.
func (c *conversation) message(b []byte, role string, k textKind, n int) []byte {
	b = append(b, `{"role":"`...)
	b = append(b, role...)
	b = append(b, `","content":"`...)
	b = c.nonce(b)
	b = append(b, ' ')
	b = append(b, c.pool.slice(c.r, k, n-len(role)-40)...)
	return append(b, `"}`...)
}

// toolCall appends an assistant message calling a tool and the tool's
// JSON result, about n bytes in all.
func (c *conversation) toolCall(b []byte, n int) []byte {
	b = append(b, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_`...)
	mark := len(b)
	b = c.nonce(b)
	id := string(b[mark:])
	b = append(b, `","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"`...)
	b = append(b, c.pool.slice(c.r, kindProse, 40)...)
	b = append(b, `\", \"top_k\": `...)
	b = strconv.AppendInt(b, int64(1+c.r.IntN(9)), 10)
	b = append(b, `}"}}]},{"role":"tool","tool_call_id":"call_`...)
	b = append(b, id...)
	b = append(b, `","content":"`...)
	b = c.nonce(b)
	b = append(b, ' ')
	b = append(b, c.pool.slice(c.r, kindJSON, max(n-260, 60))...)
	return append(b, `"}`...)
}

// nonce appends 16 random hex digits.
func (c *conversation) nonce(b []byte) []byte {
	v := c.r.Uint64()
	const hex = "0123456789abcdef"
	for i := range 16 {
		b = append(b, hex[v>>(4*i)&15])
	}
	return b
}

// appendTools appends `,"tools":[…]`: 2 function tools for bodies up to
// 2 KiB, 3 up to 32 KiB, else 4, each with a JSON-schema parameters
// object and a description carrying new text.
func (c *conversation) appendTools(b []byte) []byte {
	count := 4
	switch {
	case c.shape.Size <= 2<<10:
		count = 2
	case c.shape.Size <= 32<<10:
		count = 3
	}
	desc := max(c.shape.Size/128, 24)
	b = append(b, `,"tools":[`...)
	for i, t := range toolDefs[:count] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","function":{"name":"`...)
		b = append(b, t.name...)
		b = append(b, `","description":"`...)
		b = c.nonce(b)
		b = append(b, ' ')
		b = append(b, c.pool.slice(c.r, kindProse, desc)...)
		b = append(b, `","parameters":`...)
		b = append(b, t.params...)
		b = append(b, `}}`...)
	}
	return append(b, ']')
}

// toolDefs are the tools an agent offers, with their JSON-schema
// parameters.
var toolDefs = []struct{ name, params string }{
	{"search_docs", `{"type":"object","properties":{"query":{"type":"string","description":"Words to search for"},"top_k":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`},
	{"read_file", `{"type":"object","properties":{"path":{"type":"string"},"start_line":{"type":"integer"},"end_line":{"type":"integer"}},"required":["path"]}`},
	{"run_sql", `{"type":"object","properties":{"query":{"type":"string","description":"A read-only SQL query"},"database":{"type":"string","enum":["orders","billing","analytics"]}},"required":["query","database"]}`},
	{"create_ticket", `{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"},"priority":{"type":"string","enum":["low","medium","high"]},"labels":{"type":"array","items":{"type":"string"}}},"required":["title","body"]}`},
}
