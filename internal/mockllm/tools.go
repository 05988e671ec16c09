package mockllm

import (
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// A request that forces a function tool gets a call of it instead of a
// text reply, in its API's shape (chat tool_calls, a Responses
// function_call item, a Messages tool_use block), with the arguments
// {"input":"<the reply words>"}. The mock calls a tool only when told to:
// a model under tool_choice "auto" may or may not, and tests need to know.

// The arguments of the mock's tool call are {"input":"<the reply words>"}:
// these open and close them around the words.
const (
	toolArgsOpen  = `{"input":"`
	toolArgsClose = `"}`
)

// toolChoice is what a request's tool_choice asks for, read per API.
type toolChoice struct {
	none     bool   // no call: chat and Responses "none", Messages {"type":"none"}
	required bool   // a call of the first function: "required", Messages {"type":"any"}
	name     string // a call of this function, when the body lists it
}

// pickTool is the function the mock calls, "" for a text reply: the named
// one when tool_choice names a listed function, the first listed when it
// requires one, or when x-mock-tool-call asks under "auto" (a model that
// chose to call one); none when tool_choice is "none", names a function
// the body does not list, or the body lists none.
func pickTool(names []string, c toolChoice, h *fasthttp.RequestHeader) string {
	if len(names) == 0 || c.none {
		return ""
	}
	if c.name != "" {
		for _, n := range names {
			if n == c.name {
				return n
			}
		}
		return ""
	}
	if c.required || len(h.Peek("x-mock-tool-call")) > 0 {
		return names[0]
	}
	return ""
}

// functionNames are the non-empty names at namePath of the tools whose
// type is one of types ("" matching a tool without a type).
func functionNames(tools gjson.Result, namePath string, types ...string) []string {
	var names []string
	tools.ForEach(func(_, t gjson.Result) bool {
		typ := t.Get("type").String()
		for _, want := range types {
			if typ == want {
				if n := t.Get(namePath).String(); n != "" {
					names = append(names, n)
				}
				break
			}
		}
		return true
	})
	return names
}

// openAIToolChoice reads chat's and Responses' tool_choice: "none",
// "required", or an object naming a function at namePath.
func openAIToolChoice(v gjson.Result, namePath string) toolChoice {
	if v.IsObject() {
		return toolChoice{name: v.Get(namePath).String(), none: v.Get(namePath).String() == ""}
	}
	return toolChoice{none: v.String() == "none", required: v.String() == "required"}
}

// chatTool is the function a chat body's call goes to (tools[].function.name;
// tool_choice {"type":"function","function":{"name":…}}).
func chatTool(body []byte, h *fasthttp.RequestHeader) string {
	f := gjson.GetManyBytes(body, "tools", "tool_choice")
	return pickTool(functionNames(f[0], "function.name", "function"), openAIToolChoice(f[1], "function.name"), h)
}

// responsesTool is the function a Responses body's call goes to
// (tools[].name of type function; tool_choice {"type":"function","name":…}).
func responsesTool(body []byte, h *fasthttp.RequestHeader) string {
	f := gjson.GetManyBytes(body, "tools", "tool_choice")
	return pickTool(functionNames(f[0], "name", "function"), openAIToolChoice(f[1], "name"), h)
}

// messagesTool is the tool a Messages body's tool_use goes to (tools[].name
// of a client tool: no type, or "custom"; tool_choice {"type":"any"},
// {"type":"tool","name":…}, {"type":"none"}).
func messagesTool(body []byte, h *fasthttp.RequestHeader) string {
	f := gjson.GetManyBytes(body, "tools", "tool_choice.type", "tool_choice.name")
	c := toolChoice{none: f[1].String() == "none", required: f[1].String() == "any"}
	if f[1].String() == "tool" {
		c.name, c.none = f[2].String(), f[2].String() == ""
	}
	return pickTool(functionNames(f[0], "name", "", "custom"), c, h)
}
