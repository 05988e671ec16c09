package weigher

import (
	"strings"
	"testing"
)

// A chat answer's visible output (content, parts, refusal, tool calls), a
// completion's text, a Responses answer's output items and a Messages
// answer's content blocks are read; an answer with none reads "".
func TestAnswerOutputText(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
		body string
		want string
	}{
		{"content", KindChat, `{"model":"m","choices":[{"message":{"content":"hello"}}]}`, "hello"},
		{"parts", KindChat, `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`, "a\nb"},
		{"refusal and tools", KindChat, `{"choices":[{"message":{"content":null,"refusal":"no","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`, "no\nf\n{}"},
		// vLLM's and OpenRouter's reasoning member, as their streams'
		// delta.reasoning (adv26); a request's reasoning object is not text.
		{"reasoning", KindChat, `{"choices":[{"message":{"reasoning":"th","reasoning_content":"rc","content":"hi"}}]}`, "hi\nrc\nth"},
		// Both names for one text (mlx-vlm's alias): generated, and billed, once.
		{"reasoning aliased", KindChat, `{"choices":[{"message":{"reasoning":"th","reasoning_content":"th","content":"hi"}}]}`, "hi\nth"},
		{"reasoning object", KindChat, `{"choices":[{"message":{"reasoning":{"effort":"high"},"content":"hi"}}]}`, "hi"},
		// OpenRouter's reasoning_details (adv27): its text and summary
		// items, not an encrypted one's data; beside a reasoning string
		// the longer of the two, never both.
		{"reasoning details", KindChat, `{"choices":[{"message":{"content":"hi","reasoning_details":[{"type":"reasoning.text","text":"t"},` +
			`{"type":"reasoning.summary","summary":"s"},{"type":"reasoning.encrypted","data":"QUJD"}]}}]}`, "hi\nt\ns"},
		{"reasoning longer than details", KindChat, `{"choices":[{"message":{"reasoning":"abc","reasoning_details":[{"type":"reasoning.text","text":"ab"}]}}]}`, "abc"},
		{"details longer than reasoning", KindChat, `{"choices":[{"message":{"reasoning":"a","reasoning_details":[{"type":"reasoning.text","text":"ab"},{"type":"reasoning.summary","summary":"c"}]}}]}`, "ab\nc"},
		{"completions", KindCompletions, `{"model":"m","choices":[{"text":"t1"},{"text":"t2"}]}`, "t1\nt2"},
		{"none", KindChat, `{"choices":[{"message":{"content":""}}]}`, ""},
		// choices as an object (adv40): one choice sent bare, or choices
		// keyed by index: each string once (message.text is read as the text of
		// a choice keyed "message").
		{"choices bare", KindChat, `{"choices":{"index":0,"message":{"content":"hi","text":"no"},"delta":{"content":"d"}}}`, "hi\nd\nno"},
		{"choices keyed", KindChat, `{"choices":{"0":{"message":{"content":"a"}},"1":{"text":"b"},"2":"c"}}`, "a\nb"},
		{"not json", KindChat, `nope`, ""},
		{"responses", KindResponses, `{"model":"m","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"r"}]},` +
			`{"type":"message","content":[{"type":"output_text","text":"hi"},{"type":"refusal","refusal":"no"}]},` +
			`{"type":"function_call","name":"f","arguments":"{}"}]}`, "r\nhi\nno\nf\n{}"},
		// The text of code interpreter, shell, apply_patch and custom tool
		// calls, as their streams' *.delta events carry it (adv27).
		{"responses calls", KindResponses, `{"output":[{"type":"code_interpreter_call","code":"c","outputs":[{"type":"logs","logs":"not output"}]},` +
			`{"type":"local_shell_call","action":{"type":"exec","command":["ls","-l"]}},{"type":"shell_call","action":{"commands":["pwd"]}},` +
			`{"type":"apply_patch_call","operation":{"type":"update_file","path":"p","diff":"d"}},{"type":"custom_tool_call","name":"g","input":"i"}]}`,
			"c\nls\n-l\npwd\nd\np\ng\ni"},
		{"responses none", KindResponses, `{"output":[{"type":"message","content":[]}],"text":"not output"}`, ""},
		{"messages", KindMessages, `{"model":"m","content":[{"type":"thinking","thinking":"th"},{"type":"text","text":"hi"},` +
			`{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]}`, "th\nhi\nf\n{\"a\":1}"},
		{"messages none", KindMessages, `{"content":[{"type":"text","text":""}],"stop_reason":"end_turn"}`, ""},
		{"embeddings read nothing", KindEmbeddings, `{"choices":[{"text":"t1"}]}`, ""},
	} {
		if text := answerOutputText(tc.kind, []byte(tc.body)); text != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, text, tc.want)
		}
	}
}

