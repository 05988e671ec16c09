package weigher

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// Tool-definition counting constants from OpenAI's cookbook "How to count
// tokens with tiktoken", section 7 "Counting tokens for chat completions with
// tool calls"
// (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken),
// whose function matches the API's prompt_tokens on its example (101 for
// gpt-4o / gpt-4o-mini, 105 for gpt-3.5-turbo / gpt-4).
const (
	funcInitO200k  = 7  // tokens opening each function, gpt-4o family
	funcInitCL100k = 10 // tokens opening each function, gpt-3.5 / gpt-4
	propInit       = 3  // tokens opening a function's properties
	propKey        = 3  // tokens per property
	enumInit       = -3 // tokens when a property has an enum list
	enumItem       = 3  // tokens per enum item (plus the item's text)
	funcEnd        = 12 // tokens closing the list of functions
)

// toolsCounter counts tool definitions in one encoding.
type toolsCounter struct {
	enc      counter
	funcInit int64
	// ck, when set, is the field check the count makes in its walk
	// (countChecked); nil: none.
	ck *toolCheck
}

func newToolsCounter(enc counter, encoding string) toolsCounter {
	if encoding == EncodingO200k {
		return toolsCounter{enc: enc, funcInit: funcInitO200k}
	}
	return toolsCounter{enc: enc, funcInit: funcInitCL100k}
}

// count returns the tokens of a "tools" array ([{"type":"function",
// "function":{…}}]) or a legacy "functions" array ([{name, description,
// parameters}]), by the cookbook's rule: per function funcInit + "name:desc";
// when it has properties propInit, and per property propKey +
// "key:type:desc" (+ enumInit + per item enumItem + item); funcEnd once.
// Descriptions lose one trailing ".". Beyond the cookbook: nested object
// properties (and array items' properties) are counted as properties too, and
// a non-function tool (e.g. "custom") costs the tokens of its JSON text.
//
// list is part of a request body that passed parseRequest's check (valid
// JSON, no key twice in an object), so it is read in one pass (walkObject,
// walkArray): a value read is not skipped first, where gjson's Get
// scanned an object again for every name read and skipped every nested
// value once per level above it (a third of a cold 1 KiB agent body's
// weighing went to those scans). The "name:desc" texts are joined in one
// pooled buffer, not allocated.
func (c toolsCounter) count(list gjson.Result) int64 {
	n, _, _ := c.walk(list, nil)
	return n
}

// countServer is count(list) and serverTools(list), found in one walk: a
// new chat "tools" list had its server-tool verdict from a walk of its
// own (each tool's members read again, its "type" decoded a second
// time: about 1,600 instructions of a cold 1 KiB chat body's two
// function tools), where the count's walk reads every member eachTool
// reads.
func (c toolsCounter) countServer(list gjson.Result) (n int64, server bool) {
	n, server, _ = c.walk(list, nil)
	return n, server
}

// countChecked is count(list) that also makes, in the same walk, the
// field check checkWhole makes of the list with no cache (each object
// element checked by walkFields with elem, at depth 2, the depth
// checkMember gives the elements of a top-level list): ok is false
// when that check fails. Where the count does not walk into a value the
// check reads (a value of the wrong type, a schema deeper than
// maxSchemaDepth), walkFields checks it. Chat leaves a new "tools"
// list's check to it (parseOptions.countedList), where the check walked
// the list once and the count again: some 11,000 instructions of a cold
// 1 KiB chat body's two tools (TestToolsCountCheckedSameAsWalk,
// FuzzToolsCountCheckedSameAsWalk: count and checkElements are the
// reference).
func (c toolsCounter) countChecked(list gjson.Result, elem *fields) (n int64, ok bool) {
	n, _, ok = c.walk(list, elem)
	return n, ok
}

// countCheckedServer is countChecked(list, elem) and serverTools(list),
// found in one walk (see countServer).
func (c toolsCounter) countCheckedServer(list gjson.Result, elem *fields) (n int64, server, ok bool) {
	return c.walk(list, elem)
}

