package weigher

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// The differential test of counting against tiktoken-go over 10 MiB of mixed
// text. tiktoken-go counts about 1 MB/s here and ten times slower under the
// race detector, which CI uses, so its counts for the (seeded, reproducible)
// corpus are kept in testdata/tiktoken-counts.json, written by tiktoken-go
// itself:
//
//	go test ./weigher -run TestCountsMatchTiktoken -args -update-tiktoken-counts
//
// Every run also checks a live slice against tiktoken-go, and the file
// records the corpus' SHA-256, so a corpus that drifted is reported as such.

var updateCounts = flag.Bool("update-tiktoken-counts", false, "recount testdata/tiktoken-counts.json with tiktoken-go")

const (
	corpusSeed  = 20261201
	corpusBytes = 10 << 20
	// liveSliceBytes of the corpus are counted by tiktoken-go on every run.
	liveSliceBytes = 256 << 10
)

type goldenCounts struct {
	CorpusSHA256 string             `json:"corpus_sha256"`
	CorpusBytes  int                `json:"corpus_bytes"`
	Counts       map[string][]int64 `json:"counts"` // encoding → tokens of each piece
}

var (
	corpusOnce sync.Once
	corpus     []string
)

func tenMiBCorpus() []string {
	corpusOnce.Do(func() { corpus = mixedCorpus(corpusSeed, corpusBytes) })
	return corpus
}

func corpusDigest(pieces []string) string {
	h := sha256.New()
	for _, p := range pieces {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

var diffEncodings = []string{EncodingO200k, EncodingCL100k}

// tiktokenCounts returns tiktoken-go's count of every corpus piece per
// encoding, from the golden file (or recounted with -update-tiktoken-counts).
func tiktokenCounts(t *testing.T, pieces []string) map[string][]int64 {
	t.Helper()
	path := filepath.Join("testdata", "tiktoken-counts.json")
	digest := corpusDigest(pieces)
	if *updateCounts {
		g := goldenCounts{CorpusSHA256: digest, Counts: map[string][]int64{}}
		for _, enc := range diffEncodings {
			ref := reference(t, enc)
			counts := make([]int64, len(pieces))
			var wg sync.WaitGroup
			for part := range 2 {
				wg.Go(func() {
					for i := part; i < len(pieces); i += 2 {
						counts[i] = ref.count(pieces[i])
					}
				})
			}
			wg.Wait()
			g.Counts[enc] = counts
		}
		for _, p := range pieces {
			g.CorpusBytes += len(p)
		}
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s (regenerate with -update-tiktoken-counts): %v", path, err)
	}
	var g goldenCounts
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if g.CorpusSHA256 != digest {
		t.Fatalf("%s was counted over another corpus (sha256 %s, now %s): the generators or math/rand changed; "+
			"regenerate with -update-tiktoken-counts", path, g.CorpusSHA256, digest)
	}
	for _, enc := range diffEncodings {
		if len(g.Counts[enc]) != len(pieces) {
			t.Fatalf("%s: %d counts for %s, want %d", path, len(g.Counts[enc]), enc, len(pieces))
		}
	}
	return g.Counts
}

// TestCountsMatchTiktoken checks, over 10 MiB of mixed text (prose, code,
// JSON, CJK, emoji, special-token strings), that the counter gives
// tiktoken-go's count for every piece in o200k_base and cl100k_base; that a
// slice of it still matches tiktoken-go counting live; and that chat
// conversations built from it are weighed the same cold (no cache), warm
// (each conversation resent with one more turn, through the count cache) and
// by the cookbook's framing over tiktoken-go's counts.
func TestCountsMatchTiktoken(t *testing.T) {
	if !*updateCounts && nativetest.Run(t) { // the native binary is not given the flag
		return
	}
	pieces := tenMiBCorpus()
	total := 0
	for _, p := range pieces {
		total += len(p)
	}
	if total < 10<<20 {
		t.Fatalf("corpus is %d bytes, want at least 10 MiB", total)
	}
	want := tiktokenCounts(t, pieces)
	cold, warm := uncached(t), testWeigher(t)

	t.Run("live", func(t *testing.T) {
		n := 0
		for i := 0; i < len(pieces) && n < liveSliceBytes; i += 17 {
			n += len(pieces[i])
			for _, enc := range diffEncodings {
				if got := reference(t, enc).count(pieces[i]); got != want[enc][i] {
					t.Fatalf("%s: tiktoken-go counts piece %d as %d, the golden file says %d", enc, i, got, want[enc][i])
				}
			}
		}
	})
	t.Run("text", func(t *testing.T) {
		for _, enc := range diffEncodings {
			bad := 0
			for i, p := range pieces {
				if got := countText(cold.encoders[enc], p); got != want[enc][i] {
					t.Errorf("%s: piece %d (%d bytes, %q…): %d tokens, tiktoken-go %d", enc, i, len(p), p[:min(len(p), 60)], got, want[enc][i])
					if bad++; bad > 5 {
						t.FailNow()
					}
				}
			}
		}
	})
	t.Run("chat", func(t *testing.T) {
		models := map[string]string{EncodingO200k: "gpt-4o", EncodingCL100k: "gpt-4"}
		for _, enc := range diffEncodings {
			const turns = 8
			for start := 0; start < len(pieces); start += turns {
				end := min(start+turns, len(pieces))
				conv := newConversation(models[enc])
				wantIn := int64(tokensReply)
				for i := start; i < end; i++ {
					role := conv.next(pieces[i])
					wantIn += tokensPerMessage + countText(cold.encoders[enc], role) + want[enc][i]
					body := conv.body()
					if got := warm.Chat(body).InputTokens; got != wantIn {
						t.Fatalf("%s warm, pieces %d..%d: %d input tokens, tiktoken-go %d", enc, start, i, got, wantIn)
					}
				}
				if got := cold.Chat(conv.body()).InputTokens; got != wantIn {
					t.Fatalf("%s cold, pieces %d..%d: %d input tokens, tiktoken-go %d", enc, start, end-1, got, wantIn)
				}
			}
		}
	})
}

// conversation is a chat request that grows one message at a time, its
// body rebuilt each time as an agent resends its history.
type conversation struct {
	model    string
	messages []json.RawMessage
}

func newConversation(model string) *conversation { return &conversation{model: model} }

// next appends text as the next message (user, then assistant, in turn) and
// returns its role.
func (c *conversation) next(text string) string {
	role := "user"
	if len(c.messages)%2 == 1 {
		role = "assistant"
	}
	m, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, text})
	c.messages = append(c.messages, m)
	return role
}

