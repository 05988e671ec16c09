package weigher

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/tidwall/gjson"
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
// JSON, no key twice in an object): each object is walked once with
// rawMembers, where gjson's Get scanned it again for every name read (a
// third of a cold 1 KiB agent body's weighing went to those scans), and
// the "name:desc" texts are joined in one pooled buffer, not allocated.
func (c toolsCounter) count(list gjson.Result) int64 {
	if !list.IsArray() {
		return 0
	}
	buf := joinBufs.Get().(*[]byte)
	defer func() {
		if cap(*buf) > maxJoinBuf {
			*buf = nil
		}
		joinBufs.Put(buf)
	}()
	var n int64
	functions := 0
	rawElements(list.Raw, func(t gjson.Result) bool {
		if !t.IsObject() {
			return true
		}
		var function, typ gjson.Result
		rawMembers(t.Raw, func(k string, v gjson.Result) bool {
			switch {
			case k == "function" && function.Raw == "":
				function = v
			case k == "type" && typ.Raw == "":
				typ = v
			}
			return true
		})
		fn := t
		if function.IsObject() {
			fn = function
		} else if typ.Raw != "" && textOf(typ) != "function" {
			n += countText(c.enc, t.Raw)
			return true
		}
		var name, desc, params gjson.Result
		rawMembers(fn.Raw, func(k string, v gjson.Result) bool {
			switch {
			case k == "name" && name.Raw == "":
				name = v
			case k == "description" && desc.Raw == "":
				desc = v
			case k == "parameters" && params.Raw == "":
				params = v
			}
			return true
		})
		functions++
		n += c.funcInit
		n += c.join(buf, textOf(name), ":", trimDot(textOf(desc)))
		n += c.properties(buf, rawGet(params, "properties"), 0)
		return true
	})
	if functions > 0 {
		n += funcEnd
	}
	return n
}

// maxSchemaDepth bounds the recursion into nested schemas.
const maxSchemaDepth = 8

// properties counts a JSON-schema "properties" object (a value as rawValue
// gives it), joining texts in buf.
func (c toolsCounter) properties(buf *[]byte, props gjson.Result, depth int) int64 {
	if !props.IsObject() || depth > maxSchemaDepth {
		return 0
	}
	var n int64
	any := false
	rawMembers(props.Raw, func(key string, p gjson.Result) bool {
		any = true
		n += propKey
		var enum, typ, desc, sub, items gjson.Result
		if p.IsObject() {
			rawMembers(p.Raw, func(k string, v gjson.Result) bool {
				switch {
				case k == "enum" && enum.Raw == "":
					enum = v
				case k == "type" && typ.Raw == "":
					typ = v
				case k == "description" && desc.Raw == "":
					desc = v
				case k == "properties" && sub.Raw == "":
					sub = v
				case k == "items" && items.Raw == "":
					items = v
				}
				return true
			})
		}
		if enum.IsArray() {
			n += enumInit
			rawElements(enum.Raw, func(item gjson.Result) bool {
				n += enumItem + countText(c.enc, textOf(item))
				return true
			})
		}
		n += c.join(buf, key, ":", textOf(typ), ":", trimDot(textOf(desc)))
		n += c.properties(buf, sub, depth+1)
		n += c.properties(buf, rawGet(items, "properties"), depth+1)
		return true
	})
	if any {
		n += propInit
	}
	return n
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

// maxJoinBuf is the largest buffer, in bytes, joinBufs keeps: a tool's
// description longer than this is joined in a buffer the collector frees.
const maxJoinBuf = 64 << 10

// joinBufs are the buffers of toolsCounter.join, one per count at a time.
var joinBufs = sync.Pool{New: func() any { return new([]byte) }}

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

// serverToolPrefixes are the tool types whose calls the upstream runs
// itself, adding their results (search hits, fetched pages, files, MCP
// tool output, code output) to the context it bills: OpenAI's Responses
// built-in tools (web_search, file_search, mcp, code_interpreter,
// image_generation; https://platform.openai.com/docs/guides/tools) and
// Anthropic's server tools (web_search_*, web_fetch_*, code_execution_*;
// https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview).
var serverToolPrefixes = []string{"web_search", "web_fetch", "file_search", "mcp", "code_interpreter", "code_execution", "image_generation"}

// serverTools reports whether tools (a request's "tools" array) holds a
// tool the upstream runs itself: the request then pulls context the body
// does not hold (Estimate.ServerContext).
func serverTools(tools gjson.Result) bool {
	found := false
	tools.ForEach(func(_, t gjson.Result) bool {
		typ := t.Get("type").String()
		for _, p := range serverToolPrefixes {
			if strings.HasPrefix(typ, p) {
				found = true
			}
		}
		return !found
	})
	return found
}