// toolCheck is the field check of a toolsCounter's walk (countChecked):
// walkFields' verdict on the objects the walk reads, made key by key as
// the walk meets them. Each walked object is given the fields it is read
// with (nil: not checked, as walkFields checks nothing deeper than
// maxFieldsDepth or under a key that reads nothing) and its walkFields
// depth.
type toolCheck struct {
	elem   *fields // the fields of the list's objects
	fold   []byte  // scratch for jsonscan.FoldKey
	failed bool    // a key named one of its object's fields in another case
}

// key checks the key k of an object read with f, as walkFields does, and
// returns the fields its value is read with (nil: none, or nothing
// checked): an exact field's (every value's, in a map), else nil, and
// the check fails when k is one of f's fields in another case. With a nil
// ck or f it checks nothing.
func (ck *toolCheck) key(f *fields, k string) *fields {
	if ck == nil || f == nil {
		return nil
	}
	if f.each != nil {
		return f.each
	}
	sub, exact := f.lookup(k)
	if exact {
		return sub
	}
	if !jsonscan.Folded(k) {
		ck.fold = jsonscan.FoldKey(ck.fold[:0], []byte(k))
		if _, variant := f.folded[string(ck.fold)]; variant {
			ck.failed = true
		}
	}
	return nil
}

// value checks the value at s[x], read with f at walkFields depth fd,
// which the walk does not read itself: walkFields over it.
func (ck *toolCheck) value(s string, x int, f *fields, fd int) {
	if ck == nil || f == nil || ck.failed || s[x] != '{' && s[x] != '[' {
		return
	}
	if _, _, _, ok := walkFields(s, x, f, fd, &ck.fold); !ok {
		ck.failed = true
	}
}

// checkedAt is the fields an object read with f at walkFields depth fd is
// checked with: f, or nil when walkFields checks nothing that deep.
func checkedAt(f *fields, fd int) *fields {
	if fd > maxFieldsDepth {
		return nil
	}
	return f
}

// Where the objects of a tools list lie in walkFields' depths: a list's
// elements at 2 (checkMember's checkWhole at depth 1), their members'
// values at 3, a function's members' values at 4.
const toolElemDepth = 2

