package weigher

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// parseOpenAIChunkGJSON is parseOpenAIChunk as it was before the span walk
// (gjson's ForEach and Get over the checked chunk): the reference the
// differential tests hold the walk to.
func parseOpenAIChunkGJSON(data []byte, completions bool, maxDepth int) Chunk {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneMarker) {
		return Chunk{Done: true}
	}
	if len(data) == 0 {
		return Chunk{}
	}
	root, ok := parseObject(data, maxDepth)
	if !ok {
		return Chunk{Unread: true}
	}
	var c Chunk
	var text textJoiner
	var ends []int
	emptyChoices, usageObject, hasChoices, foreign := false, false, false, false
	holds := func(v gjson.Result) bool {
		return (v.Type == gjson.String && v.Str != "") || (v.IsArray() && len(v.Array()) > 0) || (v.IsObject() && len(v.Map()) > 0)
	}
	add := func(v gjson.Result) {
		if v.Type == gjson.String {
			text.add(v)
		} else if holds(v) {
			c.Uncounted = true
		}
	}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "error":
			c.Err = v.Type != gjson.Null
		case "service_tier":
			c.ServiceTier = servedTierGJSON(v)
		case "usage":
			c.Usage, c.HasUsage = usageOfGJSON(v)
			usageObject = v.IsObject()
		case "delta", "content_block", "message", "content", "text", "output", "item", "part":
			foreign = foreign || holds(v) // another dialect's output at the top
		case "choices":
			hasChoices = true
			if !v.IsArray() {
				c.Uncounted = c.Uncounted || holds(v) // a choice or choices as an object
				break
			}
			count := 0
			v.ForEach(func(_, ch gjson.Result) bool {
				count++
				if !ch.IsObject() {
					c.Uncounted = c.Uncounted || holds(ch) // a choice as a string or an array
					return true
				}
				if ch.IsObject() {
					if f := ch.Get("finish_reason"); f.Exists() && f.Type != gjson.Null {
						// The index as choiceIndex reads it, by another
						// path: an integer below MaxEndedChoices written
						// as one, 0 when absent.
						idx := ch.Get("index")
						switch {
						case !idx.Exists():
							ends = append(ends, 0)
						case idx.Type == gjson.Number && idx.Num >= 0 && idx.Num < MaxEndedChoices && idx.Raw == strconv.Itoa(int(idx.Num)):
							ends = append(ends, int(idx.Num))
						}
					}
					ch.ForEach(func(k, v gjson.Result) bool {
						switch known := k.Str == "index" || k.Str == "finish_reason" || k.Str == "logprobs" || k.Str == "native_finish_reason" ||
							k.Str == "stop_reason" || k.Str == "matched_stop" || k.Str == "content_filter_results" || k.Str == "content_filter_offsets"; {
						case known, k.Str == "delta" && !completions, k.Str == "text" && completions:
						default:
							c.Uncounted = c.Uncounted || holds(v)
						}
						return true
					})
				}
				if completions {
					add(ch.Get("text"))
					return true
				}
				d := ch.Get("delta")
				if !d.IsObject() {
					c.Uncounted = c.Uncounted || holds(d) // a delta as a string or an array
					return true
				}
				add(d.Get("content"))
				add(d.Get("refusal"))
				rc, r := d.Get("reasoning_content"), d.Get("reasoning")
				add(rc)
				if rc.Type != gjson.String || r.Type != gjson.String || rc.Raw != r.Raw {
					add(r) // the same text under both names is counted once
				}
				d.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "role", "annotations", "content", "refusal", "tool_calls", "function_call", "reasoning_content", "reasoning":
					default:
						c.Uncounted = c.Uncounted || holds(v)
					}
					return true
				})
				d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
					add(tc.Get("function.arguments"))
					return true
				})
				add(d.Get("function_call.arguments"))
				return true
			})
			emptyChoices = count == 0
		}
		return true
	})
	// The chunk include_usage adds is recognised (and dropped when llmguard
	// asked for it) by its shape, whether or not its figures are readable.
	c.UsageOnly = usageObject && emptyChoices
	c.Uncounted = c.Uncounted || (foreign && !hasChoices)
	c.Text = text.String()
	c.Finished = endsOf(ends...)
	return c
}

// BenchmarkParseChatChunkGJSON is BenchmarkParseChatChunk's chunk read by
// the reference reader, for an A/B in one run.
func BenchmarkParseChatChunkGJSON(b *testing.B) {
	data := []byte(benchChatChunk)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		parseOpenAIChunkGJSON(data, false, 0)
	}
}

