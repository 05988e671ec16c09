package mockllm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/weigher"
)

// start runs a mock for one test.
func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testWeigher is the weigher the mock uses, for expected input counts.
func testWeigher(t *testing.T) *weigher.Weigher {
	t.Helper()
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var client = &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 10 * time.Second}

// reply is an answer read to its end (or to the connection's cut).
type reply struct {
	status  int
	header  http.Header
	raw     []byte // as sent, before gzip decoding
	body    []byte // decoded
	readErr error  // io.ErrUnexpectedEOF when the stream was cut
}

func post(t *testing.T, s *Server, path, body string, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	r.raw, r.readErr = io.ReadAll(resp.Body)
	r.body = r.raw
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(r.raw))
		if err != nil {
			t.Fatal(err)
		}
		var zerr error
		r.body, zerr = io.ReadAll(zr)
		if zerr != nil && r.readErr == nil {
			r.readErr = zerr
		}
	}
	return r
}

// decode parses a JSON answer into v.
func decode(t *testing.T, r reply, v any) {
	t.Helper()
	if r.status != 200 || r.readErr != nil {
		t.Fatalf("status %d, read %v: %s", r.status, r.readErr, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
}

// event is one SSE event.
type event struct {
	name string
	data string
}

// events splits an SSE body into events (LF or CRLF line endings).
func events(body []byte) []event {
	var out []event
	var cur event
	for line := range strings.SplitSeq(string(body), "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[len("data: "):]
		}
	}
	return out
}

// settle reads a stream as the proxy does and returns what it saw.
func settle(k weigher.Kind, evs []event) (weigher.StreamUsage, weigher.Stream, string) {
	st := weigher.NewStream(k)
	var text strings.Builder
	for _, e := range evs {
		u := st.Event([]byte(e.name), []byte(e.data))
		text.WriteString(u.Text)
	}
	return st.Usage(), st, text.String()
}

// flavors are the streaming endpoints, with a request body that streams
// and one that does not.
var flavors = []struct {
	name, path, body, stream string
	kind                     weigher.Kind
}{
	{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say something"}]}`,
		`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say something"}]}`, weigher.KindChat},
	{"completions", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say something"}`,
		`{"model":"gpt-3.5-turbo-instruct","prompt":"Say something","stream":true,"stream_options":{"include_usage":true}}`, weigher.KindCompletions},
	{"responses", "/v1/responses", `{"model":"gpt-4o","input":"Say something"}`,
		`{"model":"gpt-4o","input":"Say something","stream":true}`, weigher.KindResponses},
	{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Say something"}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say something"}]}`, weigher.KindMessages},
}

func TestResponsesJSON(t *testing.T) {
	s, w := start(t), testWeigher(t)
	body := `{"model":"gpt-4o","instructions":"Be brief.","input":"Name a fox.","max_output_tokens":5}`
	var r struct {
		ID, Object, Status, Model string
		Output                    []struct {
			Type, ID, Status, Role string
			Content                []struct {
				Type, Text  string
				Annotations []any
			}
		}
		Usage struct {
			InputTokens        int64 `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens *int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokens        int64 `json:"output_tokens"`
			OutputTokensDetails struct {
				ReasoningTokens *int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
			TotalTokens int64 `json:"total_tokens"`
		}
	}
	decode(t, post(t, s, "/v1/responses", body, map[string]string{"x-mock-reasoning-tokens": "7"}), &r)
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != "completed" || r.Model != "gpt-4o" {
		t.Fatalf("envelope: %+v", r)
	}
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[1].Type != "message" || r.Output[1].Role != "assistant" ||
		len(r.Output[1].Content) != 1 || r.Output[1].Content[0].Type != "output_text" || r.Output[1].Content[0].Annotations == nil {
		t.Fatalf("output: %+v", r.Output)
	}
	u := r.Usage
	if want := w.Responses([]byte(body)).InputTokens; u.InputTokens != want {
		t.Errorf("input_tokens %d, want the weigher's %d", u.InputTokens, want)
	}
	if u.OutputTokens != 5+7 || u.OutputTokensDetails.ReasoningTokens == nil || *u.OutputTokensDetails.ReasoningTokens != 7 ||
		u.InputTokensDetails.CachedTokens == nil || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Errorf("usage %+v: want 5 visible + 7 reasoning output tokens", u)
	}
	if got := w.CountText("gpt-4o", r.Output[1].Content[0].Text); got != 5 {
		t.Errorf("text %q is %d tokens, want 5", r.Output[1].Content[0].Text, got)
	}
}

