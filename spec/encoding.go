package spec

// Encoding names a config may give a model (models.<name>.encoding): the
// tiktoken vocabularies llmguard embeds through
// github.com/pkoukk/tiktoken-go-loader, named as OpenAI's tiktoken names
// them (https://github.com/openai/tiktoken/blob/main/tiktoken_ext/openai_public.py).
const (
	// EncodingO200k is the GPT-4o / GPT-4.1 / GPT-5 / o-series vocabulary.
	EncodingO200k = "o200k_base"
	// EncodingCL100k is the GPT-4 / GPT-3.5-turbo vocabulary.
	EncodingCL100k = "cl100k_base"
	// EncodingP50k is the legacy Codex / text-davinci-002/003 vocabulary.
	EncodingP50k = "p50k_base"
	// EncodingR50k is the legacy GPT-3 vocabulary.
	EncodingR50k = "r50k_base"
)

// encodingNames is the one list of encodings, newest first.
var encodingNames = []string{EncodingO200k, EncodingCL100k, EncodingP50k, EncodingR50k}

// EncodingNames returns every encoding's name, newest first (a fresh slice
// the caller may keep).
func EncodingNames() []string { return append([]string(nil), encodingNames...) }