// chunkSeeds are chunks that exercise what the span walk must read as
// gjson does: duplicates (members in order, a choice's fields first
// found), escaped keys, tool_calls as an object or a scalar, odd types,
// whitespace everywhere, nesting.
var chunkSeeds = []string{
	benchChatChunk,
	`{"service_tier":"priority","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
	`{"service_tier":"pri\u006frity","choices":[]}`, `{"service_tier":null}`, `{"service_tier":7}`, `{"service_tier":{"a":"b"}}`,
	`{"service_tier":"` + strings.Repeat("p", 33) + `"}`, `{"service_tier":"on_demand","usage":{"prompt_tokens":3,"completion_tokens":1}}`,
	`{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
	`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":4}}}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}}]}}]}`,
	`{"error":{"message":"x"}}`, `{"error":null}`, `[DONE]`, ``, `{`, `"\u0000"`, `[]`, `{}`, ` { } `,
	`{"choices":[{"delta":{"content":"a","content":"b"}}],"choices":[{"delta":{"content":"c"}}]}`,
	`{"choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]}`,
	`{"ch\u006fices":[{"d\u0065lta":{"c\u006fntent":"x\ny","refusal":"no"}}]}`,
	`{"choices":[{"delta":{"tool_calls":{"a":{"function":{"arguments":"1"}},"b":{"function":{"arguments":"2"}}}}}]}`,
	`{"choices":[{"delta":{"tool_calls":"str","function_call":{"arguments":"f","arguments":"g"}}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1"}},{"function":{"arguments":""}},7,null,[1]]}}]}`,
	`{"choices":[{"text":"legacy","delta":{"content":"chat"}}, {"text":5}, "s", 1, null, [] ]}`,
	` {"choices" : [ { "delta" : { "content" : "sp" , "refusal" : null } } ] , "usage" : null } `,
	`{"choices":{"0":{"delta":{"content":"obj"}}}}`,
	`{"choices":[{"delta":[{"content":"arr"}]}]}`,
	`{"usage":{"prompt_tokens":"7","completion_tokens":1e2},"choices":[]}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":2},"usage":null,"choices":[]}`,
	`{"choices":[{"delta":{"content":"\ud83d\ude00 \u00e9"}}],"error":false}`,
	`{"choices":[{"delta":{"content":"a\\","refusal":"\"q\""}}]}`,
	`{"choices":[[[[[[{"delta":{"content":"deep"}}]]]]]]}`,
	`{"choices":[{"delta":{"audio":{"id":"a","data":"QUFB","transcript":"hi"}}}]}`,
	`{"choices":[{"delta":{"reasoning_content":"think","reasoning":"more","content":null}}]}`,
	`{"choices":[{"delta":{"reasoning_content":"think","reasoning":"think","content":null}}]}`,
	`{"choices":[{"delta":{"reasoning":"th\u0069nk","reasoning_content":"think"}}]}`,
	`{"choices":[{"delta":{"reasoning":["think"],"reasoning_content":"think"}}]}`,
	`{"choices":[{"delta":{"role":"assistant","x":null,"y":"","z":[ ],"w":{ },"n":5,"b":true}}]}`,
	`{"choices":[{"delta":{"annotations":[{"url":"u"}],"extra":"s"}}]}`,
	`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop","logprobs":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"},"content_filter_results":{"hate":{"filtered":false}},"native_finish_reason":"stop","stop_reason":null,"matched_stop":2,"extra":""}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":null},{"index":2,"finish_reason":"length"}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":5}],"finish_reason":"stop"}`,
	`{"choices":[{"index":1023,"finish_reason":"stop"},{"index":1024,"finish_reason":"stop"},{"index":-1,"finish_reason":"x"},{"index":1.0,"finish_reason":"x"},{"index":"1","finish_reason":"x"},{"index":null,"finish_reason":"x"},{"finish_reason":""},{"index":1e0,"finish_reason":false},{"index":7,"finish_reason":null}]}`,
	`{"choices":[{"text":["legacy"],"delta":{"content":[{"type":"thinking","thinking":"t"}],"refusal":{},"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}`,
}

// TestOpenAIChunkSameAsGJSON holds the span walk to the gjson reader on the
// seeds, for both shapes (chat, legacy completions) and two depth limits.
func TestOpenAIChunkSameAsGJSON(t *testing.T) {
	for _, s := range chunkSeeds {
		sameChunk(t, []byte(s))
	}
}

func sameChunk(t *testing.T, data []byte) {
	t.Helper()
	for _, completions := range []bool{false, true} {
		for _, depth := range []int{0, 3} {
			got := parseOpenAIChunk(bytes.Clone(data), completions, depth)
			want := parseOpenAIChunkGJSON(bytes.Clone(data), completions, depth)
			if got != want {
				t.Errorf("chunk %q (completions %v, depth %d):\nwalk  %+v\ngjson %+v", data, completions, depth, got, want)
			}
		}
	}
}

// FuzzOpenAIChunkSameAsGJSON is TestOpenAIChunkSameAsGJSON on any input.
func FuzzOpenAIChunkSameAsGJSON(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameChunk(t, data) })
}

// endsOf is the list of the indexes idx (each in [0, MaxEndedChoices)),
// in order.
func endsOf(idx ...int) ChoiceEnds {
	var b []byte
	for _, i := range idx {
		b = appendChoiceEnd(b, i)
	}
	return ChoiceEnds{string(b)}
}