// walk is count, and, when elem is set, countChecked's check of the
// list's objects read with elem (ok); server is serverTools(list): each
// object tool judged by the members eachTool reads (its first key, its
// "type", whether it names one of a client tool's members, a shell's
// "environment"), met in the count's own walk of its members.
func (c toolsCounter) walk(list gjson.Result, elem *fields) (n int64, server, ok bool) {
	if !list.IsArray() {
		// Not a list (one tool as an object, a string): the API refuses
		// it, a lenient upstream may read it. Weighed by its JSON text.
		// It holds no object checkWhole checks, and no tool eachTool
		// judges.
		return countValue(c.enc, list), false, true
	}
	// The join buffer and the check come from a pool: a check of the
	// walk's own escaped to the heap (the walk's recursion keeps it
	// from staying on the stack).
	sc := toolScratches.Get().(*toolScratch)
	buf := &sc.buf
	defer func() {
		if cap(sc.buf) > maxJoinBuf {
			sc.buf = nil
		}
		if cap(sc.ck.fold) > maxJoinBuf {
			sc.ck.fold = nil
		}
		toolScratches.Put(sc)
	}()
	var tf *fields // the fields the tools are checked with
	if elem != nil {
		sc.ck = toolCheck{elem: elem, fold: sc.ck.fold[:0]}
		c.ck = &sc.ck
		tf = checkedAt(elem, toolElemDepth)
	}
	s := list.Raw
	functions := 0
	anyServer := false // a tool judged a server tool, as eachTool judges it
	walkArray(s, 0, func(v int) int {
		if s[v] != '{' {
			// Not a tool (a string, a list): the API refuses it, a
			// lenient upstream may read it. Weighed by its JSON text.
			end := skipValue(s, v)
			n += countValue(c.enc, rawValue(s[v:end]))
			return end
		}
		var own, inner function // t's own members; those of its "function" object
		var typ gjson.Result
		innerSeen := false
		// What eachTool reads of the tool for its verdict: its first key
		// (the first not empty), whether it names a member a client tool
		// is shaped with, where its "environment" lies.
		var first string
		shaped, envAt := false, -1
		end := walkObject(s, v, func(k string, x int) int {
			if first == "" {
				first = k
			}
			switch k {
			case "name", "function", "input_schema", "parameters":
				shaped = true
			case "environment":
				envAt = x
			}
			sub := c.ck.key(tf, k)
			switch {
			case k == "function" && !innerSeen && s[x] == '{':
				innerSeen = true
				ff := checkedAt(sub, toolElemDepth+1)
				return walkObject(s, x, func(k string, y int) int {
					return c.functionMember(buf, &inner, s, k, y, c.ck.key(ff, k), toolElemDepth+2)
				})
			case k == "type" && typ.Raw == "":
				e := skipValue(s, x)
				c.ck.value(s, x, sub, toolElemDepth+1)
				typ = rawValue(s[x:e])
				return e
			}
			return c.functionMember(buf, &own, s, k, x, sub, toolElemDepth+1)
		})
		anyServer = anyServer || toolServer(s, typ, first, shaped, envAt)
		fn := own
		if innerSeen {
			fn = inner
			// The tool object's own members beside its function are
			// sent too: counted as text.
			if own.seen&1 != 0 {
				n += c.join(buf, "name:", own.name.Raw)
			}
			if own.seen&2 != 0 {
				n += c.join(buf, "description:", own.desc.Raw)
			}
			if own.seen&4 != 0 {
				n += c.join(buf, "parameters:", own.params)
			}
			n += c.restDone(buf, &own.rest)
		} else if typ.Raw != "" && textOf(typ) != "function" {
			n += countText(c.enc, s[v:end])
			return end
		}
		functions++
		n += c.funcInit + c.join(buf, textOf(fn.name), ":", trimDot(textOf(fn.desc))) + fn.props + c.restDone(buf, &fn.rest)
		return end
	})
	if functions > 0 {
		n += funcEnd
	}
	// serverTools judges no tool of a list mayName turns down (nor is it
	// asked: a list of function tools holds no server tool).
	server = anyServer && mayName(s, toolHints...)
	return n, server, c.ck == nil || !c.ck.failed
}

// toolServer is eachTool's and serverTools' verdict on a tool object of
// the list s, from what walk read of it: typ, its first "type" member's
// value (rawValue; no Raw when it has none), first, its first key not
// empty ("" when none), shaped, whether it names "name", "function",
// "input_schema" or "parameters", and envAt, where its "environment"
// member's value starts (-1: none).
func toolServer(s string, typ gjson.Result, first string, shaped bool, envAt int) bool {
	if typ.Raw == `"function"` { // the usual tool: a client's, not decoded
		return false
	}
	var t string
	switch {
	case typ.Raw == "":
		if !shaped && first != "" {
			t = "untyped:" + strings.ToLower(first)
		}
	case typ.Type == gjson.String:
		t = rawString(typ)
	case typ.Type != gjson.Null:
		t = typ.Raw
	}
	env := ""
	if t == "shell" && envAt >= 0 && s[envAt] == '{' {
		walkObject(s, envAt, func(k string, y int) int {
			if k != "type" {
				return -1
			}
			e := skipValue(s, y)
			env = textOf(rawValue(s[y:e]))
			return e
		})
	}
	return !clientTool(t, env)
}

// function is what count reads of a function: its name and description,
// and the tokens of its parameters' properties.
type function struct {
	name, desc gjson.Result
	params     string // the parameters object's JSON, when read
	props      int64
	seen       uint8      // bits: name, description, parameters read
	rest       schemaRest // its members the rule does not read
}

