package weigher

import "testing"

// TestChatResponseFormatSchemaCounted: a chat body's
// response_format.json_schema adds the tokens of its JSON text to the
// input, with the count cache and without; a response_format without one,
// and a body without response_format, add none.
func TestChatResponseFormatSchemaCounted(t *testing.T) {
	const schema = `{"name":"answer","schema":{"type":"object","properties":{"city":{"type":"string","description":"the city asked about"}}}}`
	base := `{"model":"gpt-4o","messages":[{"role":"user","content":"Where is the tower?"}]`
	for _, w := range []*Weigher{cachedWeigher(t, 1<<20), uncached(t)} {
		enc := w.encoders[EncodingO200k]
		plain := w.Chat([]byte(base + `}`))
		text := w.Chat([]byte(base + `,"response_format":{"type":"text"}}`))
		with := w.Chat([]byte(base + `,"response_format":{"type":"json_schema","json_schema":` + schema + `}}`))
		if !plain.Parsed || !text.Parsed || !with.Parsed {
			t.Fatalf("not parsed: %+v %+v %+v", plain, text, with)
		}
		if text.InputTokens != plain.InputTokens {
			t.Errorf("response_format without a schema: %d input tokens, without it %d", text.InputTokens, plain.InputTokens)
		}
		if got, want := with.InputTokens-plain.InputTokens, countText(enc, schema); got != want || want == 0 {
			t.Errorf("the schema added %d input tokens, its text holds %d", got, want)
		}
	}
}
