package spec

import (
	"slices"
	"strings"
	"testing"
)

// upperASCII is s with its small ASCII letters made capital.
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Each spelling Ollama reads as llama3.1 (ollama/ollama
// types/model/name.go: default host, namespace and tag; a scheme dropped)
// has llama3.1's canonical form; names of other upstreams keep theirs.
func TestCanonModel(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"llama3.1", "llama3.1"},
		{"llama3.1:latest", "llama3.1"},
		{"library/llama3.1", "llama3.1"},
		{"library/llama3.1:latest", "llama3.1"},
		{"registry.ollama.ai/library/llama3.1", "llama3.1"},
		{"registry.ollama.ai/library/llama3.1:latest", "llama3.1"},
		{"https://registry.ollama.ai/library/llama3.1:latest", "llama3.1"},
		{"http://Registry.Ollama.AI/Library/Llama3.1:LATEST", "llama3.1"},
		{"llama3.1:8b", "llama3.1:8b"},
		{"library/llama3.1:8b", "llama3.1:8b"},
		{"registry.ollama.ai/jmorgan/llama3:latest", "jmorgan/llama3"},
		{"jmorgan/llama3:latest", "jmorgan/llama3"},
		{"example.com/library/llama3.1", "example.com/library/llama3.1"}, // another registry
		{"registry.ollama.ai/llama3.1", "registry.ollama.ai/llama3.1"},   // a namespace "registry.ollama.ai"
		{"gpt-4o", "gpt-4o"},
		{"GPT-4o", "gpt-4o"},
		{"openai/gpt-4o", "openai/gpt-4o"},
		{"ft:gpt-4o-mini:acme::latest", "ft:gpt-4o-mini:acme::latest"}, // two ':': not a tag
		{"library/", "library/"},
		{":latest", ":latest"},
		{"x/:latest", "x/:latest"},
		{"", ""},
	} {
		if got := CanonModel(c.in); got != c.want {
			t.Errorf("CanonModel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Every spelling AppendModelSpellings lists canonicalises back, the
// canonical form comes first, and each alias form of llama3.1 is listed.
func TestAppendModelSpellings(t *testing.T) {
	got := AppendModelSpellings(nil, "LLAMA3.1")
	want := []string{"llama3.1", "llama3.1:latest", "library/llama3.1", "library/llama3.1:latest",
		"registry.ollama.ai/library/llama3.1", "registry.ollama.ai/library/llama3.1:latest"}
	if !slices.Equal(got, want) {
		t.Errorf("spellings of LLAMA3.1 = %q, want %q", got, want)
	}
	got = AppendModelSpellings(nil, "jmorgan/llama3:8b")
	want = []string{"jmorgan/llama3:8b", "registry.ollama.ai/jmorgan/llama3:8b"}
	if !slices.Equal(got, want) {
		t.Errorf("spellings of jmorgan/llama3:8b = %q, want %q", got, want)
	}
}

// FuzzCanonModel: CanonModel never panics, is idempotent, keeps FoldModel's
// equalities (a name equal to another but for case still is: never fewer
// equals), and every spelling AppendModelSpellings lists has the name's
// canonical form, the first being the form itself.
func FuzzCanonModel(f *testing.F) {
	for _, s := range []string{"llama3.1", "registry.ollama.ai/library/llama3.1:latest", "https://http://x",
		"library/:latest", "registry.ollama.ai//x", "GPT-4o", "a/b/c:latest", "registry.ollama.ai/registry.ollama.ai/m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c := CanonModel(name)
		if ref := canonModelRef(name); c != ref {
			t.Fatalf("CanonModel(%q) = %q, the folded-then-cut reading gives %q", name, c, ref)
		}
		if b := AppendCanonModel([]byte("x"), name); string(b) != "x"+c {
			t.Fatalf("AppendCanonModel(x, %q) = %q, want x%q", name, b, c)
		}
		if again := CanonModel(c); again != c {
			t.Fatalf("CanonModel(%q) = %q, but CanonModel of that is %q", name, c, again)
		}
		if CanonModel(upperASCII(name)) != c {
			t.Fatalf("CanonModel(%q) depends on ASCII case", name)
		}
		sp := AppendModelSpellings(nil, name)
		if len(sp) == 0 || sp[0] != c || len(sp) > 6 {
			t.Fatalf("spellings of %q = %q: want %q first, at most 6", name, sp, c)
		}
		for _, s := range sp {
			if CanonModel(s) != c {
				t.Fatalf("spelling %q of %q has form %q, want %q", s, name, CanonModel(s), c)
			}
		}
	})
}

// canonModelRef is CanonModel as first written (its parts cut from the
// folded name): CanonModel now finds them in the name as sent and folds
// only what is left, which must come to the same form.
func canonModelRef(name string) string {
	s := FoldModel(name)
	for {
		if t, ok := strings.CutPrefix(s, "http://"); ok {
			s = t
		} else if t, ok := strings.CutPrefix(s, "https://"); ok {
			s = t
		} else {
			break
		}
	}
	if rest, ok := strings.CutPrefix(s, ollamaHost+"/"); ok {
		if i := strings.IndexByte(rest, '/'); i > 0 && i < len(rest)-1 && strings.IndexByte(rest[i+1:], '/') < 0 {
			s = rest
		}
	}
	if rest, ok := strings.CutPrefix(s, ollamaNamespace+"/"); ok && rest != "" && strings.IndexByte(rest, '/') < 0 {
		s = rest
	}
	if base, ok := strings.CutSuffix(s, ":"+ollamaTag); ok && base != "" &&
		base[len(base)-1] != '/' && strings.IndexByte(base, ':') < 0 {
		s = base
	}
	return s
}

// AppendCanonModel into a buffer with room allocates nothing, capitals
// and Ollama's parts included: the weigher looks a name up this way on
// every request.
func TestAppendCanonModelAllocatesNothing(t *testing.T) {
	var buf [64]byte
	for _, name := range []string{"Qwen/Qwen2.5-7B-Instruct", "REGISTRY.OLLAMA.AI/Library/Llama3.1:LATEST", "gpt-4o"} {
		var got []byte
		if n := testing.AllocsPerRun(100, func() { got = AppendCanonModel(buf[:0], name) }); n != 0 {
			t.Errorf("AppendCanonModel(%q): %v allocations, want 0", name, n)
		}
		if string(got) != CanonModel(name) {
			t.Errorf("AppendCanonModel(%q) = %q, want %q", name, got, CanonModel(name))
		}
	}
}