// schemaRest is what a walk of a function or schema object found besides
// the members the cookbook's rule reads: every such member is sent to
// the upstream, and an OpenAI-compatible server's chat template writes a
// tool as its whole JSON (vLLM, llama.cpp, Ollama…), so each is counted
// as the text "key:value" (value its JSON) — a schema's anyOf, $defs,
// title, examples, default, pattern, an extension member — except the
// structure every tool has (see rest). A "required" list is judged at
// the end of its object: it names properties whose keys are counted, so
// it is counted only when its JSON is longer than the "properties"
// object's.
type schemaRest struct {
	extra    int64  // tokens of the members counted
	required string // the JSON of "required", "" for none
	propsLen int    // the length of the "properties" object read, in bytes
}

// schemaTypeNames are JSON Schema's type names, as JSON strings.
var schemaTypeNames = []string{`"object"`, `"string"`, `"integer"`, `"number"`, `"boolean"`, `"array"`, `"null"`}

// rest counts the member k, whose value is the JSON v, of a function or
// schema object, a member the rule does not read, in r: a "type" naming
// a JSON Schema type, and a true or false "strict" or
// "additionalProperties", are structure and add nothing; "required" is
// judged by restDone.
func (c toolsCounter) rest(buf *[]byte, r *schemaRest, k, v string) {
	switch k {
	case "type":
		for _, t := range schemaTypeNames {
			if v == t {
				return
			}
		}
	case "strict", "additionalProperties":
		if v == "true" || v == "false" {
			return
		}
	case "required":
		if r.required == "" && v != "" && v[0] == '[' {
			r.required = v
			return
		}
	}
	r.extra += c.join(buf, k, ":", v)
}

// restDone is the tokens r counted, with its "required" list when that is
// longer than its object's "properties".
func (c toolsCounter) restDone(buf *[]byte, r *schemaRest) int64 {
	n := r.extra
	if r.required != "" && len(r.required) > r.propsLen {
		n += c.join(buf, "required:", r.required)
	}
	return n
}

// functionMember reads the member k of a function whose value starts at
// s[x] into f, as walkObject's fn: it returns where the value ends. The
// value is checked with sub at walkFields depth fd (toolCheck).
func (c toolsCounter) functionMember(buf *[]byte, f *function, s, k string, x int, sub *fields, fd int) int {
	switch {
	case k == "name" && f.seen&1 == 0:
		f.seen |= 1
		e := skipValue(s, x)
		c.ck.value(s, x, sub, fd)
		f.name = rawValue(s[x:e])
		return e
	case k == "description" && f.seen&2 == 0:
		f.seen |= 2
		e := skipValue(s, x)
		c.ck.value(s, x, sub, fd)
		f.desc = rawValue(s[x:e])
		return e
	case k == "parameters" && f.seen&4 == 0 && s[x] == '{':
		f.seen |= 4
		n, end := c.parameters(buf, s, x, checkedAt(sub, fd), fd)
		f.params = s[x:end]
		f.props += n
		return end
	}
	e := skipValue(s, x)
	c.ck.value(s, x, sub, fd)
	c.rest(buf, &f.rest, k, s[x:e])
	return e
}

// parameters is schemaObject of a function's parameters object at s[x]
// (depth 0), found in the schema memo of c's counter when it is a
// memoCounter that counted the same bytes with the same check (see
// schemaMemo), and kept there when it is not.
func (c toolsCounter) parameters(buf *[]byte, s string, x int, f *fields, fd int) (int64, int) {
	mc, _ := c.enc.(*memoCounter)
	if mc == nil {
		return c.schemaObject(buf, s, x, 0, f, fd)
	}
	// The walk checks the object when there is a check, fields to read
	// it with, and no verdict yet (a failed check stays failed).
	check := c.ck != nil && f != nil && !c.ck.failed
	if n, l, failed, ok := mc.schemas.find(s[x:], f, fd, check); ok {
		if failed {
			c.ck.failed = true
		}
		return n, x + l
	}
	n, end := c.schemaObject(buf, s, x, 0, f, fd)
	mc.schemas.keep(s[x:end], f, fd, check, check && c.ck.failed, n)
	return n, end
}

