package weigher

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKindTable walks every Kind from 0 up to the first that is no kind
// (numKinds) and checks its row is complete, so a Kind added without its
// row fails here rather than reading as KindOther: a unique name, at least
// one path of its own (KindOther has none) that KindOf maps back to it, and
// for a weighed kind its weigh function, usage parser and stream reader (a
// kind that is not weighed has none: they would never be called).
func TestKindTable(t *testing.T) {
	names := map[string]Kind{}
	paths := map[string]Kind{}
	for k := Kind(0); k <= numKinds; k++ {
		if k == numKinds {
			// The first value that is no kind reads as KindOther everywhere.
			s := NewStream(k)
			if k.String() != "other" || k.Weighed() || s.Event(nil, []byte(`[DONE]`)) != (StreamUpdate{}) {
				t.Errorf("Kind(%d), no kind: String %q, Weighed %v; want other, false, no stream", k, k.String(), k.Weighed())
			}
			if _, ok := ParseUsage(k, []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":2}}`)); ok {
				t.Errorf("Kind(%d), no kind: ParseUsage ok", k)
			}
			break
		}
		r := kinds[k]
		if r.name == "" {
			t.Errorf("Kind(%d) has no row in kinds (no name)", k)
			continue
		}
		if prev, dup := names[r.name]; dup {
			t.Errorf("Kind(%d) and Kind(%d) share the name %q", prev, k, r.name)
		}
		names[r.name] = k
		if k.String() != r.name || k.Weighed() != r.weighed {
			t.Errorf("%s: String %q, Weighed %v; the row says %q, %v", r.name, k.String(), k.Weighed(), r.name, r.weighed)
		}
		if (k == KindOther || k == KindUnmetered) != (len(r.paths) == 0) {
			t.Errorf("%s: paths %q; every kind but other and unmetered (found by family) has a path, they none", r.name, r.paths)
		}
		for _, p := range r.paths {
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, "?#") {
				t.Errorf("%s: path %q: want /…, no trailing slash, no query (KindOf strips them)", r.name, p)
			}
			if prev, dup := paths[p]; dup {
				t.Errorf("%s: path %q is %s's too", r.name, p, prev)
			}
			paths[p] = k
			if got := KindOf("POST", p); got != k {
				t.Errorf("KindOf(POST, %q) = %s, want %s", p, got, r.name)
			}
			if got := KindOf("POST", p+"/?x=1"); got != k {
				t.Errorf("KindOf(POST, %q) = %s, want %s", p+"/?x=1", got, r.name)
			}
			if got := KindOf("GET", p); got != KindOther {
				t.Errorf("KindOf(GET, %q) = %s, want other", p, got)
			}
		}
		funcs := map[string]bool{"weigh": r.weigh != nil, "usage parser": r.usage != nil, "stream reader": r.stream != nil}
		for f, has := range funcs {
			if has != r.weighed {
				t.Errorf("%s: weighed %v but has a %s: %v", r.name, r.weighed, f, has)
			}
		}
	}
}

// TestKindWeighed pins what the proxy relies on: only KindOther and
// KindCountTokens are counted as requests only.
func TestKindWeighed(t *testing.T) {
	for k, want := range map[Kind]bool{
		KindOther: false, KindChat: true, KindResponses: true, KindCompletions: true,
		KindEmbeddings: true, KindMessages: true, KindCountTokens: false, numKinds: false, 255: false,
	} {
		if k.Weighed() != want {
			t.Errorf("Kind(%d) %s: Weighed %v, want %v", k, k, k.Weighed(), want)
		}
	}
}

// TestKindConstsEndAtNumKinds reads the package's source: every constant of
// type Kind is declared in numKinds' block, before it, so each is below
// numKinds and TestKindTable walks it. A Kind declared after numKinds or
// elsewhere would escape the table.
func TestKindConstsEndAtNumKinds(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	blocks := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			var kindConsts []string
			typed := false // the spec's type, inherited by specs with neither type nor value
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				switch {
				case v.Type != nil:
					typed = isKindIdent(v.Type)
				case len(v.Values) > 0:
					typed = isKindConversion(v.Values[0])
				}
				if typed {
					for _, n := range v.Names {
						kindConsts = append(kindConsts, n.Name)
					}
				}
			}
			if len(kindConsts) == 0 {
				continue
			}
			blocks++
			if last := kindConsts[len(kindConsts)-1]; last != "numKinds" {
				t.Errorf("%s: the Kind constants %v do not end with numKinds (last: %s)", fset.Position(g.Pos()), kindConsts, last)
			}
		}
	}
	if blocks != 1 {
		t.Errorf("Kind constants are declared in %d blocks; want one, ending with numKinds", blocks)
	}
}

func isKindIdent(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "Kind"
}

func isKindConversion(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	return ok && isKindIdent(c.Fun)
}

