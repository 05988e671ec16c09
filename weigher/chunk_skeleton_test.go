package weigher

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// skeletonRun feeds events to a Stream of kind k (chat or completions)
// with its skeleton fast path, and to a reference Stream whose skeleton is
// dropped before every event (each chunk then read by parseOpenAIChunk in
// full), and fails on the first update, usage or settlement that differs.
// It returns how many events the fast path read.
func skeletonRun(t testing.TB, k Kind, maxDepth int, events [][]byte) (fast int) {
	t.Helper()
	return sharedRun(t, nil, k, maxDepth, events)
}

// sharedRun is skeletonRun with the fast path's Stream given shapes, the
// chunk shapes other streams shared (nil: none).
func sharedRun(t testing.TB, shapes *chunkShapes, k Kind, maxDepth int, events [][]byte) (fast int) {
	t.Helper()
	s := Stream{kind: k, maxDepth: maxDepth, shapes: shapes}
	ref := Stream{kind: k, maxDepth: maxDepth}
	completions := k == KindCompletions
	for i, e := range events {
		sk := s.skel
		if sk == nil {
			sk = &chunkSkeleton{shared: shapes} // a stream's first chunk
		}
		if c, ok := sk.match(bytes.TrimSpace(e), completions, maxDepth); ok {
			fast++
			if full := parseOpenAIChunk(e, completions, maxDepth); c != full {
				t.Fatalf("event %d %q: match %+v, full read %+v", i, e, c, full)
			}
		}
		got := s.Event(nil, e)
		ref.skel = nil
		want := ref.Event(nil, e)
		if got != want {
			t.Fatalf("event %d %q: fast path %+v, full read %+v", i, e, got, want)
		}
		if g, w := s.Usage(), ref.Usage(); g != w {
			t.Fatalf("event %d %q: usage %+v, full read %+v", i, e, g, w)
		}
		if g, w := s.Err(), ref.Err(); g != w {
			t.Fatalf("event %d: Err %v, full read %v", i, g, w)
		}
		if g, w := s.Done(), ref.Done(); g != w {
			t.Fatalf("event %d: Done %v, full read %v", i, g, w)
		}
	}
	est := Estimate{InputTokens: 10, OutputTokens: 20}
	gu, gs := s.Settle(est, 7)
	wu, ws := ref.Settle(est, 7)
	if gu != wu || gs != ws {
		t.Fatalf("settle: %+v %v, full read %+v %v", gu, gs, wu, ws)
	}
	return fast
}

// chunkGen makes varied OpenAI-shaped chat and completions chunks.
type chunkGen struct {
	r           *rand.Rand
	completions bool
}

// chunkPieces are string contents, raw JSON (between the quotes): plain
// words, escapes, UTF-8 and bytes that are not UTF-8 (which Check lets pass
// without Options.UTF8).
var chunkPieces = []string{
	"", " world", "Hello", ",", " the", `\n`, `\"quoted\"`, `\\`, `\u00e9t\u00e9`, `\uD83D\uDE00`,
	"café", "日本語", "😀", `{\"city\":`, `\"Paris\"}`, " ", "\t", `\/`, `\b\f\r\t`, "\xff\xfe",
}