// schemaObject counts the schema object at s[x] that holds "properties"
// (a function's parameters, a property's items), joining texts in buf:
// the tokens of its properties, read at depth by properties, and of its
// other members (schemaRest); it returns them and where the object ends.
// The object is checked with f at walkFields depth fd (toolCheck).
func (c toolsCounter) schemaObject(buf *[]byte, s string, x, depth int, f *fields, fd int) (int64, int) {
	var n int64
	var r schemaRest
	end := walkObject(s, x, func(k string, y int) int {
		sub := c.ck.key(f, k)
		if k == "properties" {
			if props, e := c.properties(buf, s, y, depth, checkedAt(sub, fd+1), fd+1); e >= 0 {
				n += props
				r.propsLen = e - y
				return e
			}
		}
		e := skipValue(s, y)
		c.ck.value(s, y, sub, fd+1)
		c.rest(buf, &r, k, s[y:e])
		return e
	})
	return n + c.restDone(buf, &r), end
}

// maxSchemaDepth bounds the recursion into nested schemas.
const maxSchemaDepth = 8

// properties counts the JSON-schema "properties" object at s[i], joining
// texts in buf: it returns the tokens and where the object ends, or -1
// when it did not read the value (not an object, or deeper than
// maxSchemaDepth). The object is checked with f at walkFields depth fd
// (toolCheck), when it is read.
func (c toolsCounter) properties(buf *[]byte, s string, i, depth int, f *fields, fd int) (int64, int) {
	if s[i] != '{' || depth > maxSchemaDepth {
		return 0, -1
	}
	var n int64
	any := false
	end := walkObject(s, i, func(key string, x int) int {
		any = true
		n += propKey
		var typ, desc gjson.Result
		var seen uint8
		var e int
		ps := c.ck.key(f, key) // the property's fields
		if s[x] != '{' {
			// Not a schema: its JSON is sent all the same.
			e = skipValue(s, x)
			c.ck.value(s, x, ps, fd+1)
			n += countText(c.enc, s[x:e])
		} else {
			var r schemaRest
			pf, pd := checkedAt(ps, fd+1), fd+1 // the property object's
			rest := func(k string, y int, sub *fields) int {
				e := skipValue(s, y)
				c.ck.value(s, y, sub, pd+1)
				c.rest(buf, &r, k, s[y:e])
				return e
			}
			e = walkObject(s, x, func(k string, y int) int {
				sub := c.ck.key(pf, k)
				switch {
				case k == "enum" && seen&1 == 0 && s[y] == '[':
					seen |= 1
					n += enumInit
					c.ck.value(s, y, sub, pd+1)
					return walkArray(s, y, func(z int) int {
						e := skipValue(s, z)
						n += enumItem + countText(c.enc, textOf(rawValue(s[z:e])))
						return e
					})
				case k == "type" && seen&2 == 0:
					seen |= 2
					e := skipValue(s, y)
					c.ck.value(s, y, sub, pd+1)
					typ = rawValue(s[y:e])
					return e
				case k == "description" && seen&4 == 0:
					seen |= 4
					e := skipValue(s, y)
					c.ck.value(s, y, sub, pd+1)
					desc = rawValue(s[y:e])
					return e
				case k == "properties" && seen&8 == 0:
					seen |= 8
					if props, e := c.properties(buf, s, y, depth+1, checkedAt(sub, pd+1), pd+1); e >= 0 {
						n += props
						r.propsLen = e - y
						return e
					}
				case k == "items" && seen&16 == 0 && s[y] == '{':
					seen |= 16
					items, end := c.schemaObject(buf, s, y, depth+1, checkedAt(sub, pd+1), pd+1)
					n += items
					return end
				}
				return rest(k, y, sub)
			})
			n += c.restDone(buf, &r)
		}
		n += c.join(buf, key, ":", textOf(typ), ":", trimDot(textOf(desc)))
		return e
	})
	if any {
		n += propInit
	}
	return n, end
}

