package weigher

import (
	"math"
	"strings"

	"github.com/tidwall/gjson"
)

// Container sizes in GB (spec.Usage.ContainerGB): OpenAI's hosted code
// interpreter and shell run in a container of memory_limit "1g" (the
// default), "4g", "16g" or "64g"
// (https://developers.openai.com/api/docs/guides/tools-code-interpreter),
// each session billed by that size.
const (
	containerDefaultGB = 1  // no memory_limit (or null)
	containerLargestGB = 64 // a size llmguard cannot read, or a container named by id
)

// containerGB is the container gigabyte-sessions a Responses request's tools
// may open (Estimate.ContainerGB), summed over its tools:
//   - a code_interpreter tool with a container object ({"type": "auto"},
//     which creates a container for the request even when the model never
//     calls the tool) or none: the object's memory_limit ("1g", "4g",
//     "16g", "64g"; 1 when absent or null);
//   - a code_interpreter tool naming a container by id: 64, the largest
//     size, since the body does not say the size of the container the
//     call keeps alive;
//   - a shell tool run by the upstream (an environment other than
//     "local"): its environment's memory_limit for "container_auto", 1
//     without an environment, 64 for any other (a container_reference);
//   - a memory_limit llmguard does not read as one of the four sizes: 64.
//
// Other tools add nothing. The sum is bounded by math.MaxInt32.
func containerGB(tools gjson.Result) int32 {
	if !tools.IsArray() || !mayHoldContainer(tools.Raw) {
		return 0
	}
	var sum int64
	tools.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() {
			return true
		}
		switch t.Get("type").String() {
		case "code_interpreter":
			c := t.Get("container")
			switch {
			case c.Type == gjson.String:
				sum += containerLargestGB
			case c.IsObject():
				sum += memoryLimitGB(c.Get("memory_limit"))
			default: // absent or null: a lenient upstream's auto container
				sum += containerDefaultGB
			}
		case "shell":
			env := t.Get("environment")
			switch {
			case !env.Exists() || env.Type == gjson.Null:
				// No environment: a hosted shell's default container,
				// were the upstream to host it.
				sum += containerDefaultGB
			case env.Get("type").String() == "local":
			case env.Get("type").String() == "container_auto":
				sum += memoryLimitGB(env.Get("memory_limit"))
			default:
				sum += containerLargestGB
			}
		}
		sum = min(sum, math.MaxInt32)
		return true
	})
	return int32(sum)
}

// mayHoldContainer reports whether a tools list's JSON text may name a
// tool containerGB prices: it names one, or holds a \u escape (which may
// spell one).
func mayHoldContainer(raw string) bool {
	return strings.Contains(raw, "code_interpreter") || strings.Contains(raw, "shell") || strings.Contains(raw, `\u`)
}

// memoryLimitGB is a container's memory_limit in GB: containerDefaultGB
// when absent or null, 1, 4, 16 or 64 for "1g", "4g", "16g" or "64g" (in
// any case), containerLargestGB for anything else.
func memoryLimitGB(v gjson.Result) int64 {
	if !v.Exists() || v.Type == gjson.Null {
		return containerDefaultGB
	}
	if v.Type == gjson.String {
		switch strings.ToLower(v.Str) {
		case "1g":
			return 1
		case "4g":
			return 4
		case "16g":
			return 16
		case "64g":
			return 64
		}
	}
	return containerLargestGB
}