// A usage of completion_tokens 0 is a valid usage (an answer stopped at
// once), in every spelling of 0; prompt_tokens 0 and a negative
// completion stay unreadable. Weigher.ParseUsage charges the text such an
// answer carries anyway.
func TestChatUsageZeroCompletion(t *testing.T) {
	for _, c := range []string{`0`, `-0`, `0.0`, `"0"`, `" 0 "`, `0e5`} {
		body := `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":` + c + `}}`
		u, ok := ParseChatUsage([]byte(body))
		if !ok || u.InputTokens != 12 || u.OutputTokens != 0 {
			t.Errorf("completion_tokens %s: %+v %v, want 12 in, 0 out", c, u, ok)
		}
		if _, ok := parseChatUsageChecked([]byte(body), 0); !ok {
			t.Errorf("completion_tokens %s: the checked reader refuses it", c)
		}
	}
	for _, body := range []string{
		`{"usage":{"prompt_tokens":0,"completion_tokens":0}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":-1}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":"x"}}`,
		`{"usage":{"prompt_tokens":5}}`,
	} {
		if u, ok := ParseChatUsage([]byte(body)); ok {
			t.Errorf("%s: read as %+v, want unreadable", body, u)
		}
	}
	w := testWeigher(t)
	text := strings.TrimSpace(strings.Repeat("word ", 50))
	body := `{"model":"gpt-4o-mini","choices":[{"message":{"content":"` + text + `"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":12,"completion_tokens":0}}`
	u, ok := w.ParseUsage(KindChat, []byte(body), &Estimate{Model: "gpt-4o-mini"})
	if want := w.CountText("gpt-4o-mini", text); !ok || u.OutputTokens != want || want == 0 {
		t.Errorf("Weigher.ParseUsage: %+v %v, want %d output tokens", u, ok, want)
	}
}

// answerOutputText never panics, and whatever text it returns is made of
// the body's strings (it is never longer than the body), for every kind.
func FuzzAnswerOutputText(f *testing.F) {
	f.Add([]byte(`{"model":"m","choices":[{"message":{"content":"hello","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`))
	f.Add([]byte(`{"choices":[{"text":"a"},{"delta":{"content":[{"text":"b"}]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"\u00e9\ud800"}}]}`))
	f.Add([]byte(`{"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]},{"name":"f","arguments":"{}","input":"x"}]}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"hi"},{"type":"tool_use","name":"f","input":{"a":[1]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"reasoning":"a","reasoning_details":[{"type":"reasoning.text","text":"ab"},{"type":"reasoning.summary","summary":"c"}]}}]}`))
	f.Add([]byte(`{"output":[{"type":"code_interpreter_call","code":"c"},{"action":{"command":["ls"],"commands":["a"]}},{"operation":{"path":"p","diff":"d"}}]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, k := range weighedKinds {
			if text := answerOutputText(k, body); len(text) > 2*len(body) {
				t.Fatalf("%v: text %d bytes from a %d-byte body", k, len(text), len(body))
			}
		}
	})
}

// answerOutputText is answerOutput's pieces of a kind k answer joined by
// newlines: what TestAnswerOutputText reads.
func answerOutputText(k Kind, body []byte) string {
	var b strings.Builder
	answerOutput(k, body, func(p string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p)
	})
	return b.String()
}

// TestParseUsageHiddenOutputKeepsTheReservation: an answer holding output
// llmguard cannot read (an encrypted reasoning_details item, a Messages
// redacted_thinking block, a Responses reasoning item's
// encrypted_content) whose usage reports no more output than its visible
// text is charged at least the output reserved; a usage above its text,
// or an answer without hidden output, is not.
func TestParseUsageHiddenOutputKeepsTheReservation(t *testing.T) {
	w := testWeigher(t)
	data := strings.Repeat("QUJD", 400)
	est := Estimate{Model: "gpt-4o-mini", OutputTokens: 2000}
	for _, c := range []struct {
		name string
		k    Kind
		body string
		want int64
	}{
		{"chat encrypted, 0", KindChat, `{"choices":[{"message":{"content":"ok","reasoning_details":[{"type":"reasoning.encrypted","data":"` + data + `"}]}}],"usage":{"prompt_tokens":9,"completion_tokens":0}}`, 2000},
		{"chat encrypted, 700", KindChat, `{"choices":[{"message":{"content":"ok","reasoning_details":[{"type":"reasoning.encrypted","data":"` + data + `"}]}}],"usage":{"prompt_tokens":9,"completion_tokens":700}}`, 700},
		{"chat empty data, 0", KindChat, `{"choices":[{"message":{"content":"ok","reasoning_details":[{"type":"reasoning.encrypted","data":""}]}}],"usage":{"prompt_tokens":9,"completion_tokens":0}}`, 1},
		{"chat text only, 0", KindChat, `{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":9,"completion_tokens":0}}`, 1},
		{"messages redacted, 0", KindMessages, `{"content":[{"type":"redacted_thinking","data":"` + data + `"},{"type":"text","text":"ok"}],"usage":{"input_tokens":9,"output_tokens":0}}`, 2000},
		{"responses encrypted, 1", KindResponses, `{"output":[{"type":"reasoning","summary":[],"encrypted_content":"` + data + `"},{"type":"message","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":9,"output_tokens":1}}`, 2000},
	} {
		if u, ok := w.ParseUsage(c.k, []byte(c.body), &est); !ok || u.OutputTokens != c.want {
			t.Errorf("%s: %+v %v, want %d output tokens", c.name, u, ok, c.want)
		}
	}
}