func TestResponsesStream(t *testing.T) {
	s := start(t)
	hdr := map[string]string{"x-mock-completion-tokens": "4", "x-mock-reasoning-tokens": "3"}
	const body = `{"model":"gpt-4o","input":"Name a fox.","stream":true}`
	r := post(t, s, "/v1/responses", body, hdr)
	if r.readErr != nil || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("read %v, content type %q", r.readErr, r.header.Get("Content-Type"))
	}
	evs := events(r.body)
	var types []string
	var text string
	for i, e := range evs {
		var d struct {
			Type     string          `json:"type"`
			Seq      *int            `json:"sequence_number"`
			Delta    string          `json:"delta"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(e.data), &d); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, e.data)
		}
		if d.Type != e.name || d.Seq == nil || *d.Seq != i {
			t.Fatalf("event %d: event %q, type %q, sequence_number %v", i, e.name, d.Type, d.Seq)
		}
		types = append(types, d.Type)
		if d.Type == "response.output_text.delta" {
			text += d.Delta
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.output_item.done", // reasoning
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events\n%v\nwant\n%v", types, want)
	}

	// The completed response is the JSON answer to the same request.
	var completed struct {
		Response json.RawMessage `json:"response"`
	}
	json.Unmarshal([]byte(evs[len(evs)-1].data), &completed)
	js := post(t, s, "/v1/responses", strings.Replace(body, `"stream":true`, `"stream":false`, 1), hdr)
	wantUsage, ok1 := weigher.ParseResponsesUsage(js.body)
	gotUsage, ok2 := weigher.ParseResponsesUsage(completed.Response)
	if !ok1 || !ok2 || gotUsage != wantUsage || wantUsage.OutputTokens != 7 || wantUsage.ReasoningTokens != 3 {
		t.Errorf("stream usage %+v (%v), JSON usage %+v (%v)", gotUsage, ok2, wantUsage, ok1)
	}
	if !strings.Contains(string(js.body), text) {
		t.Errorf("streamed text %q not in the JSON answer %s", text, js.body)
	}
	if su, _, _ := settle(weigher.KindResponses, evs); !su.Final || su.Usage != wantUsage {
		t.Errorf("the proxy's reader: %+v, want final %+v", su, wantUsage)
	}
}

func TestCompletions(t *testing.T) {
	s, w := start(t), testWeigher(t)
	const body = `{"model":"gpt-3.5-turbo-instruct","prompt":"Once upon a time","max_tokens":6}`
	var r struct {
		ID, Object string
		Choices    []struct {
			Text         string
			Index        int
			Logprobs     any
			FinishReason string `json:"finish_reason"`
		}
		Usage map[string]int64
	}
	jr := post(t, s, "/v1/completions", body, nil)
	decode(t, jr, &r)
	u := r.Usage
	if !strings.HasPrefix(r.ID, "cmpl-") || r.Object != "text_completion" || len(r.Choices) != 1 || r.Choices[0].FinishReason != "length" {
		t.Fatalf("shape: %s", jr.body)
	}
	if want := w.Completions([]byte(body)).InputTokens; u["prompt_tokens"] != want || u["completion_tokens"] != 6 || u["total_tokens"] != want+6 {
		t.Errorf("usage %v, want prompt %d completion 6", u, want)
	}

	sr := post(t, s, "/v1/completions", strings.TrimSuffix(body, "}")+`,"stream":true,"stream_options":{"include_usage":true}}`, nil)
	evs := events(sr.body)
	if len(evs) != 6+3 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("%d events: %s", len(evs), sr.body)
	}
	var text string
	for _, e := range evs[:6] {
		var c struct {
			Object  string
			Choices []struct{ Text string }
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil || c.Object != "text_completion" || len(c.Choices) != 1 {
			t.Fatalf("chunk %s: %v", e.data, err)
		}
		text += c.Choices[0].Text
	}
	if text != r.Choices[0].Text {
		t.Errorf("streamed %q, JSON %q", text, r.Choices[0].Text)
	}
	var last struct {
		Choices []any
		Usage   map[string]int64
	}
	json.Unmarshal([]byte(evs[len(evs)-2].data), &last)
	if last.Choices == nil || len(last.Choices) != 0 || last.Usage["completion_tokens"] != 6 || last.Usage["prompt_tokens"] != u["prompt_tokens"] {
		t.Errorf("usage chunk %s", evs[len(evs)-2].data)
	}
	want, _ := weigher.ParseCompletionsUsage(jr.body)
	if su, _, _ := settle(weigher.KindCompletions, evs); !su.Final || su.Usage != want {
		t.Errorf("the proxy's reader: %+v, want %+v", su, want)
	}
}

func TestEmbeddings(t *testing.T) {
	s, w := start(t), testWeigher(t)
	for _, tc := range []struct {
		name, body string
		items      int
	}{
		{"string", `{"model":"text-embedding-3-small","input":"hello world"}`, 1},
		{"strings", `{"model":"text-embedding-3-small","input":["a","b c","d e f"]}`, 3},
		{"token array", `{"model":"text-embedding-3-small","input":[1,2,3]}`, 1},
		{"token arrays", `{"model":"text-embedding-3-small","input":[[1,2],[3]]}`, 2},
		{"base64", `{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"base64"}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r struct {
				Object string
				Model  string
				Data   []struct {
					Object    string
					Index     int
					Embedding json.RawMessage
				}
				Usage map[string]int64
			}
			decode(t, post(t, s, "/v1/embeddings", tc.body, nil), &r)
			if r.Object != "list" || r.Model != "text-embedding-3-small" || len(r.Data) != tc.items {
				t.Fatalf("%+v", r)
			}
			for i, d := range r.Data {
				var n int
				if tc.name == "base64" {
					var b64 string
					json.Unmarshal(d.Embedding, &b64)
					raw, err := base64.StdEncoding.DecodeString(b64)
					if err != nil {
						t.Fatal(err)
					}
					n = len(raw) / 4
				} else {
					var v []float64
					if err := json.Unmarshal(d.Embedding, &v); err != nil {
						t.Fatal(err)
					}
					n = len(v)
				}
				if d.Object != "embedding" || d.Index != i || n != embeddingDims {
					t.Errorf("item %d: %s with %d floats", i, d.Object, n)
				}
			}
			want := w.Embeddings([]byte(tc.body)).InputTokens
			if r.Usage["prompt_tokens"] != want || r.Usage["total_tokens"] != want {
				t.Errorf("usage %v, want %d", r.Usage, want)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	s, w := start(t), testWeigher(t)
	const body = `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":"Name a fox, and tell me about its habitat in some detail."}]}`
	hdr := map[string]string{"x-mock-completion-tokens": "9", "x-mock-cache-read": "5", "x-mock-cache-write": "3", "x-mock-split-delta": "1"}
	type usage struct {
		Input      int64 `json:"input_tokens"`
		CacheWrite int64 `json:"cache_creation_input_tokens"`
		CacheRead  int64 `json:"cache_read_input_tokens"`
		Output     int64 `json:"output_tokens"`
	}
	var m struct {
		ID, Type, Role, Model string
		Content               []struct{ Type, Text string }
		StopReason            string  `json:"stop_reason"`
		StopSequence          *string `json:"stop_sequence"`
		Usage                 usage
	}
	jr := post(t, s, "/v1/messages", body, hdr)
	decode(t, jr, &m)
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.StopReason != "end_turn" ||
		len(m.Content) != 1 || m.Content[0].Type != "text" || jr.header.Get("request-id") == "" {
		t.Fatalf("shape: %s", jr.body)
	}
	whole := w.Messages([]byte(body)).InputTokens * 5 / 6
	if want := (usage{Input: whole - 8, CacheWrite: 3, CacheRead: 5, Output: 9}); m.Usage != want {
		t.Errorf("usage %+v, want %+v (input excludes the cache fields)", m.Usage, want)
	}
	var ct struct {
		InputTokens int64 `json:"input_tokens"`
	}
	decode(t, post(t, s, "/v1/messages/count_tokens", body, nil), &ct)
	if ct.InputTokens != whole {
		t.Errorf("count_tokens %d, want %d", ct.InputTokens, whole)
	}

	sr := post(t, s, "/v1/messages", strings.Replace(body, `"max_tokens":1024,`, `"max_tokens":1024,"stream":true,`, 1), hdr)
	evs := events(sr.body)
	var names []string
	var deltas []int64
	var text string
	for _, e := range evs {
		var d struct {
			Type    string
			Message struct{ Usage usage }
			Delta   struct {
				Type, Text string
				StopReason *string `json:"stop_reason"`
			}
			Usage *usage
		}
		if err := json.Unmarshal([]byte(e.data), &d); err != nil || d.Type != e.name {
			t.Fatalf("event %q: %s: %v", e.name, e.data, err)
		}
		names = append(names, e.name)
		switch e.name {
		case "message_start":
			if u := d.Message.Usage; u.Input != m.Usage.Input || u.CacheRead != 5 || u.CacheWrite != 3 || u.Output != 1 {
				t.Errorf("message_start usage %+v", u)
			}
		case "content_block_delta":
			text += d.Delta.Text
		case "message_delta":
			deltas = append(deltas, d.Usage.Output)
		}
	}
	want := "message_start,content_block_start,ping," + strings.Repeat("content_block_delta,", 9) +
		"content_block_stop,message_delta,message_delta,message_stop"
	if strings.Join(names, ",") != want {
		t.Fatalf("events %v", names)
	}
	if len(deltas) != 2 || deltas[0] >= deltas[1] || deltas[1] != m.Usage.Output || text != m.Content[0].Text {
		t.Errorf("message_delta outputs %v, text %q; JSON output %d, text %q", deltas, text, m.Usage.Output, m.Content[0].Text)
	}
	wantU, _ := weigher.ParseMessagesUsage(jr.body)
	if su, _, _ := settle(weigher.KindMessages, evs); !su.Final || su.Usage != wantU {
		t.Errorf("the proxy's reader: %+v, want %+v", su, wantU)
	}
}

func TestErrorShapes(t *testing.T) {
	s := start(t)
	for _, tc := range []struct{ path, status, want string }{
		{"/v1/messages", "529", `{"type":"error","error":{"type":"overloaded_error","message":"mock error 529"}}`},
		{"/v1/messages/count_tokens", "429", `{"type":"error","error":{"type":"rate_limit_error","message":"mock error 429"}}`},
		{"/v1/responses", "500", `{"error":{"message":"mock error 500","type":"server_error","param":null,"code":null}}`},
	} {
		r := post(t, s, tc.path, `{}`, map[string]string{"x-mock-status": tc.status})
		if string(r.body) != tc.want {
			t.Errorf("%s %s: %s", tc.path, tc.status, r.body)
		}
	}
	if r := post(t, s, "/v1/messages", `{`, nil); r.status != 400 || !strings.Contains(string(r.body), `"type":"invalid_request_error"`) {
		t.Errorf("bad JSON: %d %s", r.status, r.body)
	}
}

// TestStreamErrors: after=2 sends two content deltas, then the flavor's
// in-band error, which the proxy's reader recognises (a Messages error's
// message counted with the text).
func TestStreamErrors(t *testing.T) {
	s := start(t)
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			before := s.StreamsErrored.Load()
			r := post(t, s, f.path, f.stream, map[string]string{"x-mock-stream-error": "after=2", "x-mock-error-usage": "1"})
			evs := events(r.body)
			if r.readErr != nil || len(evs) == 0 {
				t.Fatalf("read %v: %s", r.readErr, r.body)
			}
			last := evs[len(evs)-1]
			var wantName, wantPrefix string
			switch f.kind {
			case weigher.KindChat, weigher.KindCompletions:
				wantPrefix = `{"error":{"message":`
			case weigher.KindResponses:
				wantName, wantPrefix = "response.failed", `{"type":"response.failed"`
			case weigher.KindMessages:
				wantName, wantPrefix = "error", anthropicStreamError
			}
			if last.name != wantName || !strings.HasPrefix(last.data, wantPrefix) || !json.Valid([]byte(last.data)) {
				t.Fatalf("last event %q %s", last.name, last.data)
			}
			su, st, text := settle(f.kind, evs)
			wantText := " The quick"
			if f.kind == weigher.KindMessages {
				// A Messages error event's message, once message_start
				// came, is counted as stream text (adv43): high, never low.
				wantText += "Overloaded"
			}
			if !st.Err() || text != wantText {
				t.Errorf("err %v, text %q, want %q", st.Err(), text, wantText)
			}
			if f.kind == weigher.KindResponses && (!su.Final || su.Usage.OutputTokens != 2) {
				t.Errorf("response.failed usage %+v", su)
			}
			if got := s.StreamsErrored.Load() - before; got != 1 {
				t.Errorf("StreamsErrored +%d", got)
			}
		})
	}
}

