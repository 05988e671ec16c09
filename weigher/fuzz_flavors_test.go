package weigher

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkEstimate is the invariant every weighing keeps: non-negative
// figures, and the byte fallback exactly when not parsed. (Time is not
// asserted here: a wall-clock bound fails on a loaded machine; linear time
// per body shape is TestBodyShapesLinear's, by ratios measured in one run.)
func checkEstimate(t *testing.T, name string, body []byte, weigh func([]byte) Estimate, fallbackOut int64) {
	t.Helper()
	e := weigh(body)
	if e.InputTokens < 0 || e.OutputTokens < 0 || e.InputTokens > 3*maxTokens || e.OutputTokens > maxTokens || e.WebSearches < 0 {
		t.Errorf("%s: estimate out of range %+v", name, e)
	}
	if !e.Parsed && (e.InputTokens != int64(len(body)+1)/2 || e.OutputTokens != fallbackOut) {
		t.Errorf("%s: fallback estimate %+v for %d bytes", name, e, len(body))
	}
}

func FuzzResponses(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","input":"hi","instructions":"be terse","max_output_tokens":10,"stream":true}`,
		`{"model":"o4-mini","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="},{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0xLjQKL1R5cGUgL1BhZ2U="}]},{"type":"function_call","name":"f","arguments":"{}"},{"type":"function_call_output","output":[{"type":"input_text","text":"r"}]},{"type":"reasoning","summary":[{"text":"s"}],"encrypted_content":"xx"},{"type":"item_reference","id":"i"}],"tools":[{"type":"function","name":"f","parameters":{"properties":{"a":{"enum":[1]}}}},{"type":"web_search"}],"text":{"format":{"type":"json_schema","schema":{}}}}`,
		`{"previous_response_id":"r","conversation":{"id":"c"},"prompt":{"id":"p"}}`,
		`{"model":"gpt-4o","input":"news?","tools":[{"type":"web_search_preview"}],"max_tool_calls":"3"}`,
		`{"input":[[],1,"x",{"content":[null,{"type":"input_file"}]}],"instructions":[{"role":"system","content":"x"}]}`,
		`not json`, ``, `[]`, `{"max_output_tokens":1e999}`,
		`{"model":"gpt-4o","input":"hi","context_management":[{"type":"compaction","compact_threshold":"5"},{}],"n":"3","n_cmpl":1e999,"best_of":2,"min_tokens":9,"ignore_eos":"true"}`,
		`{"input":"hi","max_output_tokens":1e15,"n_cmpl":1e15,"context_management":{"compact_threshold":-1}}`,
		`{"input":[{"type":"compaction","encrypted_content":"gAAAAB"},{"type":"compaction"}],"context_management":[]}`,
		`{"model":"gpt-4o","input":"draw","stream":true,"max_tool_calls":2,"tools":[{"type":"image_generation","size":"1024x1536","quality":"high","partial_images":3},{"type":"file_search"},{"type":"image\u005fgeneration","size":"auto"}]}`,                  // hosted tools' fees (adv37)
		`{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.MP3","file_url":"https://x/b.wav?c","file_data":"data:audio/wav;base64,UklG"},{"type":"input_audio","input_audio":{}},{"type":"input_image","image_url":"data:audio/ogg,x"}]}]}`, // audio parts (items37)
	} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkEstimate(t, "Responses", body, w.Responses, 1000)
		sameAsPlain(t, KindResponses, body)
	})
}

