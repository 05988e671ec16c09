package weigher

import "testing"

// TestResponsesStoredItemsHidden: a reasoning item given by id without
// its encrypted_content, and an image_generation_call without its result,
// are loaded from the upstream's store and billed as input: hidden
// context. With their content in the body they are weighed from it.
func TestResponsesStoredItemsHidden(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		item   string
		hidden bool
	}{
		{`{"type":"reasoning","id":"rs_68af0123456789abcdef","summary":[]}`, true},
		{`{"type":"reasoning","id":"rs_68af0123456789abcdef","summary":[{"type":"summary_text","text":"I checked."}]}`, true},
		{`{"type":"image_generation_call","id":"ig_68af0123456789abcdef"}`, true},
		{`{"type":"reasoning","id":"rs_68af0123456789abcdef","summary":[],"encrypted_content":"gAAAAB"}`, false},
		{`{"type":"reasoning","summary":[{"type":"summary_text","text":"I checked."}]}`, false},
		{`{"type":"image_generation_call","id":"ig_1","result":"iVBORw0KGgo="}`, false},
	} {
		body := `{"model":"gpt-5","max_output_tokens":100,"input":[{"role":"user","content":"go on"},` + c.item + `]}`
		if e := w.Responses([]byte(body)); e.ServerContext != c.hidden {
			t.Errorf("%s: ServerContext %v, want %v", c.item, e.ServerContext, c.hidden)
		}
	}
}
