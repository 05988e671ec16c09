package weigher

import (
	"strings"
	"sync"
	"testing"
)

var (
	sharedOnce sync.Once
	shared     *Weigher
	sharedErr  error
)

// testWeigher builds one Weigher for the whole test binary (encoders take a
// few hundred milliseconds to load).
func testWeigher(tb testing.TB) *Weigher {
	tb.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = New(Options{
			Models: map[string]Model{
				"gpt-4o":          {DefaultMaxOutputTokens: 4096},
				"gpt-4o-mini":     {DefaultMaxOutputTokens: 2048},
				"my-legacy-model": {Encoding: EncodingP50k},
			},
			DefaultMaxOutputTokens: 1000,
		})
	})
	if sharedErr != nil {
		tb.Fatalf("New: %v", sharedErr)
	}
	return shared
}

// uncached is testWeigher without the count cache: every request is
// counted cold, as the CPU-time and shape tests and the cold benchmarks
// need.
func uncached(tb testing.TB) *Weigher {
	tb.Helper()
	w := *testWeigher(tb)
	w.cache = nil
	return &w
}

// plain is testWeigher as it was before the count cache and the scan's
// layout: every member found by gjson, every element counted.
func plain(tb testing.TB) *Weigher {
	tb.Helper()
	w := *testWeigher(tb)
	w.cache, w.noLayout = nil, true
	return &w
}

// sameAsPlain checks that weighing body as kind gives the same estimate
// cold, warm (twice through the count cache) and plain.
func sameAsPlain(t *testing.T, k Kind, body []byte) {
	t.Helper()
	want := plain(t).Weigh(k, body)
	for i, w := range []*Weigher{uncached(t), testWeigher(t), testWeigher(t)} {
		if got := w.Weigh(k, body); got != want {
			t.Fatalf("%s %q: estimate %d is %+v, plain %+v", k, body, i, got, want)
		}
	}
}

func TestNewUnknownEncoding(t *testing.T) {
	_, err := New(Options{Models: map[string]Model{"foo": {Encoding: "o300k_base"}}})
	if err == nil || !strings.Contains(err.Error(), `"foo"`) || !strings.Contains(err.Error(), `"o300k_base"`) {
		t.Fatalf("New with unknown encoding: err = %v, want one naming the model and encoding", err)
	}
	_, err = New(Options{DefaultMaxOutputTokens: -1})
	if err == nil {
		t.Fatal("New with negative default: err = nil")
	}
}

// TestNewSharesCounters checks that the fast counters are built once per
// process: a reload's New reuses them instead of parsing and indexing the
// vocabularies again (start-up time itself is BenchmarkNew's).
func TestNewSharesCounters(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Models: map[string]Model{"x": {Encoding: EncodingCL100k}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		if a.encoders[enc] != b.encoders[enc] {
			t.Errorf("%s: two weighers hold two counters; want one per process", enc)
		}
	}
}

func TestEncodingFor(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct{ model, want string }{
		{"gpt-4o", EncodingO200k},
		{"gpt-4o-2024-08-06", EncodingO200k},
		{"gpt-4o-mini-2024-07-18", EncodingO200k},
		{"gpt-4.1-nano", EncodingO200k},
		{"gpt-4.5-preview", EncodingO200k},
		{"gpt-5", EncodingO200k},
		{"gpt-5.2-chat-latest", EncodingO200k},
		{"o1-mini", EncodingO200k},
		{"o3-2025-04-16", EncodingO200k},
		{"o4-mini", EncodingO200k},
		{"gpt-4", EncodingCL100k},
		{"gpt-4-0613", EncodingCL100k},
		{"gpt-4-turbo-2024-04-09", EncodingCL100k},
		{"gpt-3.5-turbo-0125", EncodingCL100k},
		{"my-legacy-model", EncodingP50k},
		{"my-legacy-model-v2", EncodingP50k}, // configured prefix
		{"My-Legacy-Model", EncodingP50k},    // configured, in another case
		{"MY-LEGACY-MODEL-v2", EncodingP50k},
		{"llama-3-70b", EncodingO200k},
		{"", EncodingO200k},
	} {
		if got := w.EncodingFor(tc.model); got != tc.want {
			t.Errorf("EncodingFor(%q) = %q, want %q", tc.model, got, tc.want)
		}
	}
}

func TestCountText(t *testing.T) {
	w := testWeigher(t)
	// Figures from the cookbook's section 2-5 examples
	// (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken):
	// "tiktoken is great!" is 6 tokens in cl100k_base; "お誕生日おめでとう" is
	// 9 in cl100k_base and 8 in o200k_base.
	for _, tc := range []struct {
		model, text string
		want        int64
	}{
		{"gpt-4", "tiktoken is great!", 6},
		{"gpt-4", "お誕生日おめでとう", 9},
		{"gpt-4o", "お誕生日おめでとう", 8},
		{"gpt-4o", "", 0},
	} {
		if got := w.CountText(tc.model, tc.text); got != tc.want {
			t.Errorf("CountText(%q, %q) = %d, want %d", tc.model, tc.text, got, tc.want)
		}
	}
}

func TestCountTextSpecialTokensAreOrdinary(t *testing.T) {
	w := testWeigher(t)
	for _, model := range []string{"gpt-4o", "gpt-4", "my-legacy-model"} {
		for _, text := range []string{"<|endoftext|>", "a<|endofprompt|>b", "<|fim_prefix|><|fim_middle|><|fim_suffix|>"} {
			if got := w.CountText(model, text); got < 2 {
				t.Errorf("CountText(%q, %q) = %d, want it counted as ordinary text (> 1 token)", model, text, got)
			}
		}
	}
}

func TestCountTextLongRunsAreBounded(t *testing.T) {
	w := testWeigher(t)
	// The bound is a ratio to prose of the same size, measured in this run:
	// a wall-clock bound fails on a loaded machine.
	sentence := "The quick brown fox jumps over the lazy dog, then rests. "
	proseText := strings.Repeat(sentence, (1<<20)/len(sentence))
	// Prose is timed over 8 counts: one now takes a few ms, under a tick or
	// two of the thread clock, and measured 0 s at times.
	prose := cpuTime(func() {
		for range 8 {
			w.CountText("gpt-4o", proseText)
		}
	}) / 8
	for _, text := range []string{
		strings.Repeat("a", 1<<20),
		strings.Repeat(" ", 1<<20),
		strings.Repeat("-", 1<<20),
		strings.Repeat("é", 1<<19),
	} {
		var n int64
		d := cpuTime(func() { n = w.CountText("gpt-4o", text) })
		if d > 20*prose {
			t.Errorf("CountText of a 1 MiB run of %q took %v of CPU, over 20× 1 MiB of prose (%v) in the same run", text[:1], d, prose)
		}
		if n <= 0 || n > int64(len(text)) {
			t.Errorf("CountText of a 1 MiB run of %q = %d", text[:1], n)
		}
	}
	// Below the cut, counts are exact: a run just under maxRunBytes.
	short := strings.Repeat("ab", maxRunBytes/2-1)
	if got, want := w.CountText("gpt-4o", short), reference(t, EncodingO200k).count(short); got != want {
		t.Errorf("CountText(short run) = %d, want %d", got, want)
	}
}
