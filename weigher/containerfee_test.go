package weigher

import "testing"

// TestContainerGB: a Responses request's hosted code interpreter and shell
// tools reserve their containers' gigabyte-sessions: the memory_limit
// asked (1 GB by default), the largest size (64) for a container named by
// id or a size that is not one of the four, none for a shell run locally
// or a function tool; several tools add up, and a type spelled with a
// \u escape is the same type.
func TestContainerGB(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name, tools string
		want        int32
	}{
		{"auto, default size", `[{"type":"code_interpreter","container":{"type":"auto"}}]`, 1},
		{"auto, 4g", `[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"4g"}}]`, 4},
		{"auto, 64G in capitals", `[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"64G"}}]`, 64},
		{"auto, null size", `[{"type":"code_interpreter","container":{"type":"auto","memory_limit":null}}]`, 1},
		{"a size that is not one", `[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"8g"}}]`, 64},
		{"a size as a number", `[{"type":"code_interpreter","container":{"type":"auto","memory_limit":1}}]`, 64},
		{"a container by id", `[{"type":"code_interpreter","container":"cntr_abc"}]`, 64},
		{"no container", `[{"type":"code_interpreter"}]`, 1},
		{"escaped type", `[{"type":"code\u005finterpreter","container":{"type":"auto","memory_limit":"16g"}}]`, 16},
		{"hosted shell", `[{"type":"shell","environment":{"type":"container_auto","memory_limit":"16g"}}]`, 16},
		{"shell on a container by id", `[{"type":"shell","environment":{"type":"container_reference","container_id":"cntr_abc"}}]`, 64},
		{"shell without environment", `[{"type":"shell"}]`, 1},
		{"local shell", `[{"type":"shell","environment":{"type":"local"}}]`, 0},
		{"function tool", `[{"type":"function","name":"code_interpreter","parameters":{}}]`, 0},
		{"two containers", `[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"4g"}},{"type":"shell","environment":{"type":"container_auto"}}]`, 5},
	} {
		body := `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":10,"tools":` + tc.tools + `}`
		est := w.Weigh(KindResponses, []byte(body))
		if !est.Parsed || est.ContainerGB != tc.want {
			t.Errorf("%s: parsed %v, %d GB-sessions, want %d", tc.name, est.Parsed, est.ContainerGB, tc.want)
		}
	}
	// Only the Responses API hosts these tools: a chat body naming one
	// reserves no container.
	if est := w.Weigh(KindChat, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"code_interpreter"}]}`)); est.ContainerGB != 0 {
		t.Errorf("chat: %d GB-sessions, want 0", est.ContainerGB)
	}
}