// badPieces are not valid string contents, or end the string early: a raw
// control character, a bad escape, a quote, a backslash escaping the
// closing quote.
var badPieces = []string{
	"bad\x01ctl", `bad\x`, `bad\u12`, `end"early`, `trail\`, `a","b":"c`, "x}],\"y\":[{", "\x1f",
}

// piece is one string's contents: one in 16 bad.
func (g chunkGen) piece() string {
	if g.r.IntN(16) == 0 {
		return badPieces[g.r.IntN(len(badPieces))]
	}
	return chunkPieces[g.r.IntN(len(chunkPieces))]
}

// obf is an obfuscation string: random letters and digits of random
// length (OpenAI pads chunks to hide the token's length), one in 32 empty.
func (g chunkGen) obf() string {
	const set = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	n := 1 + g.r.IntN(12)
	if g.r.IntN(32) == 0 {
		n = 0
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = set[g.r.IntN(len(set))]
	}
	return string(b)
}

// delta is one chat delta object.
func (g chunkGen) delta(shape int) string {
	switch shape {
	case 0:
		return `{"content":"` + g.piece() + `"}`
	case 1:
		return `{"role":"assistant","content":"","refusal":null}`
	case 2:
		return `{}`
	case 3:
		return `{"tool_calls":[{"index":0,"function":{"arguments":"` + g.piece() + `"}}]}`
	case 4:
		return `{"tool_calls":[{"index":0,"id":"call_` + g.obf() + `","type":"function","function":{"name":"get_weather","arguments":""}}]}`
	case 5:
		return `{"reasoning_content":"` + g.piece() + `","content":null}`
	case 6:
		return `{"refusal":"` + g.piece() + `"}`
	case 7:
		return `{"audio":{"data":"` + g.piece() + `","transcript":"` + g.piece() + `"}}`
	case 8:
		return `{"content":"` + g.piece() + `","x_extra":"` + g.piece() + `"}`
	case 9:
		return `{"content":"` + g.piece() + `","reasoning":"` + g.piece() + `","annotations":[]}`
	case 10:
		return `{"tool_calls":[{"index":0,"function":{"arguments":"` + g.piece() + `"}},{"index":1,"function":{"arguments":"` + g.piece() + `"}}],"function_call":{"arguments":"` + g.piece() + `"}}`
	default:
		return `{"content":["` + g.piece() + `"]}`
	}
}

// chunk is one chunk of the given shape; usageNull adds "usage":null as
// OpenAI does to every chunk of a stream with include_usage.
func (g chunkGen) chunk(shape int, usageNull, obfuscate bool) string {
	var choice string
	if g.completions {
		choice = `{"text":"` + g.piece() + `","index":0,"logprobs":null,"finish_reason":null}`
	} else {
		fin := "null"
		if shape == 2 {
			fin = `"stop"`
		}
		choice = `{"index":0,"delta":` + g.delta(shape) + `,"logprobs":null,"finish_reason":` + fin + `}`
	}
	obj := "chat.completion.chunk"
	if g.completions {
		obj = "text_completion"
	}
	c := `{"id":"chatcmpl-AbC123","object":"` + obj + `","created":1694268190,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_44709d6fcb","choices":[` + choice + `]`
	if usageNull {
		c += `,"usage":null`
	}
	if obfuscate {
		c += `,"obfuscation":"` + g.obf() + `"`
	}
	return c + "}"
}

// odd is a chunk that is not a plain content chunk: usage, error, [DONE],
// garbage, a duplicate key, deep nesting, spaces.
func (g chunkGen) odd() string {
	switch g.r.IntN(9) {
	case 0:
		return `{"id":"x","choices":[],"usage":{"prompt_tokens":` + strconv.Itoa(g.r.IntN(100)) + `,"completion_tokens":` + strconv.Itoa(g.r.IntN(100)) + `,"total_tokens":9}}`
	case 1:
		if g.r.IntN(2) == 0 {
			return `{"error":{"code":` + strconv.Itoa(g.r.IntN(600)) + `},"choices":[{"index":0,"delta":{"content":"` + g.piece() + `"}}]}`
		}
		return `{"error":{"message":"` + g.piece() + `","type":"server_error"}}`
	case 2:
		return "[DONE]"
	case 3:
		return `{"id":"x","choices":[{"delta":{"content":"a","content":"b"}}]}`
	case 4:
		return strings.Repeat("[", 200) + strings.Repeat("]", 200)
	case 5:
		return "  " + g.chunk(0, true, true) + "\n"
	case 6:
		return `{"id":"x","choices":[{"index":0,"delta":{"content":"` + g.piece() + `"}}],"usage":{"prompt_tokens":"` + strconv.Itoa(g.r.IntN(100)) + `","completion_tokens":3}}`
	case 7:
		return `not json`
	default:
		return `{"choices":[{"delta":{"content":"` + strings.Repeat("long ", 1000) + `"}}]}`
	}
}

// stream is a varied sequence of chunks: mostly runs of one shape (as a
// real stream's content chunks), with first chunks, shape changes and odd
// chunks between.
func (g chunkGen) stream() [][]byte {
	usageNull, obfuscate := g.r.IntN(2) == 0, g.r.IntN(2) == 0
	var out [][]byte
	out = append(out, []byte(g.chunk(1, usageNull, obfuscate)))
	n := 5 + g.r.IntN(40)
	shape := 0
	for range n {
		switch x := g.r.IntN(20); {
		case x == 0:
			o := g.odd()
			out = append(out, []byte(o), []byte(o))
		case x < 3:
			shape = g.r.IntN(12)
		}
		out = append(out, []byte(g.chunk(shape, usageNull, obfuscate)))
	}
	out = append(out, []byte(g.chunk(2, usageNull, obfuscate)))
	if usageNull {
		out = append(out, []byte(`{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`))
	}
	if g.r.IntN(3) > 0 {
		out = append(out, []byte("[DONE]"))
	}
	return out
}

// TestChunkSkeletonSameAsFullRead holds the skeleton fast path to the full
// read over varied streams (chat and completions; escapes, UTF-8, invalid
// string contents, tool calls, audio and unknown members, reasoning,
// usage and error chunks, role and finish chunks, [DONE], obfuscation
// strings), and checks that it is taken for most of their chunks.
func TestChunkSkeletonSameAsFullRead(t *testing.T) {
	for _, k := range []Kind{KindChat, KindCompletions} {
		g := chunkGen{r: rand.New(rand.NewPCG(1, uint64(k))), completions: k == KindCompletions}
		events, fast := 0, 0
		for i := range 400 {
			st := g.stream()
			events += len(st)
			maxDepth := 0
			if i%7 == 0 {
				maxDepth = 4 // a chunk's delta content array nests 4 deep: some are unread
			}
			fast += skeletonRun(t, k, maxDepth, st)
		}
		t.Logf("%v: %d of %d chunks on the fast path", k, fast, events)
		if fast < events/2 {
			t.Fatalf("%v: only %d of %d chunks took the fast path", k, fast, events)
		}
	}
}

// TestChunkSkeletonSteps walks named cases of one skeleton: which chunks
// match it and what they read.
func TestChunkSkeletonSteps(t *testing.T) {
	base := `{"id":"c","choices":[{"index":0,"delta":{"content":"Hi","x":""}}],"obfuscation":"ab"}`
	steps := []struct {
		name string
		in   string
		fast bool
		text string
	}{
		{name: "content and obfuscation change", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"Yo \u00e9","x":""}}],"obfuscation":"zzzz"}`, fast: true, text: "Yo é"},
		{name: "content emptied", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"","x":""}}],"obfuscation":"q"}`, fast: true, text: ""},
		{name: "unknown member fills", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"a","x":"audio"}}],"obfuscation":"q"}`},
		{name: "key changed", in: `{"id":"c","choices":[{"index":0,"delta":{"refusal":"a","x":""}}],"obfuscation":"q"}`},
		{name: "bad escape", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"\q","x":""}}],"obfuscation":"q"}`},
		{name: "raw control", in: "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\x01\",\"x\":\"\"}}],\"obfuscation\":\"q\"}"},
		{name: "quote swallows a member", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"a\",\"x\":\"\"}}],"obfuscation":"q"}`},
		{name: "number changed", in: `{"id":"c","choices":[{"index":1,"delta":{"content":"a","x":""}}],"obfuscation":"q"}`, fast: true, text: "a"},
		{name: "number to fraction and exponent", in: `{"id":"c","choices":[{"index":-10.5E+3,"delta":{"content":"a","x":""}}],"obfuscation":"q"}`, fast: true, text: "a"},
		{name: "number with a leading zero", in: `{"id":"c","choices":[{"index":01,"delta":{"content":"a","x":""}}],"obfuscation":"q"}`},
		{name: "number cut", in: `{"id":"c","choices":[{"index":1.,"delta":{"content":"a","x":""}}],"obfuscation":"q"}`},
		{name: "number to string", in: `{"id":"c","choices":[{"index":"0","delta":{"content":"a","x":""}}],"obfuscation":"q"}`},
		{name: "number to literal", in: `{"id":"c","choices":[{"index":null,"delta":{"content":"a","x":""}}],"obfuscation":"q"}`},
		{name: "number swallows a member", in: `{"id":"c","choices":[{"index":0,"x":1,"delta":{"content":"a","x":""}}],"obfuscation":"q"}`},
		{name: "trailing bytes", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"a","x":""}}],"obfuscation":"q"}}`},
		{name: "closing quote replaced", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"Hi","x":""}}],"obfuscation":"abX}`},
		{name: "cut", in: `{"id":"c","choices":[{"index":0,"delta":{"content":"a`},
		{name: "space around", in: " \n" + `{"id":"c","choices":[{"index":0,"delta":{"content":"a","x":""}}],"obfuscation":"q"}` + "\r\n", fast: true, text: "a"},
	}
	for i, st := range steps {
		var sk chunkSkeleton
		want := sk.readChunk([]byte(base), false, 0)
		if sk.shape == nil || want.Text != "Hi" {
			t.Fatalf("step %d (%s): base not kept as a skeleton (%+v)", i, st.name, want)
		}
		c, ok := sk.match(bytes.TrimSpace([]byte(st.in)), false, 0)
		if ok != st.fast {
			t.Fatalf("step %d (%s): fast path %v, want %v", i, st.name, ok, st.fast)
		}
		full := parseOpenAIChunk([]byte(st.in), false, 0)
		if ok && (c != full || c.Text != st.text) {
			t.Fatalf("step %d (%s): fast %+v, full %+v, want text %q", i, st.name, c, full, st.text)
		}
	}
}

