package weigher

import (
	"encoding/json"
	"strings"
	"testing"
)

// A body that names fallback models beside "model" (OpenRouter's
// "models", LiteLLM's and OpenRouter Messages' "fallbacks", …), in any
// case, is not weighed: the upstream may serve and bill one of them, and
// llmguard prices "model" alone. The same bodies without the member are
// weighed as before.
func TestFallbackModelsRefused(t *testing.T) {
	w := testWeigher(t)
	bodies := []struct {
		name string
		kind Kind
		head string // the body up to its last member
	}{
		{"chat", KindChat, `{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]`},
		{"responses", KindResponses, `{"model":"gpt-4o-mini","max_output_tokens":1000,"input":"hi"`},
		{"completions", KindCompletions, `{"model":"gpt-3.5-turbo-instruct","max_tokens":100,"prompt":"hi"`},
		{"embeddings", KindEmbeddings, `{"model":"text-embedding-3-small","input":"hi"`},
		{"images", KindImages, `{"model":"gpt-image-1","prompt":"a cat"`},
		{"messages", KindMessages, `{"model":"claude-haiku-4-5","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]`},
	}
	members := []string{
		`"fallbacks":[{"model":"claude-opus-4-7"}]`,
		`"models":["openai/gpt-4o-mini","anthropic/claude-opus-4.7"]`,
		`"fallbacks":["gpt-4o"]`,
		`"context_window_fallbacks":[{"gpt-4o-mini":["gpt-4o"]}]`,
		`"content_policy_fallbacks":[{"gpt-4o-mini":["gpt-4o"]}]`,
		`"fallback_config":{"depth":2}`,
		`"Fallbacks":["gpt-4o"]`,
		`"MODELS":["gpt-4o"]`,
		`"fallbac\u006bs":["gpt-4o"]`,
		`"fallbac\u212as":["gpt-4o"]`, // KELVIN SIGN folds to k
		`"preset":"my-preset"`,        // OpenRouter: a preset can set the model and fallbacks
		`"Preset":"my-preset"`,
	}
	for _, b := range bodies {
		plain := w.Weigh(b.kind, []byte(b.head+`}`))
		if !plain.Parsed {
			t.Fatalf("%s: control body not weighed: %v %s", b.name, plain.Fault, plain.FaultDetail)
		}
		for _, m := range members {
			for _, body := range []string{b.head + `,` + m + `}`, `{` + m + `,` + b.head[1:] + `}`} {
				e := w.Weigh(b.kind, []byte(body))
				if e.Parsed || e.Fault != FaultModelOutsideBody || e.Fault.Code() != "model_outside_body" {
					t.Errorf("%s %s: Parsed %v, fault %v, want model_outside_body", b.name, body, e.Parsed, e.Fault)
					continue
				}
				if !strings.Contains(e.FaultDetail, `"`) || !strings.Contains(strings.ToLower(e.Fault.Message(e.FaultDetail)), "fallbac") &&
					!strings.Contains(strings.ToLower(e.FaultDetail), "models") {
					t.Errorf("%s %s: detail %q names no field", b.name, m, e.FaultDetail)
				}
			}
		}
		// Nested members of the same names are not fallbacks.
		nested := b.head + `,"metadata":{"models":"x","fallbacks":"y"}}`
		if b.kind == KindMessages {
			nested = b.head + `,"metadata":{"user_id":"u"}}`
		}
		if e := w.Weigh(b.kind, []byte(nested)); e.Fault == FaultModelOutsideBody {
			t.Errorf("%s: nested member refused: %s", b.name, nested)
		}
	}
}

// isFallbackModelField's quick filters keep every spelling a decoder that
// ignores case reads as one of the fields.
func TestIsFallbackModelField(t *testing.T) {
	for _, k := range append(FallbackModelFields, "Models", "FALLBACKS", "modelſ", "fallbacKs", "Context_Window_Fallbacks",
		"content_policy_fallbac\u212aſ") {
		if !isFallbackModelField(k) {
			t.Errorf("%q not found", k)
		}
	}
	for _, k := range []string{"model", "modelss", "fallback", "metadata", "", "c", "context_window_fallback", "provider"} {
		if isFallbackModelField(k) {
			t.Errorf("%q found", k)
		}
	}
}

// FuzzFallbackModelsKey compares the refusal with encoding/json's reading
// of the body's top-level keys: a body with a fallback-models member (in
// any case, escaped or not) is never weighed, and one without is never
// refused for it.
func FuzzFallbackModelsKey(f *testing.F) {
	f.Add(`{"model":"text-embedding-3-small","input":"hi","fallbacks":["x"]}`)
	f.Add(`{"model":"text-embedding-3-small","input":"hi","meta":{"models":1}}`)
	f.Add(`{"model":"m","input":"x","Fallbac\u212As":[]}`)
	f.Add(`{"model":"m","input":"x","models\u0073":[]}`)
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body string) {
		var top map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &top) != nil {
			return
		}
		want := false
		for k := range top {
			for _, name := range FallbackModelFields {
				want = want || strings.EqualFold(k, name)
			}
		}
		e := w.Weigh(KindEmbeddings, []byte(body))
		got := e.Fault == FaultModelOutsideBody
		if want && e.Parsed || got && !want {
			t.Fatalf("%q: parsed %v, fault %v; a fallback member: %v", body, e.Parsed, e.Fault, want)
		}
	})
}

