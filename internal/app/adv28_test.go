package app

// Adversarial tests of adv28 (2026-12-06): hidden context on the
// Messages API that the body carries but llmguard weighed as nothing.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// thinkingKeeper is an Anthropic upstream serving a model that keeps the
// thinking blocks of every earlier assistant turn in its context (Claude
// Opus 4.5 and later, Sonnet 4.6 and later: the extended-thinking guide):
// it bills one input token a word of the messages' text and thinking,
// and a block whose display was "omitted" (empty text) one token per 4
// bytes of its signature, which carries the thinking encrypted. It
// reports what it billed, so the tokens it billed are what llmguard must
// have reserved.
type thinkingKeeper struct{ billed atomic.Int64 }

func (u *thinkingKeeper) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return // the probe's GET
	}
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	json.Unmarshal(raw, &body)
	var in int64
	for _, m := range body.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			in += int64(len(strings.Fields(text)))
			continue
		}
		var blocks []struct{ Type, Text, Thinking, Signature string }
		json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			switch {
			case b.Type == "thinking" && b.Thinking == "":
				in += int64(len(b.Signature) / 4)
			default:
				in += int64(len(strings.Fields(b.Text + " " + b.Thinking)))
			}
		}
	}
	u.billed.Add(in + 10)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-7","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":10}}`, in)
}

// TestAdv28EarlierThinkingIsReserved: a conversation with Claude Opus 4.7
// hands back each earlier turn's thinking block, as the API asks; the
// model keeps them all in its context and bills them as input. llmguard
// weighed an earlier turn's thinking as nothing (and a signature, where
// Opus 4.7's default "omitted" display puts the thinking, as nothing in
// any turn): three turns of 3,000 thinking tokens each were reserved some
// 40 tokens, and a 20,000-token bucket let three such calls through,
// billed 27,000+. Now each call reserves its thinking and the bucket
// admits two, billed within it.
func TestAdv28EarlierThinkingIsReserved(t *testing.T) {
	up := &thinkingKeeper{}
	srv := httptest.NewServer(http.HandlerFunc(up.serve))
	t.Cleanup(srv.Close)
	visible := func(i int) string {
		return fmt.Sprintf(`{"type":"thinking","thinking":%q,"signature":"c2ln"}`, strings.Repeat("prime ", 3000))
	}
	omitted := func(i int) string {
		return fmt.Sprintf(`{"type":"thinking","thinking":"","signature":%q}`, strings.Repeat("QUJD", 3000))
	}
	for _, tc := range []struct {
		name  string
		block func(int) string
	}{
		{"summarized", visible},
		{"omitted", omitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs strings.Builder
			for i := range 3 {
				fmt.Fprintf(&msgs, `{"role":"user","content":"Question %d?"},{"role":"assistant","content":[%s,{"type":"text","text":"Answer."}]},`, i, tc.block(i))
			}
			body := `{"model":"claude-opus-4-7","max_tokens":100,"thinking":{"type":"adaptive"},"messages":[` + msgs.String() + `{"role":"user","content":"And the last?"}]}`
			h := frozenClaude(t, srv.URL, "user-tpd", 20000)
			before := up.billed.Load()
			passed := 0
			for range 4 {
				resp, b := h.do("/v1/messages", body)
				switch resp.StatusCode {
				case http.StatusOK:
					passed++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("%d %.300s", resp.StatusCode, b)
				}
			}
			if billed := up.billed.Load() - before; billed > 20000 {
				t.Errorf("the upstream billed %d tokens through a 20,000-token bucket (%d of 4 calls passed)", billed, passed)
			}
			if passed == 0 {
				t.Errorf("no call passed: each bills some 9,000 tokens")
			}
		})
	}
}