func FuzzMessages(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":1,"system":"You are a scientist","messages":[{"role":"user","content":"Hello, Claude"}]}`,
		`{"model":"claude-opus-4-7","max_tokens":10,"system":[{"type":"text","text":"s"}],"tools":[` + anthropicWeatherTool + `,{"type":"bash_20250124","name":"bash"},{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":5},"messages":` + anthropicThinking + `}`,
		`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}},{"type":"document","source":{"type":"base64","data":"JVBERi0xLjQKL1R5cGUgL1BhZ2U="}},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}},{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"search_result","content":[{"type":"text","text":"deep"}]}]}]}]},{"role":"assistant","content":[{"type":"redacted_thinking","data":"QQ=="},{"type":"tool_use","name":"f","input":{"a":[1,2]}}]}]}`,
		`{"messages":[1,"x",{"content":[1,null,"s"]}],"system":42,"tools":{}}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"tool_result","content":[{"type":"text","text":"deeper"}]}]}]}]}]}]}]}]}`, // past maxBlockDepth (adv36)
		`{"model":"claude-sonnet-4-5","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"a","max_uses":3},{"type":"web_search_20260209","name":"b"}],"messages":[{"role":"user","content":"news?"}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":5,"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"messages":[{"role":"user","content":"run"}]}`, // an hour of container (adv37)
		`{"model":"claude-opus-4-6","max_tokens":5,"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":1}},{"type":"clear_tool_uses_20250919"},{"type":"compact_x","trigger":null}]},"messages":[{"role":"user","content":"hi"}]}`,
		`not json`, ``, `[]`, `{"max_tokens":-1e999}`,
	} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkEstimate(t, "Messages", body, w.Messages, 1000)
		sameAsPlain(t, KindMessages, body)
	})
}

func FuzzCompletions(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7,"n":2,"best_of":3,"echo":true,"suffix":"x","stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[[1,2],[3],"x",4,null,{}],"max_tokens":null}`,
		`{"prompt":[1,2,3]}`, `{"prompt":[]}`, `{}`, `not json`, ``, `{"n":1e308,"max_tokens":1e308,"echo":true,"prompt":"x"}`,
		`{"prompt":[{"prompt_string":"<__media__>","multimodal_data":["aGk="]},{"multimodal_data":[]},{"multimodal_data":null}]}`,
	} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkEstimate(t, "Completions", body, w.Completions, 1000)
		sameAsPlain(t, KindCompletions, body)
		checkMaxTokensFields(t, body, w.Completions(body))
	})
}

// checkMaxTokensFields is the invariant of a parsed completions body's
// OutputFields: 7 spliced at them makes a JSON object whose max_tokens is
// 7, and with none the body has no max_tokens (what the proxy's pin
// writes is the maximum the upstream reads, and the body stays JSON).
func checkMaxTokensFields(t *testing.T, body []byte, e Estimate) {
	t.Helper()
	if !e.Parsed {
		return
	}
	var nb []byte
	at, spliced := 0, false
	for _, f := range e.OutputFields {
		if f.End == 0 {
			continue
		}
		if f.Start < at || f.End > len(body) || f.Start >= f.End {
			t.Fatalf("OutputFields %v out of order or range for %d bytes", e.OutputFields, len(body))
		}
		nb = append(append(nb, body[at:f.Start]...), '7')
		at, spliced = f.End, true
	}
	nb = append(nb, body[at:]...)
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(nb))
	d.UseNumber() // 1e999 is a JSON number, not a float64
	if err := d.Decode(&m); err != nil {
		t.Fatalf("OutputFields %v: spliced body is not a JSON object: %v\n%q", e.OutputFields, err, nb)
	}
	v, has := m["max_tokens"]
	if spliced && v != json.Number("7") || !spliced && has {
		t.Errorf("OutputFields %v: max_tokens after the splice is %v (present %v)", e.OutputFields, v, has)
	}
}

func FuzzEmbeddings(f *testing.F) {
	for _, s := range []string{
		`{"model":"text-embedding-3-small","input":"The food was delicious"}`,
		`{"input":["a","b"]}`, `{"input":[1,2,3]}`, `{"input":[[1,2],[3]]}`, `{"input":{}}`, `not json`, ``,
		`{"texts":["a","b"]}`, `{"inputs":"a b"}`, `{"prompt":[{"text":"a"}],"input":"b"}`,
	} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkEstimate(t, "Embeddings", body, w.Embeddings, 0)
		if e := w.Embeddings(body); e.OutputTokens != 0 {
			t.Errorf("embeddings reserve output: %+v", e)
		}
	})
}