// TestStreamCut: the connection drops after two content deltas, with no
// terminal event, whatever the framing.
func TestStreamCut(t *testing.T) {
	s := start(t)
	for _, f := range flavors {
		for _, gz := range []bool{false, true} {
			t.Run(f.name, func(t *testing.T) {
				before := s.StreamsCut.Load()
				hdr := map[string]string{"x-mock-stream-cut": "2"}
				if gz {
					hdr["x-mock-gzip"] = "1"
				}
				r := post(t, s, f.path, f.stream, hdr)
				if !errors.Is(r.readErr, io.ErrUnexpectedEOF) {
					t.Errorf("read error %v, want unexpected EOF", r.readErr)
				}
				if r.header.Get("Content-Type") != "text/event-stream" {
					t.Errorf("header %v", r.header)
				}
				_, st, text := settle(f.kind, events(r.body))
				if st.Done() || st.Err() || text != " The quick" {
					t.Errorf("done %v, err %v, text %q", st.Done(), st.Err(), text)
				}
				if got := s.StreamsCut.Load() - before; got != 1 {
					t.Errorf("StreamsCut +%d", got)
				}
			})
		}
	}
}

// TestStreamFraming: CRLF lines and gzip change the bytes, not what the
// proxy's reader gets out of them.
func TestStreamFraming(t *testing.T) {
	s := start(t)
	for _, f := range flavors {
		var want weigher.Usage
		for i, hdr := range []map[string]string{
			{},
			{"x-mock-sse-crlf": "1"},
			{"x-mock-gzip": "1"},
			{"x-mock-sse-crlf": "1", "x-mock-gzip": "1"},
		} {
			before := s.StreamsCompleted.Load()
			r := post(t, s, f.path, f.stream, hdr)
			if r.readErr != nil {
				t.Fatalf("%s %v: %v", f.name, hdr, r.readErr)
			}
			if gz := r.header.Get("Content-Encoding") == "gzip"; gz != (hdr["x-mock-gzip"] != "") || gz == bytes.Equal(r.raw, r.body) {
				t.Errorf("%s %v: Content-Encoding %q", f.name, hdr, r.header.Get("Content-Encoding"))
			}
			if crlf := bytes.Contains(r.body, []byte("\r\n")); crlf != (hdr["x-mock-sse-crlf"] != "") {
				t.Errorf("%s %v: CRLF %v", f.name, hdr, crlf)
			}
			su, st, _ := settle(f.kind, events(r.body))
			if !su.Final || !st.Done() {
				t.Errorf("%s %v: usage %+v, done %v", f.name, hdr, su, st.Done())
			}
			if i == 0 {
				want = su.Usage
			} else if su.Usage != want {
				t.Errorf("%s %v: usage %+v, want %+v", f.name, hdr, su.Usage, want)
			}
			if got := s.StreamsCompleted.Load() - before; got != 1 {
				t.Errorf("%s %v: StreamsCompleted +%d", f.name, hdr, got)
			}
		}
	}
}

