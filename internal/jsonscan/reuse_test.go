package jsonscan

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// reuseSchema is a tool's parameters object of more than minObjBytes.
const reuseSchema = `{"type":"object","properties":{"query":{"type":"string","description":"Words to search for"}},"required":["query"]}`

// chatTool is a chat body whose one tool has parameters p (its container,
// the function object, at depth 4) and description desc.
func chatTool(desc, p string) string {
	return `{"model":"m","tools":[{"type":"function","function":{"name":"f","description":"` + desc + `","parameters":` + p + `}}],"messages":[{"role":"user","content":"hi"}]}`
}

// responsesTool is chatTool's Responses shape: the parameters' container,
// the tool, at depth 3.
func responsesTool(desc, p string) string {
	return `{"model":"m","tools":[{"type":"function","name":"f","description":"` + desc + `","parameters":` + p + `}]}`
}

// checkSame checks doc with opt through lay (its scanner and memo kept
// across calls, Options.Reuse set) and with a fresh scanner and layout
// without Reuse, and fails unless both give the same error and layout.
func checkSame(t *testing.T, name string, doc []byte, opt Options, lay *Layout, reuse []string) error {
	t.Helper()
	fresh := opt
	var freshLay Layout
	fresh.Layout = &freshLay
	want := Check(doc, fresh)
	opt.Layout, opt.Reuse = lay, reuse
	got := Check(doc, opt)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %v with the memo, %v without", name, got, want)
	}
	if want == nil && (!slices.Equal(lay.Members, freshLay.Members) || !slices.Equal(lay.Elems, freshLay.Elems) || !slices.Equal(lay.Fields, freshLay.Fields)) {
		t.Errorf("%s: layout %+v with the memo, %+v without", name, *lay, freshLay)
	}
	return want
}