// TestKindOfAllocs: classifying a request, the first thing the proxy does
// with it, does not allocate.
func TestKindOfAllocs(t *testing.T) {
	for _, p := range []string{"/v1/chat/completions", "/v1/messages/count_tokens/?beta=true", "/v1/models"} {
		if n := testing.AllocsPerRun(100, func() { KindOf("POST", p) }); n != 0 {
			t.Errorf("KindOf(POST, %q): %v allocations", p, n)
		}
	}
}

// BenchmarkKindOf classifies the paths the proxy sees most, one of each
// kind and one it does not weigh, with a query and a trailing slash.
func BenchmarkKindOf(b *testing.B) {
	paths := []string{
		"/v1/chat/completions", "/v1/responses/", "/v1/completions?x=1", "/v1/embeddings",
		"/v1/messages", "/v1/messages/count_tokens", "/v1/models",
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range paths {
			KindOf("POST", p)
		}
	}
}

// BenchmarkStreamEventChatChunk is one chat chunk read through
// [Stream.Event], the proxy's path (BenchmarkParseChatChunk reads it
// directly).
func BenchmarkStreamEventChatChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	s := NewStream(KindChat)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s.Event(nil, data)
	}
}

// WeighAs weighs a body as the model it is given, whatever the body names:
// the same estimate as the body naming that model, for every weighed kind
// (an Azure deployment "chat-prod" serving gpt-4 is counted in cl100k_base,
// not in the default encoding a name the weigher does not know gets).
func TestWeighAs(t *testing.T) {
	w := testWeigher(t)
	bodies := map[Kind]string{
		KindChat:        `{"model":%q,"messages":[{"role":"user","content":"Ünïcödé text, numbers 12345 and emoji 🙂 for the tokenizer"}]}`,
		KindResponses:   `{"model":%q,"input":"Ünïcödé text, numbers 12345 and emoji 🙂 for the tokenizer"}`,
		KindCompletions: `{"model":%q,"prompt":"Ünïcödé text, numbers 12345 and emoji 🙂 for the tokenizer"}`,
		KindEmbeddings:  `{"model":%q,"input":"Ünïcödé text, numbers 12345 and emoji 🙂 for the tokenizer"}`,
		KindMessages:    `{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":"Ünïcödé text, numbers 12345 and emoji 🙂"}]}`,
		KindImages:      `{"model":%q,"prompt":"Ünïcödé text, numbers 12345 and emoji 🙂 for the tokenizer","size":"1024x1024","quality":"low"}`,
	}
	for k := Kind(0); k < numKinds; k++ {
		if !k.Weighed() {
			if e := w.WeighAs(k, []byte(`{}`), "gpt-4"); e != (Estimate{Parsed: true}) {
				t.Errorf("%v is not weighed, yet WeighAs gave %+v", k, e)
			}
			continue
		}
		tmpl, ok := bodies[k]
		if !ok {
			t.Fatalf("no body for weighed kind %v", k)
		}
		for _, model := range []string{"gpt-4", "gpt-4o", "claude-sonnet-4-5"} {
			asBody, namedBody := fmt.Appendf(nil, tmpl, "chat-prod"), fmt.Appendf(nil, tmpl, model)
			as := w.WeighAs(k, asBody, model)
			named := w.Weigh(k, namedBody)
			// The output fields lie at offsets of each body's own: the
			// same member's value in both.
			for i := range as.OutputFields {
				if a, n := as.OutputFields[i], named.OutputFields[i]; string(asBody[a.Start:a.End]) != string(namedBody[n.Start:n.End]) {
					t.Errorf("%v as %s: output field %d is %q, want %q", k, model, i, asBody[a.Start:a.End], namedBody[n.Start:n.End])
				}
			}
			as.OutputFields, named.OutputFields = [2]FieldSpan{}, [2]FieldSpan{}
			if as != named {
				t.Errorf("%v as %s: %+v, want %+v (the body naming %s)", k, model, as, named, model)
			}
		}
	}
	if a, b := w.WeighAs(KindChat, fmt.Appendf(nil, bodies[KindChat], "chat-prod"), "gpt-4"), w.Chat(fmt.Appendf(nil, bodies[KindChat], "chat-prod")); a.InputTokens == b.InputTokens {
		t.Errorf("gpt-4 (cl100k_base) and an unknown name counted alike (%d): the test text does not tell encodings apart", a.InputTokens)
	}
}

// Every kind that reserves text output names the field capping it as its
// API spells it; the others name none (a refusal then says to reduce the
// input).
func TestKindOutputField(t *testing.T) {
	want := map[Kind]string{KindChat: "max_completion_tokens or max_tokens", KindResponses: "max_output_tokens",
		KindCompletions: "max_tokens", KindMessages: "max_tokens"}
	for k := Kind(0); k <= numKinds; k++ {
		if got := k.OutputField(); got != want[k] {
			t.Errorf("%s: OutputField %q, want %q", k, got, want[k])
		}
	}
}
