package weigher

import "testing"

func TestCompletionsBodyShapes(t *testing.T) {
	w := testWeigher(t)
	enc := w.encoder("gpt-3.5-turbo-instruct")
	hello := countText(enc, "Say this is a test")
	for _, tc := range []struct {
		name, fields string
		in, out      int64
	}{
		// OpenAI and vLLM read an absent max_tokens as 16, but llama.cpp
		// and Ollama generate until the context ends; OpenAI reads null
		// as 16, but vLLM reads it as "until the context ends", and
		// llama.cpp and Ollama read -1 so: an absent maximum, or a named
		// one that is no positive count, reserves the model's output
		// reservation (1000 here), never 16.
		{"absent max_tokens: the output reservation", `"prompt":"Say this is a test"`, hello, 1000},
		{"null max_tokens: the output reservation", `"prompt":"Say this is a test","max_tokens":null`, hello, 1000},
		{"max_tokens -1: the output reservation", `"prompt":"Say this is a test","max_tokens":-1`, hello, 1000},
		{"max_tokens \"-1\": the output reservation", `"prompt":"Say this is a test","max_tokens":"-1"`, hello, 1000},
		{"max_tokens 0: the output reservation", `"prompt":"Say this is a test","max_tokens":0`, hello, 1000},
		{"max_tokens", `"prompt":"Say this is a test","max_tokens":7`, hello, 7},
		{"array of strings: per prompt", `"prompt":["Say this is a test","Say this is a test"],"max_tokens":7`, 2 * hello, 14},
		{"token array is one prompt", `"prompt":[1212,318,257,1332],"max_tokens":7`, 4, 7},
		{"array of token arrays", `"prompt":[[1212,318],[257,1332,13]],"max_tokens":7`, 5, 14},
		{"n", `"prompt":"Say this is a test","max_tokens":10,"n":3`, hello, 30},
		{"best_of above n", `"prompt":"Say this is a test","max_tokens":10,"n":2,"best_of":5`, hello, 50},
		{"n times prompts", `"prompt":["a","b","c"],"max_tokens":10,"n":2`, 3, 60},
		{"echo adds the prompt per choice", `"prompt":"Say this is a test","max_tokens":10,"n":2,"echo":true`, hello, 20 + 2*hello},
		{"suffix per prompt", `"prompt":["a","b"],"suffix":"Say this is a test","max_tokens":1`, 2 + 2*hello, 2},
		{"absent prompt: <|endoftext|>", `"max_tokens":1`, 1, 1},
		{"empty prompt array", `"prompt":[],"max_tokens":3`, 0, 3},
		{"huge figures saturate", `"prompt":"x","max_tokens":1e300,"n":1e300,"best_of":1e300`, 1, maxTokens},
	} {
		e := w.Completions([]byte(`{"model":"gpt-3.5-turbo-instruct",` + tc.fields + `}`))
		if !e.Parsed || e.InputTokens != tc.in || e.OutputTokens != tc.out {
			t.Errorf("%s: Completions = %+v, want in %d out %d", tc.name, e, tc.in, tc.out)
		}
	}
	e := w.Completions([]byte(`{"model":"x","prompt":"hi","stream":true,"stream_options":{"include_usage":true}}`))
	if !e.Stream || !e.IncludeUsage {
		t.Errorf("stream flags: %+v", e)
	}
	if e := w.Completions([]byte("prompt=hi")); e.Parsed || e.InputTokens != 5 {
		t.Errorf("garbage: %+v", e)
	}
}

