package policy

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// ollamaSpellings are the spellings Ollama serves as llama3.1
// (ollama/ollama types/model/name.go fills registry.ollama.ai, library and
// latest; a leading scheme is dropped).
var ollamaSpellings = []string{
	"llama3.1", "llama3.1:latest", "library/llama3.1", "library/llama3.1:latest",
	"registry.ollama.ai/library/llama3.1", "registry.ollama.ai/library/llama3.1:latest",
	"https://registry.ollama.ai/library/llama3.1:latest", "Library/Llama3.1:Latest",
}

// A rule on any spelling of an Ollama model holds every other spelling,
// through the index and through a scan alike; a glob on a spelling
// (library/*) holds the short name; other tags and other models stay out;
// an OpenAI name keeps every rule it had.
func TestOllamaSpellingsMatchRules(t *testing.T) {
	p := embedded(t, `
limits:
  - {name: short, scope: user, unit: requests, rate: 1, per: 1m, models: [llama3.1]}
  - {name: latest, scope: user, unit: requests, rate: 1, per: 1m, models: ["llama3.1:latest"]}
  - {name: full, scope: user, unit: requests, rate: 1, per: 1m, models: ["registry.ollama.ai/library/llama3.1:latest"]}
  - {name: scheme, scope: user, unit: requests, rate: 1, per: 1m, models: ["http://library/llama3.1"]}
  - {name: library, scope: user, unit: requests, rate: 1, per: 1m, models: ["library/*"]}
  - {name: tag-glob, scope: user, unit: requests, rate: 1, per: 1m, models: ["llama3.1:lat*"]}
  - {name: other-tag, scope: user, unit: requests, rate: 1, per: 1m, models: ["llama3.1:8b"]}
  - {name: other-model, scope: user, unit: requests, rate: 1, per: 1m, models: ["llama3.2"]}
  - {name: gpt, scope: user, unit: requests, rate: 1, per: 1m, models: [gpt-4o]}
`)
	pr := Principal{KeyID: "k", User: "u", Tenant: "t"}
	names := func(rs []*Rule) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	scan := func(model string) []*Rule {
		var out []*Rule
		for i := range p.Rules() {
			if p.Rules()[i].Matches(pr, model, "/v1/chat/completions") {
				out = append(out, &p.Rules()[i])
			}
		}
		return out
	}
	const all = "short,latest,full,scheme,library,tag-glob"
	for _, m := range ollamaSpellings {
		for _, got := range [][]*Rule{p.Match(nil, pr, m, "/v1/chat/completions"), scan(m)} {
			if names(got) != all {
				t.Errorf("%q matched %s, want %s", m, names(got), all)
			}
		}
	}
	for _, tc := range []struct{ model, want string }{
		{"llama3.1:8b", "library,other-tag"},
		{"library/llama3.1:8b", "library,other-tag"},
		{"llama3.2:latest", "library,other-model"},
		{"gpt-4o", "library,gpt"}, // library/gpt-4o is a spelling too: more rules, never fewer
		{"GPT-4o:latest", "library,gpt"},
		{"example.com/library/llama3.1", ""}, // another registry's model
	} {
		if got := names(p.Match(nil, pr, tc.model, "/v1/chat/completions")); got != tc.want {
			t.Errorf("%q matched %s, want %s", tc.model, got, tc.want)
		}
		if got := names(scan(tc.model)); got != tc.want {
			t.Errorf("%q matched %s by a scan, want %s", tc.model, got, tc.want)
		}
	}
}

// Each spelling of an Ollama model is priced as the one priced name of its
// canonical form; when two priced names share the form, only their exact
// spellings (and their other cases) are priced, as with case.
func TestOllamaSpellingsPriced(t *testing.T) {
	p := embedded(t, `
models:
  "llama3.1:latest": {input_usd_per_mtok: 1, output_usd_per_mtok: 2}
  mistral: {input_usd_per_mtok: 3, output_usd_per_mtok: 4}
  "mistral:latest": {input_usd_per_mtok: 5, output_usd_per_mtok: 6}
`)
	for _, m := range ollamaSpellings {
		if q := p.Quote(m, ""); !q.Priced || q.Label != "llama3.1:latest" {
			t.Errorf("%q quoted as %q (priced %v), want llama3.1:latest", m, q.Label, q.Priced)
		}
	}
	for _, tc := range []struct{ model, label string }{
		{"mistral", "mistral"},
		{"mistral:latest", "mistral:latest"},
		{"MISTRAL:LATEST", "mistral:latest"},
		{"library/mistral", ""}, // two priced names of this form: neither is meant more
		{"llama3.1:8b", ""},
	} {
		if q := p.Quote(tc.model, ""); q.Label != tc.label || q.Priced != (tc.label != "") {
			t.Errorf("%q quoted as %q (priced %v), want %q", tc.model, q.Label, q.Priced, tc.label)
		}
	}
}

// FuzzMatchModelAlias: MatchModelAlias matches every name MatchModel
// matches (never fewer); a glob that matches one of a name's spellings
// holds the name; a glob without metacharacters matches exactly the
// names of its canonical form.
func FuzzMatchModelAlias(f *testing.F) {
	f.Add("llama3.1:latest", "llama3.1")
	f.Add("library/*", "LLAMA3.1")
	f.Add("registry.ollama.ai/*:latest", "jmorgan/x")
	f.Add("*:lat?st", "gpt-4o")
	f.Fuzz(func(t *testing.T, glob, name string) {
		if _, err := path.Match(glob, ""); err != nil {
			MatchModelAlias(glob, name) // malformed: any answer, but no panic
			return
		}
		got := MatchModelAlias(glob, name)
		if MatchModel(glob, name) && !got {
			t.Fatalf("MatchModelAlias(%q, %q) = false, MatchModel true", glob, name)
		}
		sp := spec.AppendModelSpellings(nil, name)
		if i := slices.IndexFunc(sp, func(s string) bool { return MatchModel(glob, s) }); i >= 0 && !got {
			t.Fatalf("MatchModelAlias(%q, %q) = false, but the glob matches its spelling %q", glob, name, sp[i])
		}
		if !hasGlobMeta(glob) && got != spec.SameModel(glob, name) {
			t.Fatalf("MatchModelAlias(%q, %q) = %v, SameModel %v", glob, name, got, !got)
		}
	})
}
