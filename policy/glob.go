package policy

import (
	"strings"
	"unicode/utf8"

	"github.com/llmguard/llmguard/spec"
)

// MatchModel reports whether the model name matches glob. The syntax is
// path.Match's (`*`, `?`, `[…]` classes with ranges and `^` negation, `\`
// escapes), but a model name is not a path: `*` and `?` match `/` too, so
// `*` matches `openai/gpt-4o` and `meta-llama/*` matches
// `meta-llama/Llama-3.3-70B-Instruct`. Nor is it case-sensitive: a name
// matches when some spelling of it in other ASCII cases matches as
// written (`gpt-4o*` matches `GPT-4o-Mini`, `[a-c]` matches `B`, and a
// negated class of letters, `[^a]`, matches both cases of every letter),
// as upstreams that read model names case-insensitively serve them
// (Ollama: "Mistral" and "mistral" are the same model, ollama/ollama
// types/model/name.go), so that no spelling of a model escapes a rule
// on it, and every name a glob matched as written it still matches. A malformed glob (which config validation
// refuses) matches an undefined set of names, never panics.
//
// It runs in O(len(glob) × len(name)) steps at worst: one `*` is
// backtracked at a time, as in the classic wildcard matcher.
func MatchModel(glob, name string) bool {
	// gi, ni: positions in glob and name; star, mark: the glob position
	// after the last `*` seen and the name position it was tried at.
	gi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(name) {
		if gi < len(glob) {
			switch c := glob[gi]; c {
			case '*':
				star, mark = gi+1, ni
				gi++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[ni:])
				gi, ni = gi+1, ni+w
				continue
			case '[':
				r, w := utf8.DecodeRuneInString(name[ni:])
				if end, ok := matchClass(glob, gi, r); ok {
					gi, ni = end, ni+w
					continue
				}
			case '\\':
				if gi+1 < len(glob) && spec.LowerASCII(glob[gi+1]) == spec.LowerASCII(name[ni]) {
					gi, ni = gi+2, ni+1
					continue
				}
			default:
				if spec.LowerASCII(c) == spec.LowerASCII(name[ni]) {
					gi, ni = gi+1, ni+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last `*` take one more rune and retry from there.
		_, w := utf8.DecodeRuneInString(name[mark:])
		mark += w
		gi, ni = star, mark
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}

// matchClass matches r against the class that opens at glob[start] ('['),
// which config validation has found well formed (path.Match's syntax). It returns the position
// after the class's ']' and whether r, in either of its ASCII cases, is
// in the class: whether some spelling of the name matches as written
// (MatchModel), so `[a-c]` holds `B`, and a negated class of letters holds
// both cases of every letter (`[^a]` holds `A`, so `a` too).
func matchClass(glob string, start int, r rune) (end int, ok bool) {
	i := start + 1
	negated := false
	if i < len(glob) && glob[i] == '^' {
		negated = true
		i++
	}
	matched, matchedOther := false, false
	other := otherCase(r)
	for i < len(glob) && glob[i] != ']' {
		lo, w := classChar(glob, i)
		i += w
		hi := lo
		if i+1 < len(glob) && glob[i] == '-' {
			hi, w = classChar(glob, i+1)
			i += 1 + w
		}
		matched = matched || lo <= r && r <= hi
		matchedOther = matchedOther || lo <= other && other <= hi
	}
	return i + 1, matched != negated || other != r && matchedOther != negated
}

// classChar reads one character of a class at glob[i], unescaping `\x`.
func classChar(glob string, i int) (rune, int) {
	if glob[i] == '\\' && i+1 < len(glob) {
		r, w := utf8.DecodeRuneInString(glob[i+1:])
		return r, 1 + w
	}
	return utf8.DecodeRuneInString(glob[i:])
}

// otherCase is r in its other ASCII case: a capital made small, a small
// letter made capital; any other rune as it is.
func otherCase(r rune) rune {
	switch {
	case 'A' <= r && r <= 'Z':
		return r + 'a' - 'A'
	case 'a' <= r && r <= 'z':
		return r - ('a' - 'A')
	}
	return r
}

// MatchModelAlias reports whether the model name matches glob as it is
// written (MatchModel) or as any other spelling Ollama reads as the same
// model (spec.CanonModel): a glob without metacharacters matches every
// name of the same canonical form (`llama3.1:latest` matches `llama3.1`,
// `library/llama3.1` and `https://registry.ollama.ai/library/llama3.1`,
// and the other way round), any other glob matches when it matches one of
// spec.AppendModelSpellings (`library/*` matches `llama3.1`). It matches
// every name MatchModel matches, and more: a name of another upstream
// gains the matches of its Ollama spellings too (`*:latest` matches
// `gpt-4o`), which can only put a request under more rules. This is how
// rules' models: match.
func MatchModelAlias(glob, name string) bool {
	return modelGlobAny([]string{glob}, name)
}

// hasGlobMeta reports whether glob holds a metacharacter (*, ?, [ or \):
// without one it matches only its own spelling, case aside.
func hasGlobMeta(glob string) bool { return strings.ContainsAny(glob, `*?[\`) }