func TestEmbeddingsBodyShapes(t *testing.T) {
	w := testWeigher(t)
	enc := w.encoder("text-embedding-3-small")
	fox := countText(enc, "The food was delicious and the waiter...")
	for _, tc := range []struct {
		name, input string
		want        int64
	}{
		{"string", `"The food was delicious and the waiter..."`, fox},
		{"array of strings", `["The food was delicious and the waiter...","The food was delicious and the waiter..."]`, 2 * fox},
		{"token array", `[464,3691,373,12625]`, 4},
		{"array of token arrays", `[[464,3691],[373,12625,13]]`, 5},
		{"absent", `null`, 0},
	} {
		e := w.Embeddings([]byte(`{"model":"text-embedding-3-small","encoding_format":"float","input":` + tc.input + `}`))
		if !e.Parsed || e.InputTokens != tc.want || e.OutputTokens != 0 || e.Model != "text-embedding-3-small" {
			t.Errorf("%s: Embeddings = %+v, want in %d", tc.name, e, tc.want)
		}
	}
	if e := w.Embeddings([]byte("{{")); e.Parsed || e.InputTokens != 1 || e.OutputTokens != 0 {
		t.Errorf("garbage: %+v", e)
	}
}

func TestKindOfAndWeigh(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		method, path string
		want         Kind
	}{
		{"POST", "/v1/chat/completions", KindChat},
		{"POST", "/v1/responses", KindResponses},
		{"POST", "/v1/responses/", KindResponses},
		{"POST", "/v1/completions?x=1", KindCompletions},
		{"POST", "/v1/embeddings", KindEmbeddings},
		{"POST", "/v1/messages", KindMessages},
		{"POST", "/v1/messages/count_tokens", KindCountTokens},
		{"POST", "/v1/messages/batches", KindOther},
		{"GET", "/v1/responses/resp_1", KindOther},
		{"GET", "/v1/chat/completions", KindOther},
		{"POST", "/v1/models", KindOther},
	} {
		if got := KindOf(tc.method, tc.path); got != tc.want {
			t.Errorf("KindOf(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"input":"hi","prompt":"hi","max_tokens":5}`)
	for k, want := range map[Kind]Estimate{
		KindChat:        w.Chat(body),
		KindResponses:   w.hidden(w.Responses(body)), // "prompt": a stored template, hidden context
		KindCompletions: w.Completions(body),
		KindEmbeddings:  w.Embeddings(body),
		KindMessages:    w.Messages(body),
		KindCountTokens: {Parsed: true},
		KindOther:       {Parsed: true},
	} {
		if got := w.Weigh(k, body); got != want {
			t.Errorf("Weigh(%v) = %+v, want %+v", k, got, want)
		}
	}
	if Kind(200).String() != "other" || KindCountTokens.String() != "count_tokens" {
		t.Error("Kind.String")
	}
}

// A legacy completions body with no max_tokens reserves the model's output
// reservation, since llama.cpp and Ollama generate to the context's end
// where OpenAI stops at 16: an operator whose upstream defaults to 16
// configures the model so and reserves exactly that. The reservation is
// defaulted (a learned one may replace it) unless echo adds the prompt to
// it.
func TestCompletionsAbsentMaxIsTheModelsReservation(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"gpt-3.5-turbo-instruct": {DefaultMaxOutputTokens: 16},
		"tiny-default":           {DefaultMaxOutputTokens: 4},
	}, DefaultMaxOutputTokens: 3000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body string
		out        int64
		defaulted  bool
	}{
		{"unconfigured model: the default reservation", `{"model":"llama3.1","prompt":"hi"}`, 3000, true},
		{"configured 16", `{"model":"gpt-3.5-turbo-instruct","prompt":"hi"}`, 16, true},
		{"configured below 16: OpenAI's 16", `{"model":"tiny-default","prompt":"hi"}`, 16, true},
		{"n 2", `{"model":"llama3.1","prompt":"hi","n":2}`, 6000, true},
		{"echo: not the default times n", `{"model":"llama3.1","prompt":"hi","echo":true}`, 3001, false},
		{"named: not defaulted", `{"model":"llama3.1","prompt":"hi","max_tokens":5}`, 5, false},
	} {
		e := w.Completions([]byte(tc.body))
		if e.OutputTokens != tc.out || e.OutputDefaulted != tc.defaulted {
			t.Errorf("%s: OutputTokens %d, defaulted %v; want %d, %v", tc.name, e.OutputTokens, e.OutputDefaulted, tc.out, tc.defaulted)
		}
	}
}
