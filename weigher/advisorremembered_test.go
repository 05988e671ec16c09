package weigher

import (
	"github.com/tidwall/gjson"

	"fmt"
	"strings"
	"testing"
)

// TestRememberedToolsSameVerdicts weighs growing chat conversations whose
// tools lists (before or after the messages, so that resume points carry
// them too) hold no advisor tool or one spelled in several ways, each
// body three times through the count cache, against the weigher without
// cache or layout (plain), which searches every list: chat skips the
// advisor search for a tools list remembered whole (elements.remembered),
// and must refuse and weigh every body as the search does. It also checks
// that the skip is taken: a list sent before is laid out remembered.
func TestRememberedToolsSameVerdicts(t *testing.T) {
	desc := strings.Repeat("Looks up the words given in the product manuals and returns the best passages. ", 3)
	fn := func(name string) string {
		return `{"type":"function","function":{"name":"` + name + `","description":"` + desc + `","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}`
	}
	lists := []string{
		`[` + fn("search") + `]`,
		`[` + fn("search") + `,{"type":"openrouter:advisor","parameters":{"model":"o1-pro"}}]`,
		`[` + fn("search") + `,{"type":"ADVISOR_20260301","name":"advisor"}]`,
		`[` + fn("search") + `,{"type":"orq:advi\u0073or"}]`,
		`[` + fn("advisor") + `,{"type":"function","function":{"name":"ask_advisor","description":"the Advisor"}}]`,
	}
	w, ref := testWeigher(t), plain(t)
	remembered := 0
	for li, list := range lists {
		for _, toolsFirst := range []bool{false, true} {
			var msgs []string
			for turn := range 6 {
				msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"list %d first %v turn %d: %s"}`, li, toolsFirst, turn, desc))
				messages := `"messages":[` + strings.Join(msgs, ",") + `]`
				tools := `"tools":` + list
				body := `{"model":"gpt-4o-mini",` + messages + `,` + tools + `,"max_tokens":9}`
				if toolsFirst {
					body = `{"model":"gpt-4o-mini",` + tools + `,` + messages + `,"max_tokens":9}`
				}
				want := ref.Weigh(KindChat, []byte(body))
				if li > 0 && li < 4 && want.Fault != FaultModelOutsideBody {
					t.Fatalf("list %d: the reference gives fault %v, want model_outside_body", li, want.Fault)
				}
				for i := range 3 {
					if got := w.Weigh(KindChat, []byte(body)); got != want {
						t.Fatalf("list %d, tools first %v, turn %d, weighing %d: %+v, want %+v", li, toolsFirst, turn, i, got, want)
					}
				}
				if rememberedTools(w, body) {
					remembered++
				}
			}
		}
	}
	t.Logf("%d bodies laid out their tools list remembered", remembered)
	if remembered == 0 {
		t.Error("no tools list was laid out remembered: the skip was never taken")
	}
}

// rememberedTools reports whether w's scan of the chat body lays out its
// tools list remembered (elements.remembered).
func rememberedTools(w *Weigher, body string) bool {
	d, _, ok := w.parseRequestWith([]byte(body), parseOptions{fields: chatFields, resume: resumeOn, counted: chatMessageFields, callerChecks: true})
	if !ok {
		return false
	}
	defer d.close()
	found := false
	d.walk(true, func(k string, _ gjson.Result, elems elements) bool {
		found = found || k == "tools" && elems.remembered
		return true
	})
	return found
}
