package policy

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatchModelAcrossSlashes(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*", "openai/gpt-4o", true},
		{"*", "meta-llama/Llama-3.3-70B-Instruct", true},
		{"*", "", true},
		{"gpt-4o*", "gpt-4o-mini", true},
		{"gpt-4o*", "openai/gpt-4o", false}, // the glob is anchored at the start
		{"*gpt-4o*", "openai/gpt-4o-mini", true},
		{"meta-llama/*", "meta-llama/Llama-3.3-70B-Instruct", true},
		{"meta-llama/*", "meta-llama", false},
		{"*/llama*", "org/team/llama-3", true},
		{"a?c", "a/c", true},
		{"a[/]c", "a/c", true},
		{"a[^/]c", "a/c", false},
		{"a\\*c", "a*c", true},
		{"a\\*c", "abc", false},
		{"*-2024-??-??", "openai/gpt-4o-2024-08-06", true},
		{"claude-*-4-5", "anthropic/claude-sonnet-4-5", false},
		{"*claude-*-4-5", "anthropic/claude-sonnet-4-5", true},
		{"[a-c]*", "b/x", true},
		{"[a-c]*", "d/x", false},
		{"*é*", "modèle/é", true},
		{"?", "é", true}, // one rune, not one byte
		// ASCII case aside: literals, escapes and classes.
		{"gpt-4o*", "GPT-4o-Mini", true},
		{"Meta-Llama/*", "meta-llama/Llama-3.3-70B-Instruct", true},
		{"a\\Bc", "abc", true},
		{"[a-c]x", "BX", true},
		{"[A-C]x", "bx", true},
		{"[^a]x", "Ax", true}, // some spelling matches as written
		{"[^a]x", "ax", true}, // so every spelling does
		{"[^a]x", "bx", true},
		{"[^A-Z]pt-4O", "gpt-4O", true}, // as path.Match: never fewer names
		{"[^ab]", "-", true},
		{"[^-]", "-", false}, // no letter, no other case
		{"É*", "é", false},   // only ASCII folds
	} {
		if got := MatchModel(tc.glob, tc.name); got != tc.want {
			t.Errorf("MatchModel(%q, %q) = %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
}

// On names without a slash MatchModel is path.Match: the same syntax, the
// same answers — but for a negated class of letters, which holds both
// cases of every letter (some spelling of the name matches it), so
// matches more: never fewer names than path.Match.
func TestMatchModelAgreesWithPathMatch(t *testing.T) {
	globs := []string{"*", "gpt-*", "gpt-4o*", "*mini", "*-mini-*", "g?t-4o", "[gc]*", "[^g]*", "[a-z]pt-4o",
		"gpt-4o-mini-2024-??-??", "\\*", "gpt\\-4o", "*4o*mini*", "**", "*?*", "claude-[0-9]*", "[é]*"}
	names := []string{"", "gpt-4o", "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "claude-3-haiku", "cpt-4o", "*",
		"gpt-4.1-mini", "o3-pro", "é-model", "mini", "g", "gpt-", "claude-sonnet-4-5"}
	for _, g := range globs {
		for _, n := range names {
			want, err := path.Match(g, n)
			if err != nil {
				t.Fatalf("glob %q: %v", g, err)
			}
			got := MatchModel(g, n)
			if got != want && (!strings.Contains(g, "[^") || !got) {
				t.Errorf("MatchModel(%q, %q) = %v, path.Match = %v", g, n, got, want)
			}
		}
	}
}

func FuzzMatchModel(f *testing.F) {
	f.Add("gpt-4o*", "gpt-4o-mini")
	f.Add("*/*", "openai/gpt-4o")
	f.Add("[a-c]?\\*", "b/*")
	f.Add("[^A-Z]pt-4O", "gpt-4o")
	f.Fuzz(func(t *testing.T, glob, name string) {
		if _, err := path.Match(glob, ""); err != nil {
			MatchModel(glob, name) // malformed: any answer, but no panic
			return
		}
		got := MatchModel(glob, name)
		// Case does not matter: the name in its other ASCII cases
		// matches the same way.
		if alt := MatchModel(glob, swapASCII(name)); alt != got {
			t.Fatalf("MatchModel(%q, %q) = %v but %v for %q", glob, name, got, alt, swapASCII(name))
		}
		// path.Match steps over a name byte by byte where MatchModel's *
		// steps rune by rune: a glob that is not UTF-8 (no config holds
		// one) can match inside a rune for the one only.
		if !strings.Contains(name, "/") && utf8.ValidString(glob) {
			want, _ := path.Match(glob, name)
			if want && !got {
				t.Fatalf("MatchModel(%q, %q) = false, path.Match = true", glob, name)
			}
			if !hasASCIILetter(name) && got != want {
				// Without letters, case plays no part: path.Match's answer.
				t.Fatalf("MatchModel(%q, %q) = %v, path.Match = %v", glob, name, got, want)
			}
		}
		// A name matched with its slashes replaced by another byte that the
		// glob does not mention matches the same way: a slash is an
		// ordinary character. (A class may mention either through a
		// range: [*-c] holds / but not #.)
		if !strings.ContainsAny(glob, "/#[") && !strings.Contains(name, "#") {
			if alt := MatchModel(glob, strings.ReplaceAll(name, "/", "#")); alt != got {
				t.Fatalf("MatchModel(%q, %q) = %v but %v with # for /", glob, name, got, alt)
			}
		}
	})
}

// swapASCII is s with each ASCII letter in its other case.
func swapASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func hasASCIILetter(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; 'a' <= c && c <= 'z' {
			return true
		}
	}
	return false
}

// A model-scoped rule applies to slashed names its glob covers, so a name
// with a provider prefix cannot escape it.
func TestModelRulesMatchSlashedNames(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys: [{key: sk-a, user: alice, tenant: acme}]
limits:
  - {name: all-models, scope: user, unit: tokens, rate: 1000, per: 1m, models: ["*"]}
  - {name: llama, scope: user, unit: tokens, rate: 1000, per: 1m, models: ["meta-llama/*"]}
  - {name: any-4o, scope: user, unit: tokens, rate: 1000, per: 1m, models: ["*gpt-4o*"]}
`)
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := p.Identify("sk-a")
	for _, tc := range []struct {
		model string
		want  []string
	}{
		{"openai/gpt-4o", []string{"all-models", "any-4o"}},
		{"meta-llama/Llama-3.3-70B-Instruct", []string{"all-models", "llama"}},
		{"gpt-4o", []string{"all-models", "any-4o"}},
		{"", []string{"all-models"}},
	} {
		var got []string
		for _, r := range p.Match(nil, alice, tc.model, "/v1/chat/completions") {
			got = append(got, r.Name)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("model %q matched %v, want %v", tc.model, got, tc.want)
		}
	}
}

func TestModelKeyPerModel(t *testing.T) {
	p := Principal{KeyID: "0123abcd", User: "alice", Tenant: "acme"}
	shared := Rule{Name: "user-tpm", Scope: ScopeUser}
	per := Rule{Name: "user-tpm", Scope: ScopeUser, PerModel: true}
	global := Rule{Name: "all", Scope: ScopeGlobal, PerModel: true}
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"shared", shared.ModelKey(p, "gpt-4o"), "llmguard:{acme}:user-tpm:alice"},
		{"per model", per.ModelKey(p, "gpt-4o"), "llmguard:{acme}:user-tpm:alice:gpt-4o"},
		{"per model, escaped", per.ModelKey(p, "a:b%"), "llmguard:{acme}:user-tpm:alice:a%3Ab%25"},
		{"per model, unpriced", per.ModelKey(p, ""), "llmguard:{acme}:user-tpm:alice:%unpriced"},
		{"global per model", global.ModelKey(p, "o3"), "llmguard:{global}:all:o3"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// No model label forges the unpriced bucket, nor another user's key.
	if per.ModelKey(p, "%unpriced") == per.ModelKey(p, "") {
		t.Error(`the label "%unpriced" shares the unpriced models' bucket`)
	}
	if per.ModelKey(Principal{Tenant: "acme", User: "alice:x"}, "y") == per.ModelKey(p, "x:y") {
		t.Error("a user id and a model label forge one key")
	}
}

// ModelKey is AppendModelKey's bytes, and without PerModel the same key as
// Key, for every scope and ids that need escaping.
func TestAppendModelKeyIsModelKey(t *testing.T) {
	ps := []Principal{{KeyID: "0123abcd", User: "alice", Tenant: "acme"}, {KeyID: "k:1", User: "a%b{c}", Tenant: "t:{x}%"}}
	for _, scope := range []Scope{ScopeKey, ScopeUser, ScopeTenant, ScopeGlobal} {
		for _, perModel := range []bool{false, true} {
			r := Rule{Name: "r-1", Scope: scope, PerModel: perModel}
			for _, p := range ps {
				for _, label := range []string{"", "gpt-4o", "a:b%"} {
					got := string(r.AppendModelKey([]byte("prefix|"), p, label))
					if want := "prefix|" + r.ModelKey(p, label); got != want {
						t.Errorf("scope %v per-model %v %+v %q: AppendModelKey %q, want %q", scope, perModel, p, label, got, want)
					}
					if !perModel && r.ModelKey(p, label) != r.Key(p) {
						t.Errorf("scope %v %+v: ModelKey %q, Key %q", scope, p, r.ModelKey(p, label), r.Key(p))
					}
				}
			}
		}
	}
}