// walkObject calls fn with each member of the object at s[i] ('{') of a
// document that passed parseRequest's check: its key (decoded) and where
// its value starts. fn returns where the value ends when it read the value
// through, or -1 to have it skipped. walkObject returns the offset just
// past the object. A value is thus passed over once, by its reader or by
// the skip, however deep it lies.
func walkObject(s string, i int, fn func(key string, v int) int) int {
	i = skipSpace(s, i+1)
	for i < len(s) && s[i] == '"' {
		key, kEnd := readKey(s, i)
		i = skipSpace(s, skipSpace(s, kEnd)+1) // past ':'
		end := fn(key, i)
		if end < 0 {
			end = skipValue(s, i)
		}
		i = skipSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
		}
	}
	return min(i+1, len(s)) // past '}'
}

// walkArray is walkObject for the array at s[i] ('['): fn is given where
// each element starts.
func walkArray(s string, i int, fn func(v int) int) int {
	i = skipSpace(s, i+1)
	for i < len(s) && s[i] != ']' {
		end := fn(i)
		if end < 0 {
			end = skipValue(s, i)
		}
		i = skipSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
		}
	}
	return min(i+1, len(s)) // past ']'
}

// join counts the text made of parts, written into buf (grown as needed,
// kept for the next text): no string is allocated for it.
func (c toolsCounter) join(buf *[]byte, parts ...string) int64 {
	b := (*buf)[:0]
	for _, p := range parts {
		b = append(b, p...)
	}
	*buf = b
	if len(b) == 0 {
		return 0
	}
	return countText(c.enc, unsafe.String(&b[0], len(b)))
}

// maxJoinBuf is the largest buffer, in bytes, toolScratches keeps: a
// tool's description longer than this is joined in a buffer the
// collector frees.
const maxJoinBuf = 64 << 10

// toolScratch is what one count of a tools list works in: the buffer of
// toolsCounter.join and the check of countChecked.
type toolScratch struct {
	buf []byte
	ck  toolCheck
}

// toolScratches are the scratches of tools counts, one per count at a
// time.
var toolScratches = sync.Pool{New: func() any { return new(toolScratch) }}

// textOf is gjson's v.String() of a value as rawValue gives it: a string
// decoded, another value's text as gjson writes it (a number in its own
// form, true, false, an object's or array's JSON), "" for null or none.
func textOf(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return rawString(v)
	case gjson.Null:
		return ""
	}
	if v.Raw == "" {
		return ""
	}
	return gjson.Parse(v.Raw).String()
}

func trimDot(s string) string { return strings.TrimSuffix(s, ".") }

// A tool is run by the upstream (a server tool) unless its type is one
// the caller's own code runs (clientTool): the upstream adds a server
// tool's results (search hits, fetched pages, files, MCP tool output,
// shell and code output) to the context it bills, and new server tools
// appear faster than a list of them could follow (OpenAI's hosted "shell"
// with a container environment, OpenRouter's "openrouter:web_search" and
// "openrouter:shell", xAI's "x_search", "collections_search" and
// "view_x_video"). The client tools:
//
//   - "function" and "custom" (OpenAI's function and custom tools,
//     https://platform.openai.com/docs/guides/function-calling); a tool
//     with no type (an Anthropic client tool, a legacy chat function);
//   - OpenAI's Responses tools whose calls the caller executes and answers
//     (https://platform.openai.com/docs/guides/tools): "computer_use_preview"
//     (and "computer"), "local_shell", "apply_patch", and "shell" with a
//     "local" environment (https://platform.openai.com/docs/guides/tools-shell:
//     hosted with "container_auto" or a container reference);
//   - Anthropic's client tools, versioned by date
//     (https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview):
//     "bash_…", "text_editor_…", "computer_…", "memory_…".
var (
	clientToolTypes    = []string{"function", "custom", "computer_use_preview", "computer", "local_shell", "apply_patch"}
	clientToolPrefixes = []string{"bash_", "text_editor_", "computer_", "memory_"}
)