// body is the request: model, messages, max_tokens.
func (c *conversation) body() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"` + c.model + `","max_tokens":256,"messages":[`)
	for i, m := range c.messages {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// growingBodies is a conversation of mixed text resent with one more turn
// each time, until it reaches size bytes: the bodies an agent sends.
func growingBodies(tb testing.TB, model string, seed uint64, size int) [][]byte {
	tb.Helper()
	pieces := mixedCorpus(seed, 4*size)
	conv := newConversation(model)
	var out [][]byte
	for _, p := range pieces {
		conv.next(p[:min(len(p), 1500)])
		b := conv.body()
		if len(b) > size {
			break
		}
		out = append(out, b)
	}
	return out
}

// englishBodies is growingBodies for a conversation of English prose and
// Go code, the turns of chatBody, each numbered.
func englishBodies(size int) [][]byte {
	prose := "The quick brown fox jumps over the lazy dog while the rate limiter counts every token. " +
		"Budgets reset at the calendar boundary, and a stream the client abandons is charged what it streamed. "
	code := "func (b *Bucket) Take(now time.Time, cost int64) (Decision, error) {\n\tif cost > b.capacity {\n\t\treturn Decision{}, ErrTooLarge\n\t}\n\treturn b.take(now, cost), nil\n}\n"
	conv := newConversation("gpt-4o")
	var out [][]byte
	for i := 0; ; i++ {
		text := fmt.Sprintf("Turn %d. %s%s", i, prose, prose)
		if i%2 == 1 {
			text = fmt.Sprintf("Turn %d. Here is a fix:\n%s", i, code)
		}
		conv.next(text)
		b := conv.body()
		if len(b) > size {
			return out
		}
		out = append(out, b)
	}
}

// BenchmarkWarmConversation weighs the last 16 turns of a conversation
// growing to 128 KiB, cold (no cache), warm (each body the previous one
// plus a turn, through the count cache: the new turn is counted, the rest
// remembered) and by tiktoken-go counting the same messages' text, in one
// run: compare the MB/s (of whole bodies). Two conversations: English prose
// and code, and the mixed text of the differential test (made-up words, CJK,
// emoji: slower to count for both).
//
//	go test -run XXX -bench WarmConversation ./weigher
func BenchmarkWarmConversation(b *testing.B) {
	for _, conv := range []struct {
		name   string
		bodies [][]byte
	}{
		{"english", englishBodies(128 << 10)},
		{"mixed", growingBodies(b, "gpt-4o", 7, 128<<10)},
	} {
		bodies := conv.bodies
		last := bodies[len(bodies)-16:]
		size := 0
		for _, body := range last {
			size += len(body)
		}
		weigh := func(b *testing.B, w *Weigher, warm bool) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if warm {
					b.StopTimer()
					w.cache.c.Load().Purge()
					w.Chat(bodies[len(bodies)-17]) // the history, as the previous turn left it
					b.StartTimer()
				}
				for _, body := range last {
					w.Chat(body)
				}
			}
		}
		b.Run(conv.name+"/cold", func(b *testing.B) { weigh(b, uncached(b), false) })
		b.Run(conv.name+"/warm", func(b *testing.B) { weigh(b, cachedWeigher(b, 64<<20), true) })
		b.Run(conv.name+"/tiktoken-go", func(b *testing.B) {
			ref := reference(b, EncodingO200k)
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, body := range last {
					var n int64
					for _, m := range gjsonMessages(body) {
						n += ref.count(m)
					}
					_ = n
				}
			}
		})
	}
}

// gjsonMessages is the content of each message of a chat body.
func gjsonMessages(body []byte) []string {
	var out []string
	gjson.GetBytes(body, "messages.#.content").ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.String())
		return true
	})
	return out
}

// FuzzConversationMatchesTiktoken is the differential fuzz test of chat
// weighing, cold and warm: the input, cut into up to four messages (at most
// 48 bytes each: tiktoken-go's patterns backtrack badly on some longer
// inputs), is weighed as a conversation growing one message at a time,
// without the count cache and through it (twice, the second time all
// remembered), and every figure must equal the cookbook's framing over
// tiktoken-go's counts.
func FuzzConversationMatchesTiktoken(f *testing.F) {
	for _, s := range []string{
		"hello world|How are you today?|I'm fine, thanks — and you?",
		"<|endoftext|> special|日本語のテキスト。|😀👍🏽 emoji",
		"func main() {\n\tfmt.Println(\"hi\")\n}|{\"a\": [1, 2.5e3, null]}",
		"",
	} {
		f.Add(s)
	}
	cold, warm := uncached(f), testWeigher(f)
	f.Fuzz(func(t *testing.T, s string) {
		parts := strings.SplitN(s, "|", 4)
		for _, enc := range diffEncodings {
			model := map[string]string{EncodingO200k: "gpt-4o", EncodingCL100k: "gpt-4"}[enc]
			ref := reference(t, enc)
			conv := newConversation(model)
			want := int64(tokensReply)
			for _, p := range parts {
				p = p[:min(len(p), 48)]
				role := conv.next(p)
				want += tokensPerMessage + ref.count(role) + ref.count(string([]rune(p))) // json.Marshal makes each invalid byte U+FFFD
				body := conv.body()
				for i, w := range []*Weigher{cold, warm, warm} {
					e := w.Chat(body)
					if !e.Parsed {
						t.Fatalf("%q: not parsed: %+v", body, e)
					}
					if e.InputTokens != want {
						t.Fatalf("%s, weigher %d, %q: %d input tokens, tiktoken-go %d", enc, i, body, e.InputTokens, want)
					}
				}
			}
		}
	})
}