// TestChunkSkeletonNotKept lists chunks that must not become a skeleton.
func TestChunkSkeletonNotKept(t *testing.T) {
	for _, in := range []string{
		`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":"1"}}`,
		`{"error":{"message":"x"}}`,
		`{"error":"x"}`,
		`{"error":{"code":500}}`,
		`{"error":true,"choices":[{"delta":{"content":"a"}}]}`,
		`{"us\u0061ge":{"prompt_tokens":"1"},"choices":[]}`,
		`[DONE]`,
		`{"a":1,"a":2}`,
		// The same reasoning under both names, counted once: a skeleton
		// would compare the second as bytes, not read it as text.
		`{"choices":[{"delta":{"reasoning":"a","reasoning_content":"a"}}]}`,
		`{"choices":[{"delta":{"content":"` + strings.Repeat("x", maxSkeletonBytes) + `"}}]}`,
		`{"choices":[` + strings.Repeat(`{"delta":{"content":"a"}},`, maxSkeletonStrings+1) + `{}]}`,
	} {
		var sk chunkSkeleton
		sk.readChunk([]byte(in), false, 0)
		if sk.shape != nil {
			t.Fatalf("%.80q kept as a skeleton", in)
		}
	}
}

// swapStrings returns doc with the contents of each string it finds that
// is followed by no colon replaced by the next piece of fill (split at
// '|'), for the fuzz test to aim at the fast path: valid fills make chunks
// of the same skeleton, others (a quote, a backslash at the end) shapes
// that must not match or must match exactly.
func swapStrings(doc, fill []byte) []byte {
	parts := bytes.Split(fill, []byte("|"))
	var out []byte
	i, n := 0, 0
	for i < len(doc) {
		if doc[i] != '"' {
			out = append(out, doc[i])
			i++
			continue
		}
		end := skipValue(string(doc), i)
		j := end
		for j < len(doc) && isJSONSpace(doc[j]) {
			j++
		}
		if (j < len(doc) && doc[j] == ':') || end-i < 2 {
			out = append(out, doc[i:end]...)
		} else {
			out = append(out, '"')
			out = append(out, parts[n%len(parts)]...)
			out = append(out, '"')
			n++
		}
		i = end
	}
	return out
}

