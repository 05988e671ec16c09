package spec

// Model names are compared without regard to ASCII case wherever llmguard
// decides what a name is (rules' models: globs, prices, a configured
// model's settings): upstreams that read names case-insensitively serve
// `GPT-4o` as gpt-4o (Ollama: "Mistral" and "mistral" are the same model,
// ollama/ollama types/model/name.go), so no spelling of a model may escape
// what is set for it.

// LowerASCII is c with an ASCII capital made small; any other byte as it
// is: the one case fold of model names.
func LowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// FoldModel is name with its ASCII capitals made small: the form in which
// model names are compared when case is ignored. It allocates only when
// name holds a capital.
func FoldModel(name string) string {
	for i := 0; i < len(name); i++ {
		if 'A' <= name[i] && name[i] <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				b[j] = LowerASCII(b[j])
			}
			return string(b)
		}
	}
	return name
}

// ModelHasPrefix reports whether model starts with prefix, ASCII letters
// matching in either case (as FoldModel compares them), without
// allocating.
func ModelHasPrefix(model, prefix string) bool {
	if len(model) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if LowerASCII(model[i]) != LowerASCII(prefix[i]) {
			return false
		}
	}
	return true
}