// A "model" naming an OpenRouter preset ("@preset/<name>") is served as
// the preset's model: refused as model_outside_body, in any case.
func TestPresetModelRefused(t *testing.T) {
	w := testWeigher(t)
	for _, m := range []string{"@preset/cheap", "@PRESET/cheap", "@pre\u0073et/cheap"} {
		e := w.Weigh(KindChat, []byte(`{"model":"`+m+`","messages":[{"role":"user","content":"hi"}]}`))
		if e.Fault != FaultModelOutsideBody {
			t.Errorf("model %s: fault %v, want model_outside_body", m, e.Fault)
		}
	}
	if e := w.Weigh(KindChat, []byte(`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"@preset/x"}]}`)); e.Fault != FaultNone || !e.Parsed {
		t.Errorf("a plain model: fault %v", e.Fault)
	}
}

// Chat looks for the fallback model fields in its own walk of the
// top-level members (parseOptions.callerChecks), which stops at the first
// member failing its field check: its verdict is still the one of the
// general path (parseRequest: the fallback fields first, then the field
// check), with a case variant before, after or inside the messages, a
// preset model, and a weigher with and without the count cache, cold and
// warm, on the body whole and resumed.
func TestChatFallbackFaultOrder(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hello there, a message long enough to be cached by the count cache"}]`
	bad := `"messages":[{"role":"user","Content":"hello there, a message long enough to be cached by the count cache"}]`
	bodies := []string{
		`{"Model":"gpt-4o","models":["gpt-4o-mini"],` + msgs + `}`,
		`{"model":"gpt-4o","MAX_TOKENS":5,` + msgs + `,"fallbacks":["x"]}`,
		`{"model":"gpt-4o",` + bad + `,"fallbacks":["x"]}`,
		`{"model":"gpt-4o","fallbacks":["x"],` + bad + `}`,
		`{"model":"gpt-4o",` + bad + `}`,
		`{"model":"gpt-4o","Stream":true,` + msgs + `,"model":"@preset/p"}`,
		`{"model":"@Preset/p","MAX_TOKENS":5,` + msgs + `}`,
		`{"MAX_TOKENS":5,"model":"@preset/p",` + msgs + `}`,
		`{"model":"gpt-4o",` + msgs + `,"preset":"p","Stream":true}`,
		`{"model":"gpt-4o",` + msgs + `,"max_tokens":5}`,
		`{"model":"gpt-4o",` + msgs + `,"fallbacks":["x"]}`,
	}
	for _, cached := range []bool{false, true} {
		w := testWeigher(t)
		if cached {
			w = cachedWeigher(t, 4<<20)
		}
		for round := range 2 { // cold, then warm (remembered elements, resume points)
			for i, body := range bodies {
				got := w.Chat([]byte(body))
				want := Estimate{Parsed: true}
				if d, fb, ok := w.parseRequest([]byte(body), chatFields); !ok {
					want = fb
				} else {
					d.close()
				}
				if got.Fault != want.Fault || (want.Fault != FaultNone && got.FaultDetail != want.FaultDetail) || got.Parsed != want.Parsed {
					t.Errorf("cached %v, round %d, body %d: Chat gives %v %q (parsed %v); the general path %v %q (parsed %v)",
						cached, round, i, got.Fault, got.FaultDetail, got.Parsed, want.Fault, want.FaultDetail, want.Parsed)
				}
			}
		}
	}
}

// isFallbackModelField steps over keys by their first byte and length
// before comparing them: it answers as the comparison with every name
// (strings.EqualFold) does, for the names, their case and Unicode
// variants (KELVIN SIGN, LONG S), the chat fields and other keys; the
// fuzzer tries any.
func TestFallbackModelFieldPrefilter(t *testing.T) {
	keys := []string{"messages", "max_tokens", "model", "temperature", "tools", "stream", "m", "", "ſtream"}
	for _, f := range FallbackModelFields {
		keys = append(keys, f, strings.ToUpper(f), strings.ReplaceAll(f, "k", "\u212a"), strings.ReplaceAll(f, "s", "\u017f"), f+"x", f[1:])
	}
	for _, k := range keys {
		if got, want := isFallbackModelField(k), anyFallbackName(k); got != want {
			t.Errorf("isFallbackModelField(%q) = %v, comparing with every name %v", k, got, want)
		}
	}
}

func FuzzFallbackModelField(f *testing.F) {
	for _, k := range append(FallbackModelFields, "messages", "Fallbac\u212as", "mode\u017fl", "ſ") {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := isFallbackModelField(k), anyFallbackName(k); got != want {
			t.Errorf("isFallbackModelField(%q) = %v, comparing with every name %v", k, got, want)
		}
	})
}

// anyFallbackName is the reference of isFallbackModelField: k compared
// with each of FallbackModelFields, in any case.
func anyFallbackName(k string) bool {
	for _, f := range FallbackModelFields {
		if strings.EqualFold(k, f) {
			return true
		}
	}
	return false
}