// FuzzChunkSkeleton is the differential fuzz test of the skeleton fast
// path: a stream of prev, next, prev and next with their value strings
// swapped for pieces of fill, and next again, read with the fast path and
// in full, must say the same; and a direct match of next against prev's
// skeleton must read what the full parse reads.
func FuzzChunkSkeleton(f *testing.F) {
	g := chunkGen{r: rand.New(rand.NewPCG(7, 7))}
	for shape := range 12 {
		f.Add([]byte(g.chunk(shape, true, true)), []byte(g.chunk(shape, true, true)), []byte(`a|\n|é|`), false)
		f.Add([]byte(g.chunk(shape, false, false)), []byte(g.chunk((shape+1)%12, false, true)), []byte("\\u00e9|\"|\\"), false)
	}
	g.completions = true
	f.Add([]byte(g.chunk(0, true, true)), []byte(g.chunk(0, true, true)), []byte("x|y"), true)
	f.Add([]byte(g.odd()), []byte(g.odd()), []byte(""), false)
	// Finish chunks whose choices' indexes differ: a match reads them
	// again.
	fin := func(idx ...string) []byte {
		var ch []string
		for _, i := range idx {
			if i == "" {
				ch = append(ch, `{"delta":{},"finish_reason":"stop"}`)
			} else {
				ch = append(ch, `{"index":`+i+`,"delta":{},"finish_reason":"stop"}`)
			}
		}
		return []byte(`{"id":"c","created":1,"choices":[` + strings.Join(ch, ",") + `]}`)
	}
	f.Add(fin("0"), fin("1"), []byte("length"), false)
	f.Add(fin("0", "1"), fin("1", "1"), []byte(""), false)
	f.Add(fin("3"), fin("1.5"), []byte(""), false)
	f.Add(fin("1023"), fin("1024"), []byte(""), true)
	f.Add(fin("-1"), fin("7"), []byte(""), false)
	f.Add(fin(""), fin(""), []byte("x"), false)
	f.Fuzz(func(t *testing.T, prev, next, fill []byte, completions bool) {
		k := KindChat
		if completions {
			k = KindCompletions
		}
		events := [][]byte{prev, next, swapStrings(prev, fill), swapStrings(next, fill), next, swapStrings(prev, next)}
		skeletonRun(t, k, 0, events)
		skeletonRun(t, k, 3, events)
		var sk chunkSkeleton
		sk.readChunk(prev, completions, 0)
		for _, e := range events[1:] {
			if c, ok := sk.match(bytes.TrimSpace(e), completions, 0); ok {
				if full := parseOpenAIChunk(e, completions, 0); c != full {
					t.Fatalf("prev %q, next %q: fast %+v, full %+v", prev, e, c, full)
				}
			}
		}
	})
}

