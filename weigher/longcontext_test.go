package weigher

import (
	"bytes"
	"testing"
)

// LongContextBeta finds a context-1m beta in any case, anywhere in the
// list; other betas and near misses are not one.
func TestLongContextBeta(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"context-1m-2025-08-07", true},
		{"files-api-2025-04-14,context-1m-2025-08-07", true},
		{"files-api-2025-04-14, CONTEXT-1M-2025-08-07 ", true},
		{"Context-1M-2026-01-01", true},
		{"context-1m", true},
		{"", false},
		{"files-api-2025-04-14", false},
		{"context-1k-2025-08-07", false},
		{"context-1", false},
		{"context 1m", false},
	} {
		if got := LongContextBeta([]byte(tc.value)); got != tc.want {
			t.Errorf("LongContextBeta(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
}

// With the beta, a Claude request with hidden context reserves the 1M
// window, not its configured 200,000; its usage ceiling takes the 1M
// window too; without hidden context only the ceiling moves; the beta
// twice is the beta once.
func TestWithLongContext(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{"claude-sonnet-4-5": {MaxInputTokens: 200_000, MaxOutputTokens: 64_000}}})
	if err != nil {
		t.Fatal(err)
	}
	hidden := w.Weigh(KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"f"}}]}]}`))
	if !hidden.ServerContext || hidden.InputTokens != 200_000 {
		t.Fatalf("without the beta: hidden %v, input %d; want true, 200000", hidden.ServerContext, hidden.InputTokens)
	}
	long := WithLongContext(hidden)
	if long.InputTokens != LongContextInputTokens || !long.LongContext || long.OutputTokens != hidden.OutputTokens {
		t.Errorf("with the beta: input %d, long context %v, output %d; want 1000000, true, %d", long.InputTokens, long.LongContext, long.OutputTokens, hidden.OutputTokens)
	}
	plain := w.Weigh(KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	if c := w.Ceiling(&plain); c.InputTokens != 264_000 {
		t.Errorf("ceiling without the beta: input %d, want 264000 (200,000 + 64,000)", c.InputTokens)
	}
	longPlain := WithLongContext(plain)
	if longPlain.InputTokens != plain.InputTokens {
		t.Errorf("no hidden context: input %d became %d", plain.InputTokens, longPlain.InputTokens)
	}
	if c := w.Ceiling(&longPlain); c.InputTokens != 1_064_000 || c.OutputTokens != 1_064_000 {
		t.Errorf("ceiling with the beta: %+v, want 1,064,000 input and output", c)
	}
	// A model not configured: the ceiling window (10M) already holds 1M;
	// a ceiling window below 1M is raised.
	small, err := New(Options{CeilingWindow: 300_000})
	if err != nil {
		t.Fatal(err)
	}
	e := WithLongContext(small.Weigh(KindMessages, []byte(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)))
	if c := small.Ceiling(&e); c.InputTokens != LongContextInputTokens {
		t.Errorf("unconfigured model with the beta: ceiling input %d, want 1000000", c.InputTokens)
	}
	if again := WithLongContext(long); again != long {
		t.Errorf("the beta twice changed %+v into %+v", long, again)
	}
}

// FuzzLongContextBeta: LongContextBeta never panics and agrees with a
// search for the token in the value with its ASCII capitals made small.
func FuzzLongContextBeta(f *testing.F) {
	f.Add([]byte("files-api-2025-04-14, context-1m-2025-08-07"))
	f.Add([]byte("CONTEXT-1M"))
	f.Add([]byte("context-1\xffm"))
	f.Fuzz(func(t *testing.T, value []byte) {
		lower := bytes.Clone(value)
		for i, c := range lower {
			if 'A' <= c && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		if got, want := LongContextBeta(value), bytes.Contains(lower, []byte("context-1m")); got != want {
			t.Fatalf("LongContextBeta(%q) = %v, want %v", value, got, want)
		}
	})
}