// TestReuseSameAsFresh: a scanner that remembers the objects of
// Options.Reuse gives every document the verdict (reason and offset) and
// layout of a fresh scan without it, in a sequence that makes it find
// remembered objects where they pass and where the same bytes must not
// (another depth under a depth limit, another option, a cut or trailing
// document), and never remembers an object that failed.
func TestReuseSameAsFresh(t *testing.T) {
	reuse := []string{"parameters", "input_schema"}
	badUTF8 := strings.Replace(reuseSchema, "Words", "W\xffrds", 1)
	variant := strings.Replace(reuseSchema, `"required"`, `"Properties":1,"required"`, 1)
	deep := Options{MaxDepth: 6, FoldCase: true, UTF8: true, Fields: true}
	strict := Options{FoldCase: true, UTF8: true, Fields: true}
	loose := Options{DuplicateKeys: true}
	var lay Layout
	steps := []struct {
		name string
		doc  string
		opt  Options
		ok   bool
		// found: the schema is remembered after this step for opt at the
		// chat container's depth (4). The memo holds an object's bytes
		// once: kept at another depth or under other options (the
		// Responses and input_schema steps at depth 3, the depth limit's)
		// it is no longer found at depth 4 until a chat body keeps it
		// there again; a check that failed changes nothing.
		found bool
	}{
		{"chat, first", chatTool("a1b2", reuseSchema), strict, true, true},
		{"chat, again (found)", chatTool("c3d4", reuseSchema), strict, true, true},
		{"responses: depth 3, not found there", responsesTool("e5", reuseSchema), strict, true, false},
		{"responses under a depth limit it meets", responsesTool("e6", reuseSchema), deep, true, false},
		{"chat under that limit: one level too deep", chatTool("e7", reuseSchema), deep, false, false},
		{"bad UTF-8 unchecked", chatTool("f8", badUTF8), loose, true, false},
		{"bad UTF-8 checked", chatTool("f9", badUTF8), strict, false, false},
		{"a case variant", chatTool("g1", variant), strict, false, false},
		{"the case variant again", chatTool("g2", variant), strict, false, false},
		{"the schema cut short", chatTool("h3", reuseSchema)[:len(chatTool("h3", reuseSchema))-len(`}],"messages":[{"role":"user","content":"hi"}]}`)-30], strict, false, false},
		{"trailing bytes after the body", chatTool("h4", reuseSchema) + `x`, strict, false, true},
		{"a duplicate key after the schema", strings.Replace(chatTool("h5", reuseSchema), `"parameters":`+reuseSchema, `"parameters":`+reuseSchema+`,"name":"g"`, 1), strict, false, true},
		{"empty parameters, then a long object", strings.Replace(chatTool("i6", `{}`), `"parameters":{}`, `"parameters":{},"x":`+reuseSchema, 1), strict, true, true},
		{"an escaped key is not a name", strings.Replace(chatTool("j7", reuseSchema), `"parameters"`, `"p\u0061rameters"`, 1), strict, true, true},
		{"input_schema", `{"model":"m","tools":[{"name":"f","input_schema":` + reuseSchema + `}]}`, strict, true, false},
		// A scalar "parameters", then an element of a top-level array
		// (container depth 2) with the schema's bytes, whose fields the
		// layout records: never stepped over.
		{"a scalar named, then an element", `{"messages":[{"parameters":1},` + reuseSchema + `]}`, strict, true, false},
		{"a scalar named, then the element again", `{"messages":[{"parameters":2},` + reuseSchema + `]}`, strict, true, false},
		{"chat, last (found)", chatTool("k8", reuseSchema), strict, true, true},
	}
	for i, st := range steps {
		err := checkSame(t, st.name, []byte(st.doc), st.opt, &lay, reuse)
		if (err == nil) != st.ok {
			t.Errorf("step %d (%s): %v, want ok %v", i+1, st.name, err, st.ok)
		}
		if lay.sc == nil {
			t.Fatalf("step %d: the layout kept no scanner", i+1)
		}
		s := lay.sc
		s.max, s.dup, s.fold, s.utf8 = st.opt.MaxDepth, st.opt.DuplicateKeys || st.opt.FoldCase, st.opt.FoldCase, st.opt.UTF8
		if s.max == 0 {
			s.max = DefaultMaxDepth
		}
		if found := s.remembered([]byte(reuseSchema), 4) == len(reuseSchema); found != st.found {
			t.Errorf("step %d (%s): the schema remembered at depth 4: %v, want %v", i+1, st.name, found, st.found)
		}
	}
	// A failed object is never remembered: the variant and the bad UTF-8
	// under the strict options are not found.
	s := lay.sc
	s.max, s.dup, s.fold, s.utf8 = DefaultMaxDepth, true, true, true
	for _, obj := range []string{variant, badUTF8} {
		if s.remembered([]byte(obj), 4) != 0 {
			t.Errorf("an object that failed is remembered: %.60s", obj)
		}
	}
}

// FuzzReuseSameAsFresh holds a remembering scanner to a fresh one on any
// two documents checked in turns (each the other's objects' reader),
// under options drawn from flags.
func FuzzReuseSameAsFresh(f *testing.F) {
	f.Add([]byte(chatTool("a", reuseSchema)), []byte(chatTool("b", reuseSchema)), uint8(0))
	f.Add([]byte(chatTool("a", reuseSchema)), []byte(responsesTool("b", reuseSchema)), uint8(6))
	f.Add([]byte(responsesTool("a", reuseSchema)), []byte(chatTool("b", reuseSchema)), uint8(6))
	f.Add([]byte(chatTool("a", reuseSchema)), []byte(chatTool("b", strings.Replace(reuseSchema, "search", "Search", 1))), uint8(1))
	f.Add([]byte(`{"a":{"b":{"p":`+reuseSchema+`}}}`), []byte(`{"a":{"b":{"p":`+reuseSchema+`,"p":1}}}`), uint8(2))
	f.Add([]byte(`[[{"p":`+reuseSchema+`}]]`), []byte(`[[{"p":`+reuseSchema[:70]+`]]`), uint8(3))
	f.Fuzz(func(t *testing.T, a, b []byte, flags uint8) {
		opt := Options{FoldCase: flags&1 == 0, DuplicateKeys: true, UTF8: flags&2 == 0, Fields: true}
		if flags&4 != 0 {
			opt.MaxDepth = 6
		}
		var lay Layout
		reuse := []string{"p", "parameters"}
		for i, d := range [][]byte{a, b, a, b} {
			checkSame(t, []string{"a", "b"}[i%2], d, opt, &lay, reuse)
		}
	})
}