// TestStreamAborted: a client that leaves mid-stream is counted.
func TestStreamAborted(t *testing.T) {
	s := start(t)
	for _, f := range flavors {
		before := s.StreamsAborted.Load()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+f.path, strings.NewReader(f.stream))
		req.Header.Set("x-mock-delay-ms", "20")
		req.Header.Set("x-mock-completion-tokens", "200")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(resp.Body, make([]byte, 64))
		cancel()
		resp.Body.Close()
		deadline := time.Now().Add(5 * time.Second)
		for s.StreamsAborted.Load() == before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if s.StreamsAborted.Load() != before+1 {
			t.Errorf("%s: StreamsAborted did not move", f.name)
		}
	}
}

// TestJSONUsageMatchesStream: for each flavor the streamed usage is the
// JSON answer's usage for the same request.
func TestJSONUsageMatchesStream(t *testing.T) {
	s := start(t)
	for _, f := range flavors {
		hdr := map[string]string{"x-mock-completion-tokens": "5"}
		want, ok := weigher.ParseUsage(f.kind, post(t, s, f.path, f.body, hdr).body)
		su, _, text := settle(f.kind, events(post(t, s, f.path, f.stream, hdr).body))
		if !ok || !su.Final || su.Usage != want || want.OutputTokens != 5 || text != " The quick brown fox jumps" {
			t.Errorf("%s: stream %+v %q, JSON %+v", f.name, su, text, want)
		}
	}
}

