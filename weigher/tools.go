package weigher

import (
	"strings"

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
func (c toolsCounter) count(list gjson.Result) int64 {
	if !list.IsArray() {
		return 0
	}
	var n int64
	functions := 0
	list.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() {
			return true
		}
		fn := t
		if f := t.Get("function"); f.IsObject() {
			fn = f
		} else if typ := t.Get("type"); typ.Exists() && typ.String() != "function" {
			n += countText(c.enc, t.Raw)
			return true
		}
		functions++
		n += c.funcInit
		n += countText(c.enc, fn.Get("name").String()+":"+trimDot(fn.Get("description").String()))
		n += c.properties(fn.Get("parameters.properties"), 0)
		return true
	})
	if functions > 0 {
		n += funcEnd
	}
	return n
}

// maxSchemaDepth bounds the recursion into nested schemas.
const maxSchemaDepth = 8

// properties counts a JSON-schema "properties" object.
func (c toolsCounter) properties(props gjson.Result, depth int) int64 {
	if !props.IsObject() || depth > maxSchemaDepth {
		return 0
	}
	var n int64
	any := false
	props.ForEach(func(key, p gjson.Result) bool {
		any = true
		n += propKey
		if enum := p.Get("enum"); enum.IsArray() {
			n += enumInit
			enum.ForEach(func(_, item gjson.Result) bool {
				n += enumItem + countText(c.enc, item.String())
				return true
			})
		}
		n += countText(c.enc, key.String()+":"+p.Get("type").String()+":"+trimDot(p.Get("description").String()))
		n += c.properties(p.Get("properties"), depth+1)
		n += c.properties(p.Get("items.properties"), depth+1)
		return true
	})
	if any {
		n += propInit
	}
	return n
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