// TestChunkSkeletonHostile feeds a stream of large and odd chunks that
// each miss the skeleton (alternating shapes, strings that grow, chunks
// just over the size bound, many strings) and checks that the skeleton
// never holds more than its bound.
func TestChunkSkeletonHostile(t *testing.T) {
	s := NewStream(KindChat)
	var events [][]byte
	for i := range 300 {
		switch i % 4 {
		case 0:
			events = append(events, []byte(`{"choices":[{"delta":{"content":"`+strings.Repeat("a", maxSkeletonBytes-40+i%80)+`"}}]}`))
		case 1:
			events = append(events, []byte(`{"choices":[`+strings.Repeat(`{"delta":{"content":"b"}},`, 1+i%90)+`{}]}`))
		case 2:
			events = append(events, []byte(fmt.Sprintf(`{"choices":[{"delta":{"content":"c"}}],"n%d":""}`, i)))
		default:
			events = append(events, []byte(strings.Repeat(`{"a":`, 100)+`"x"`+strings.Repeat(`}`, 100)))
		}
	}
	skeletonRun(t, KindChat, 0, events)
	for _, e := range events {
		s.Event(nil, e)
		if sh := s.skel.shape; sh != nil && (len(sh.prev) > maxSkeletonBytes || cap(sh.prev) > 2*maxSkeletonBytes || sh.ntoks > maxSkeletonStrings) {
			t.Fatalf("skeleton over its bound: %d bytes (cap %d), %d tokens", len(sh.prev), cap(sh.prev), sh.ntoks)
		}
	}
}