// TestCloseRightAfterStartStopsListening closes servers at once after
// starting them, before their Serve goroutine may have run: each must stop
// accepting (a dial is refused), where Shutdown alone left the listener
// of a Serve that had not started yet open for ever.
func TestCloseRightAfterStartStopsListening(t *testing.T) {
	for i := range 50 {
		s, err := Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := strings.TrimPrefix(s.URL, "http://")
		if err := s.Close(); err != nil {
			t.Fatalf("server %d: close: %v", i, err)
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("server %d: %s still accepts connections after Close", i, addr)
		}
	}
}

// A path the mock does not serve is answered as OpenAI does ("Invalid URL
// (POST /chat/completions)", code unknown_url), and one without /v1 says
// that an OpenAI SDK's base URL needs it (trial3: "unknown path" alone).
func TestUnknownPathSaysWhy(t *testing.T) {
	s := start(t)
	for path, want := range map[string]string{
		"/chat/completions":   "Invalid URL (POST /chat/completions): the OpenAI API's paths start with /v1/, so an OpenAI SDK's base URL ends in /v1",
		"/v1/chat/completion": "Invalid URL (POST /v1/chat/completion)",
		"/v1/%22quoted%22/x":  `Invalid URL (POST /v1/"quoted"/x)`,
	} {
		r := post(t, s, path, `{}`, nil)
		var e struct {
			Error struct{ Message, Code string }
		}
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != 404 || e.Error.Code != "unknown_url" || !strings.HasPrefix(e.Error.Message, want) {
			t.Errorf("POST %q: %d %s (%v), want 404 unknown_url starting %q", path, r.status, r.body, err, want)
		}
		if strings.HasPrefix(path, "/v1/") && strings.Contains(e.Error.Message, "base URL") {
			t.Errorf("POST %q: %q blames the base URL of a path with /v1", path, e.Error.Message)
		}
	}
}