func FuzzStreamEvents(f *testing.F) {
	for _, e := range []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":25,"cache_creation_input_tokens":1,"cache_read_input_tokens":2,"output_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":1}}}}`},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hello"}}`},
		{"message_delta", `{"type":"message_delta","usage":{"output_tokens":-15}}`},
		{"message_stop", `{"type":"message_stop"}`},
		{"error", `{"type":"error","error":{"type":"overloaded_error"}}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`},
		{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":1e999,"output_tokens":2}}}`},
		{"", `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12}}`},
		{"response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","partial_image_index":0,"partial_image_b64":"aGk="}`},
		{"response.completed", `{"type":"response.completed","response":{"output":[{"type":"image_generation_call","size":"1024x1024","quality":"low"},{"type":"file_search_call"}],"tool_usage":{"image_gen":{"input_tokens":9,"output_tokens":1e300}},"usage":{"input_tokens":1,"output_tokens":2}}}`},
		{"response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"type":"image_generation_call","size":"1024x1536","quality":"high","result":"aGk="}}`},
		{"message_start", `{"type":"message_start","message":{"content":[{"type":"text","text":"Hi"},{"type":"tool_use","name":"f","input":{"q":1}}],"usage":{"input_tokens":2,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"q":"Hi"}}}`},
		{"", `{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Hi"}],"audio":{"data":"aGk=","transcript":"Hi"}},"message":{"content":"Hi"},"text":"Hi"}]}`},
		// adv40: an unknown delta's strings, an unknown block's text, choices as an object.
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"foo_delta","text":"Hi","p":[{"v":"a"},1,null]}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":"Hi"}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"foo","text":"Hi","thinking":"t"}}`},
		{"", `{"choices":{"0":{"delta":{"content":"Hi"}},"index":0,"delta":{"content":"Ho"}}}`},
		{"", `[DONE]`}, {"", ``}, {"x", `{`},
	} {
		for k := KindOther; k <= KindCountTokens; k++ {
			f.Add(uint8(k), []byte(e.typ), []byte(e.data))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, typ, data []byte) {
		s := NewStream(Kind(kind % 8))
		for range 3 { // repeated events must not accumulate (cumulative counts)
			u := s.Event(typ, data)
			// UsageOnly is the include_usage chunk's shape (empty choices, a
			// usage object), readable figures or not (Chunk.UsageOnly): it
			// carries no output, and unreadable figures are never final.
			if u.UsageOnly && (u.Text != "" || (!u.HasUsage && s.Usage().Final)) {
				t.Errorf("UsageOnly with text, or final without a readable usage: %+v %+v", u, s.Usage())
			}
		}
		once := NewStream(Kind(kind % 8))
		once.Event(typ, data)
		if s.Usage() != once.Usage() {
			t.Errorf("repeating an event changed usage: %+v vs %+v", s.Usage(), once.Usage())
		}
		r := s.Usage()
		u := r.Usage
		if u.InputTokens < 0 || u.CachedInputTokens < 0 || u.CacheWriteTokens < 0 || u.CacheWrite1hTokens < 0 || u.OutputTokens < 0 || u.ReasoningTokens < 0 {
			t.Errorf("negative usage %+v", u)
		}
		if u.CachedInputTokens+u.CacheWriteTokens > u.InputTokens && Kind(kind%8) == KindMessages {
			t.Errorf("cache parts exceed input: %+v", u)
		}
		if su, _ := s.Settle(Estimate{InputTokens: 5}, 3); su.InputTokens < 0 || su.OutputTokens < 0 {
			t.Errorf("negative settlement %+v", su)
		}
	})
}
