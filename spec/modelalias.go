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
	i, j := canonBounds(name)
	return FoldModel(name[i:j])
}

// AppendCanonModel appends CanonModel(name) to dst and returns it, without
// allocating when dst has room: for a lookup of a name that may hold
// capitals (`Qwen/Qwen2.5-7B-Instruct`) on every request, by
// m[string(b)], which Go does not copy.
func AppendCanonModel(dst []byte, name string) []byte {
	i, j := canonBounds(name)
	for k := i; k < j; k++ {
		dst = append(dst, LowerASCII(name[k]))
	}
	return dst
}

// canonBounds returns where CanonModel's form lies in name: it is
// FoldModel(name[i:j]), since folding ASCII case moves no byte and the
// parts taken out are matched whatever their case.
func canonBounds(name string) (i, j int) {
	j = len(name)
	for {
		if ModelHasPrefix(name[i:j], "http://") {
			i += len("http://")
		} else if ModelHasPrefix(name[i:j], "https://") {
			i += len("https://")
		} else {
			break
		}
	}
	if s := name[i:j]; ModelHasPrefix(s, ollamaHost+"/") {
		rest := s[len(ollamaHost)+1:]
		if k := strings.IndexByte(rest, '/'); k > 0 && k < len(rest)-1 && strings.IndexByte(rest[k+1:], '/') < 0 {
			i += len(ollamaHost) + 1
		}
	}
	if s := name[i:j]; ModelHasPrefix(s, ollamaNamespace+"/") {
		if rest := s[len(ollamaNamespace)+1:]; rest != "" && strings.IndexByte(rest, '/') < 0 {
			i += len(ollamaNamespace) + 1
		}
	}
	const tag = ":" + ollamaTag
	if s := name[i:j]; len(s) > len(tag) && ModelHasPrefix(s[len(s)-len(tag):], tag) {
		if base := s[:len(s)-len(tag)]; base[len(base)-1] != '/' && strings.IndexByte(base, ':') < 0 {
			j -= len(tag)
		}
	}
	return i, j
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
// listed: there is no end to them. At most six strings, all parts of one
// allocated string; a name of another upstream gets them too (`gpt-4o:latest`,
// `library/gpt-4o`), which can only make more globs match it.
func AppendModelSpellings(dst []string, name string) []string {
	c := CanonModel(name)
	dst = append(dst, c)
	const host, ns, tag = ollamaHost + "/", ollamaNamespace + "/", ":" + ollamaTag
	var lead string // the parts a spelling may lead with, longest first
	switch strings.Count(c, "/") {
	case 0:
		lead = host + ns
	case 1:
		lead = host
	}
	// full is every spelling's text: lead + c + tag; each spelling is a
	// part of it, from one of lead's part boundaries to the end of c or
	// of the tag.
	full := lead + c + tag
	end := len(lead) + len(c)
	starts := [3]int{len(lead), len(host), 0}
	n := 1 // no lead: c alone
	switch lead {
	case host + ns:
		n = 3
	case host:
		starts[1], n = 0, 2
	}
	for _, start := range starts[:n] {
		if start != len(lead) { // c itself is dst[0]
			if sp := full[start:end]; CanonModel(sp) == c {
				dst = append(dst, sp)
			}
		}
		if sp := full[start:]; CanonModel(sp) == c {
			dst = append(dst, sp)
		}
	}
	return dst
}
