package weigher

import (
	"fmt"
	"strings"
	"testing"
)

// The chat rules a Weigher holds for a name are the ones it finds afresh
// (findChatRules, each field from the Weigher's own methods), for
// configured names, prefixes, aliases with a family, decorated and
// upper-case names, and names that land on each other's slots, asked in
// turn so that held rules are both found and replaced.
func TestChatRulesSameAsFound(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"my-claude":   {Family: "claude-opus-4-7"},
		"my-mini":     {Family: "gpt-4o-mini"},
		"gpt-4o":      {SafetyFactor: 1.25},
		"legacy":      {Encoding: EncodingCL100k},
		"claude-3-ha": {SafetyFactor: 2},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"gpt-4o-mini", "gpt-4o", "gpt-4o-2024-08-06", "gpt-4", "gpt-3.5-turbo", "o3-mini", "my-claude", "my-mini",
		"legacy", "legacy-2", "claude-3-haiku", "claude-opus-4-7", "Anthropic/Claude-Opus-4.7", "openai/gpt-4o-mini",
		"us.anthropic.claude-opus-4-7-v1:0", "ft:gpt-4o-mini-2024-07-18:org::id", "llama-3-70b", "x", "",
		strings.Repeat("gpt-4o-", 12)}
	for i := range 40 {
		names = append(names, fmt.Sprintf("model-%d", i)) // more names than slots
	}
	for round := range 3 {
		for _, name := range names {
			for range 2 { // found, then (unless replaced since) held
				got, want := w.chatRules(name), w.findChatRules(name)
				if *got != *want {
					t.Fatalf("round %d, %q: held %+v, found %+v", round, name, *got, *want)
				}
			}
		}
	}
	// A copy of w with another count cache, or none, shares the table:
	// each finds the contexts of its own cache, whichever asked first.
	off, other := *w, *w
	off.cache, other.cache = nil, newCountCache(1<<20)
	for _, name := range []string{"gpt-4o-mini", "gpt-4", "my-claude"} {
		for _, v := range []*Weigher{w, &off, &other, w, &other, &off} {
			if got, want := v.chatRules(name), v.findChatRules(name); *got != *want {
				t.Fatalf("%q through a copy with cache %p: held %+v, found %+v", name, v.cache, *got, *want)
			}
		}
	}
	// Held rules alias nothing of the caller's.
	b := []byte("fresh-model-name-2024")
	r := w.chatRules(bodyString(b[:len("fresh-model")])) // a view of b, as a body's bytes
	copy(b, "other-thing")
	if r.model != "fresh-model" || r.family != "fresh-model" || w.chatRules("fresh-model").model != "fresh-model" {
		t.Fatalf("held rules changed with the caller's bytes: %q, family %q", r.model, r.family)
	}
}