// clientTool reports whether a tool of type typ (env: its "environment"
// object's "type", for "shell") runs in the caller's code. An empty typ is
// a tool without a type: a client tool.
func clientTool(typ, env string) bool {
	if typ == "" {
		return true
	}
	if typ == "shell" {
		return env == "local"
	}
	for _, c := range clientToolTypes {
		if typ == c {
			return true
		}
	}
	for _, p := range clientToolPrefixes {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// searchTool reports whether a server tool of type typ runs searches the
// upstream bills per call on top of the tokens: Anthropic's and OpenAI's
// "web_search…", and any other server tool whose type names a search
// ("openrouter:web_search", xAI's "x_search" and "collections_search"),
// but for file search and tool search (billed as tokens or per stored
// gigabyte, not per search).
func searchTool(typ string) bool {
	if strings.HasPrefix(typ, "web_search") {
		return true
	}
	return strings.Contains(typ, "search") && !strings.Contains(typ, "file_search") && !strings.HasPrefix(typ, "tool_search")
}

// defaultWebSearchUses is the searches reserved for an Anthropic web
// search tool that names no max_uses (or one that is not a positive
// count), and for a Responses web_search tool without max_tool_calls. Anthropic sets no limit then (its web search tool guide:
// max_uses "limits the number of searches per request"); its server-side
// sampling loop pauses a turn after 10 iterations (stop_reason
// "pause_turn"), and one iteration may run several searches, so two a
// iteration is assumed. Reconciliation gives back what was not run.
const defaultWebSearchUses = 20

// maxWebSearchUses caps the searches one tool's max_uses reserves: a
// larger figure (1e300) would only saturate the price.
const maxWebSearchUses = 1 << 20

// webSearchUses is how many web searches the Anthropic tools of a
// Messages request (its "tools" array) may run, each billed on top of the
// tokens ($10 per 1,000: its web search tool guide and pricing page): the
// sum over the tools whose type starts with "web_search" of their
// max_uses, or defaultWebSearchUses for a tool without one.
func webSearchUses(tools gjson.Result) int64 {
	_, uses := webSearchTools(tools)
	return uses
}

// webSearchTools walks tools (a request's "tools" array) for the server
// tools that run searches (searchTool): how many there are, and the sum
// of their max_uses (defaultWebSearchUses for one without a positive
// count), each capped at maxWebSearchUses.
func webSearchTools(tools gjson.Result) (n int, uses int64) {
	eachTool(tools, func(typ, _ string, maxUses gjson.Result) {
		if clientTool(typ, "") || !searchTool(typ) {
			return
		}
		u, ok := tokenCount(maxUses)
		if !ok {
			u = defaultWebSearchUses
		}
		n++
		uses += min(u, maxWebSearchUses)
	})
	return n, uses
}

// serverTools reports whether tools (a request's "tools" array) holds a
// tool the upstream runs itself (any tool that is not a clientTool): the
// request then pulls context the body does not hold
// (Estimate.ServerContext).
func serverTools(tools gjson.Result) bool {
	found := false
	eachTool(tools, func(typ, env string, _ gjson.Result) {
		found = found || !clientTool(typ, env)
	})
	return found
}

// eachTool calls fn with each tool of tools (a request's "tools" array,
// part of a body that passed parseRequest's check) that is an object:
// its "type" (decoded; "" when absent or null, the JSON text of a type
// that is not a string, so that it is no client tool's), its
// "environment"'s "type" and its "max_uses". One pass over the list's
// bytes (walkArray, walkObject); a list without the text "type" (and no
// \u escape that could spell it) has no typed tool and is not walked
// (mayName).
//
// A tool with no type is a client tool when it is shaped as one (it names
// its "name", "function", "input_schema" or "parameters"); any other is
// a gateway's server tool written as a key of its own, as Gemini's and
// LiteLLM's {"googleSearch": {}}, {"google_search": {}}, {"urlContext":
// {}} and {"codeExecution": {}} are
// (https://ai.google.dev/gemini-api/docs/google-search): fn gets its first
// key, lower-cased, after "untyped:" as its type (so that a key naming a
// search reserves searches). Such keys are looked for (serverKeyHints)
// when the list names no "type".
func eachTool(tools gjson.Result, fn func(typ, env string, maxUses gjson.Result)) {
	if !tools.IsArray() || !mayName(tools.Raw, toolHints...) {
		return
	}
	s := tools.Raw
	walkArray(s, 0, func(v int) int {
		if s[v] != '{' {
			return -1
		}
		var typ, env, first string
		var maxUses gjson.Result
		shaped, typed := false, false
		end := walkObject(s, v, func(k string, x int) int {
			if first == "" {
				first = k
			}
			switch k {
			case "name", "function", "input_schema", "parameters":
				shaped = true
				return -1
			case "type":
				typed = true
				e := skipValue(s, x)
				if t := rawValue(s[x:e]); t.Type == gjson.String {
					typ = rawString(t)
				} else if t.Type != gjson.Null {
					typ = s[x:e]
				}
				return e
			case "environment":
				if s[x] != '{' {
					return -1
				}
				return walkObject(s, x, func(k string, y int) int {
					if k != "type" {
						return -1
					}
					e := skipValue(s, y)
					env = textOf(rawValue(s[y:e]))
					return e
				})
			case "max_uses":
				e := skipValue(s, x)
				maxUses = gjson.Parse(s[x:e])
				return e
			}
			return -1
		})
		if !typed && !shaped && first != "" {
			typ = "untyped:" + strings.ToLower(first)
		}
		fn(typ, env, maxUses)
		return end
	})
}

// serverKeyHints are texts one of which a list of tools holds when it may
// hold a server tool written as a key of its own (see eachTool): a list
// with none of them and no "type" is not walked.
var serverKeyHints = []string{"oogle", "earch", "rl_context", "rlContext", "ode_execution", "odeExecution"}

// toolHints are what eachTool looks for before it walks a list: "type",
// and serverKeyHints.
var toolHints = append([]string{"type"}, serverKeyHints...)

// mayName reports whether a string of the JSON text raw may decode to one
// that starts with one of prefixes (letters, digits and '_'): false only
// when none of them occurs in raw's bytes and raw holds no \u escape, the
// one escape that can spell such a byte (RFC 8259, section 7), so that no
// string of raw can. It spares readers that look for a tool type a gjson
// walk of every tool list that cannot hold one, on every request (about
// 5,000 instructions a walk for a 16 KiB conversation's tools).
func mayName(raw string, prefixes ...string) bool {
	if strings.Contains(raw, `\u`) {
		return true
	}
	for _, p := range prefixes {
		if strings.Contains(raw, p) {
			return true
		}
	}
	return false
}

// toolChoiceTokens weighs a chat or Responses "tool_choice" as input:
// "auto", "none" and "required" (the API's words: the choice of whether
// to call a tool, part of the framing) and null or absent weigh 0; any
// other value by its JSON text (countValue) — an object forcing a
// function ({"type":"function","function":{"name":…}}), whose name and
// hints OpenAI writes into the prompt it bills, an allowed_tools list,
// or a shape the API refuses and a lenient upstream (LiteLLM, vLLM,
// OpenRouter) may write out.
func toolChoiceTokens(enc counter, v gjson.Result) int64 {
	if v.Type == gjson.String {
		switch v.Raw {
		case `"auto"`, `"none"`, `"required"`:
			return 0
		}
	}
	return countValue(enc, v)
}
