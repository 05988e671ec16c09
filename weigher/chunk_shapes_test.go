package weigher

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// varyStream is st as another response would stream it: its ids,
// "created" and usage figures changed (the same for every chunk, as one
// response has them).
func varyStream(r *rand.Rand, st [][]byte) [][]byte {
	id := []byte(fmt.Sprintf("chatcmpl-%x", r.Uint64()))
	created := []byte(strconv.Itoa(1694268190 + r.IntN(1e6)))
	out := make([][]byte, len(st))
	for i, e := range st {
		e = bytes.ReplaceAll(e, []byte("chatcmpl-AbC123"), id)
		e = bytes.ReplaceAll(e, []byte("1694268190"), created)
		e = bytes.ReplaceAll(e, []byte(`"prompt_tokens":5,"completion_tokens":9`), []byte(fmt.Sprintf(`"prompt_tokens":%d,"completion_tokens":%d`, r.IntN(5000), r.IntN(5000))))
		out[i] = e
	}
	return out
}

// TestChunkShapesSameAsFullRead holds the shapes streams share (one
// Weigher's chunkShapes) to the full read: varied streams (chatGen's, each
// with its own ids, "created" and usage figures) read one after another
// and then from four goroutines at once through one chunkShapes must say
// what a full read of every chunk says.
func TestChunkShapesSameAsFullRead(t *testing.T) {
	for _, k := range []Kind{KindChat, KindCompletions} {
		shapes := new(chunkShapes)
		g := chunkGen{r: rand.New(rand.NewPCG(3, uint64(k))), completions: k == KindCompletions}
		events, fast := 0, 0
		for i := range 300 {
			st := varyStream(g.r, g.stream())
			events += len(st)
			fast += sharedRun(t, shapes, k, 4*(i%7/6), st)
		}
		t.Logf("%v: %d of %d chunks on the fast path", k, fast, events)
		if fast < events/2 {
			t.Fatalf("%v: only %d of %d chunks took the fast path", k, fast, events)
		}
		streams := make([][][]byte, 200)
		for i := range streams {
			streams[i] = varyStream(g.r, g.stream())
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < len(streams); i += 4 {
					sharedRun(t, shapes, k, 0, streams[i])
				}
			})
		}
		wg.Wait()
	}
}

// TestChunkShapesSteadyState checks what sharing buys: once one stream of
// OpenAI's shape was read, the next ones (other ids, "created" and usage
// figures) read every chunk on the fast path, the role, first content,
// finish and usage chunks included; only "[DONE]" is read otherwise.
func TestChunkShapesSteadyState(t *testing.T) {
	shapes := new(chunkShapes)
	r := rand.New(rand.NewPCG(9, 9))
	base := chatStreamEvents()
	for i := range 20 {
		st := make([][]byte, len(base))
		id := fmt.Sprintf("chatcmpl-%x", r.Uint64())
		for j, e := range base {
			e = bytes.ReplaceAll(e, []byte("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"), []byte(id))
			e = bytes.ReplaceAll(e, []byte("1741569952"), []byte(strconv.Itoa(1741569952+i)))
			e = bytes.ReplaceAll(e, []byte(`"prompt_tokens":19,"completion_tokens":18,"total_tokens":37`),
				[]byte(fmt.Sprintf(`"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d`, 19+i, 180+i, 199+2*i)))
			st[j] = e
		}
		fast := sharedRun(t, shapes, KindChat, 0, st)
		if i > 0 && fast != len(st)-1 {
			t.Fatalf("stream %d: %d of %d chunks on the fast path, want all but [DONE]", i, fast, len(st))
		}
	}
}

// swapNumberTokens returns doc with each number it finds outside strings
// replaced by the next piece of nums (split at '|'): valid numbers make
// chunks of the same shape, others (01, 1., -, a letter) chunks that must
// not match or must match exactly.
func swapNumberTokens(doc, nums []byte) []byte {
	parts := bytes.Split(nums, []byte("|"))
	var out []byte
	n := 0
	for i := 0; i < len(doc); {
		switch c := doc[i]; {
		case c == '"':
			end := skipValue(string(doc), i)
			out = append(out, doc[i:end]...)
			i = end
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(doc) && bytes.IndexByte([]byte("0123456789+-.eE"), doc[j]) >= 0 {
				j++
			}
			out = append(out, parts[n%len(parts)]...)
			n++
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// FuzzChunkShapes is the differential fuzz test of shared shapes: streams
// made of prev and next and of their variants (value strings swapped for
// pieces of fill, numbers for pieces of nums) read one after another
// through one chunkShapes, with the fast path and in full, must say the
// same; and a direct match of every variant against a new stream's shared
// shapes must read what the full parse reads.
func FuzzChunkShapes(f *testing.F) {
	g := chunkGen{r: rand.New(rand.NewPCG(8, 8))}
	for shape := range 12 {
		f.Add([]byte(g.chunk(shape, true, true)), []byte(g.chunk((shape+1)%12, true, false)), []byte(`a|\n|é|`), []byte("7|1.5e3|-0|12"), false)
	}
	usage := []byte(`{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":2}}}`)
	f.Add(usage, []byte(g.chunk(2, true, true)), []byte("q"), []byte("3|01|1.|-|1e|99999999999999999999|2e400"), false)
	g.completions = true
	f.Add([]byte(g.chunk(0, true, true)), []byte(g.chunk(2, true, true)), []byte("x|y"), []byte("0|5"), true)
	f.Add([]byte(g.odd()), []byte(g.odd()), []byte(""), []byte("1"), false)
	f.Fuzz(func(t *testing.T, prev, next, fill, nums []byte, completions bool) {
		k := KindChat
		if completions {
			k = KindCompletions
		}
		variants := [][]byte{
			swapNumberTokens(prev, nums), swapNumberTokens(next, nums),
			swapNumberTokens(swapStrings(prev, fill), nums), swapNumberTokens(swapStrings(next, fill), nums),
			swapStrings(next, fill), next, prev,
		}
		shapes := new(chunkShapes)
		sharedRun(t, shapes, k, 0, [][]byte{prev, next})
		sharedRun(t, shapes, k, 0, variants)
		sharedRun(t, shapes, k, 0, [][]byte{variants[1], variants[0], variants[3], variants[2]})
		for _, e := range variants {
			sk := chunkSkeleton{shared: shapes}
			if c, ok := sk.match(bytes.TrimSpace(e), completions, 0); ok {
				if full := parseOpenAIChunk(e, completions, 0); c != full {
					t.Fatalf("prev %q, next %q, variant %q: fast %+v, full %+v", prev, next, e, c, full)
				}
			}
		}
	})
}
