package weigher

// fallbackBytesPerToken is the divisor of the byte-based estimate: one token
// per 2 bytes, rounded up. English prose runs about 4 bytes per token in
// OpenAI's encodings (https://platform.openai.com/tokenizer: "one token
// generally corresponds to ~4 characters of text for common English text"),
// and JSON framing, code, and CJK text (3 UTF-8 bytes per character, rarely
// below one token per character) still average above 2, so halving the body
// size over-reserves for almost any body; reconciliation refunds the excess.
const fallbackBytesPerToken = 2

// Bytes is the conservative estimate for a body that cannot be parsed:
// ceil(len(body) / 2) input tokens (see fallbackBytesPerToken) and model's
// default output reservation, with Parsed false. model may be "" (unknown).
func (w *Weigher) Bytes(body []byte, model string) Estimate {
	return Estimate{
		Model:        model,
		InputTokens:  ceilDiv(int64(len(body)), fallbackBytesPerToken),
		OutputTokens: w.defaultOutput(model),
		Parsed:       false,
	}
}