// A generating endpoint's path under a read method (GET, HEAD, DELETE,
// OPTIONS) is a stored-object call the mock cannot serve: its 404 in the
// path's flavor, as for every stored object's path, not a JSON parse error
// of the empty body (trial21: the OpenAI SDK's chat.completions.list()).
func TestReadMethodOnGeneratingPathIs404(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		method, path, want string
	}{
		{method: "GET", path: "/v1/chat/completions", want: `"code":"unknown_url"`},
		{method: "GET", path: "/v1/embeddings", want: "Invalid URL (GET /v1/embeddings)"},
		{method: "DELETE", path: "/v1/responses", want: `"code":"unknown_url"`},
		{method: "GET", path: "/v1/messages", want: `"type":"not_found_error"`},
		{method: "GET", path: "/openai/deployments/d/chat/completions?api-version=2024-10-21", want: `"code":"404"`},
	} {
		req, err := http.NewRequest(tc.method, s.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s %s: %d %s, want 404 with %s", tc.method, tc.path, resp.StatusCode, b, tc.want)
		}
	}
	if r := post(t, s, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, nil); r.status != http.StatusOK {
		t.Errorf("POST /v1/chat/completions: %d %s, want 200", r.status, r.body)
	}
}

// TestLiteLLMCostHeader: x-mock-litellm-cost comes back as LiteLLM's
// x-litellm-response-cost on a JSON answer and a stream (trial23: trying
// llmguard's charge of it needed an upstream of one's own); without it the
// answer has no such header.
func TestLiteLLMCostHeader(t *testing.T) {
	s := start(t)
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":3`
	for _, tc := range []struct {
		name, body, cost, want string
	}{
		{"json", chat + `}`, "0.05", "0.05"},
		{"stream", chat + `,"stream":true}`, "1.5e-3", "1.5e-3"},
		{"none", chat + `}`, "", ""},
	} {
		hdr := map[string]string{}
		if tc.cost != "" {
			hdr["x-mock-litellm-cost"] = tc.cost
		}
		r := post(t, s, "/v1/chat/completions", tc.body, hdr)
		if r.status != 200 || r.readErr != nil {
			t.Fatalf("%s: status %d, read %v: %s", tc.name, r.status, r.readErr, r.body)
		}
		if got := r.header.Get("x-litellm-response-cost"); got != tc.want {
			t.Errorf("%s: x-litellm-response-cost %q, want %q", tc.name, got, tc.want)
		}
	}
}
