package spec

import "strings"

// Ollama reads a model name as [host/][namespace/]model[:tag] and fills
// a part left out with its default: the registry host registry.ollama.ai,
// the namespace library, the tag latest (ollama/ollama types/model/name.go:
// ParseName fills "registry.ollama.ai/library/?:latest"; a leading
// "http://" or "https://" is dropped before parsing). So `llama3.1`,
// `llama3.1:latest`, `library/llama3.1:latest` and
// `registry.ollama.ai/library/llama3.1:latest` are one model, and a rule,
// price or setting on one spelling must hold every other.
const (
	ollamaHost      = "registry.ollama.ai"
	ollamaNamespace = "library"
	ollamaTag       = "latest"
)

// CanonModel is the canonical form of a model name: FoldModel's, with the
// default parts Ollama fills in taken out, so that two spellings of one
// model have the same form:
//   - every leading "http://" and "https://" dropped;
//   - "registry.ollama.ai/" dropped from host/namespace/model (exactly two
//     '/' and neither part empty);
//   - "library/" dropped from namespace/model (one '/', model not empty);
//   - ":latest" dropped from a name with no other ':' whose model part
//     (after its last '/') is not empty.
//
// A name with none of these parts is its FoldModel form: `gpt-4o` stays
// `gpt-4o` (never `gpt-4o:latest`), so names of other upstreams only gain
// equals, never lose any. CanonModel is idempotent, never panics, and
// allocates only when name holds an ASCII capital.
func CanonModel(name string) string {
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

// SameModel reports whether a and b name the same model: equal in
// CanonModel's form (so also whatever their ASCII case).
func SameModel(a, b string) bool { return CanonModel(a) == CanonModel(b) }

// AppendModelSpellings appends to dst the lower-case spellings of name's
// model that Ollama reads as it, and returns dst: CanonModel(name) first,
// then its forms with the default tag (":latest", for a name with no tag),
// namespace ("library/", for a name with none) and registry host
// ("registry.ollama.ai/", for a name with a namespace or given the default
// one), each appended only if CanonModel brings it back to
// CanonModel(name). The scheme-prefixed forms ("https://…") are not
// listed: there is no end to them. At most six strings; a name of another
// upstream gets them too (`gpt-4o:latest`, `library/gpt-4o`), which can
// only make more globs match it.
func AppendModelSpellings(dst []string, name string) []string {
	c := CanonModel(name)
	dst = append(dst, c)
	var bases [3]string
	nb := 0
	switch strings.Count(c, "/") {
	case 0:
		bases = [3]string{c, ollamaNamespace + "/" + c, ollamaHost + "/" + ollamaNamespace + "/" + c}
		nb = 3
	case 1:
		bases = [3]string{c, ollamaHost + "/" + c}
		nb = 2
	default:
		bases[0], nb = c, 1
	}
	for i, b := range bases[:nb] {
		if i > 0 && CanonModel(b) == c {
			dst = append(dst, b)
		}
		if t := b + ":" + ollamaTag; CanonModel(t) == c {
			dst = append(dst, t)
		}
	}
	return dst
}
