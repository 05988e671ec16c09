package app

// Adversarial tests of adv30 (2026-12-06): the upstream side. Each drives
// llmguard through loopback sockets to a raw upstream that writes its
// answer byte for byte and then closes the connection.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/llmguard/llmguard/spec"
)

// words30 is 4,000 words drawn from a small vocabulary with a fixed seed:
// text that compresses, but not to nothing, so a coded answer cut at a
// fraction of its bytes decodes to a like fraction of its text.
var words30 = func() string {
	vocab := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu river stone cloud paper window garden silver copper orange purple")
	r := rand.New(rand.NewPCG(30, 30))
	var b strings.Builder
	for i := range 4000 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[r.IntN(len(vocab))])
	}
	return b.String()
}()

// TestAdv30CodedCutAnswerChargesItsText: adv29 charged a non-streamed
// answer cut short the text it sent, but only when the answer was not
// compressed. An answer in gzip, deflate, br or zstd whose upstream
// stopped part way through its coded bytes (close-delimited, a
// Content-Length longer than what came, a chunked body without its last
// chunk) could not be decoded whole, and its decoded prefix was dropped:
// a chat answer of 4,000 words cut at two thirds of its bytes (some 2,700
// words sent) was charged the 256-token default reservation. Its decoded
// prefix is now read as an uncoded cut answer's body is. (A zstd block
// decodes whole or not at all: an answer cut inside its only block, up to
// 128 KiB of text, decodes to nothing and keeps its reservation; this
// zstd answer is written in blocks of 8 KiB, as a coder with a small
// window writes it.)
func TestAdv30CodedCutAnswerChargesItsText(t *testing.T) {
	whole := []byte(`{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		words30 + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4000,"total_tokens":4009}}`)
	const ct = "Content-Type: application/json\r\n"
	for _, coding := range []struct {
		name string
		code func(testing.TB, []byte) []byte
	}{{"gzip", gzipped}, {"deflate", deflated}, {"br", brotlied}, {"zstd", zstdBlocks30}} {
		coded := coding.code(t, whole)
		cut := string(coded[:len(coded)*2/3])
		enc := "Content-Encoding: " + coding.name + "\r\n"
		for _, tc := range []struct {
			name   string
			raw    string
			status int
		}{
			{"HTTP/1.0 close-delimited", "HTTP/1.0 200 OK\r\n" + ct + enc + "\r\n" + cut, 200},
			{"Content-Length longer than the body", fmt.Sprintf("HTTP/1.1 200 OK\r\n%s%sContent-Length: %d\r\n\r\n%s", ct, enc, len(coded), cut), 502},
			{"chunked without its last chunk", fmt.Sprintf("HTTP/1.1 200 OK\r\n%s%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", ct, enc, len(cut), cut), 502},
		} {
			t.Run(coding.name+"/"+tc.name, func(t *testing.T) {
				h := fresh16(t, rawStreamUpstream(t, map[string]string{"": tc.raw}))
				resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"talk"}]}`)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d (%.200s), want %d", resp.StatusCode, b, tc.status)
				}
				// Two thirds of the coded bytes hold well over a third of
				// the text (a coder's output runs behind its input), and
				// never more than the whole answer.
				got := outputSettled(t, h)
				if got < 1300 || got > 4200 {
					t.Errorf("charged %v output tokens, want 1,300 to 4,200 (the text that came)", got)
				}
				t.Logf("charged %v output tokens", got)
			})
		}
	}
}

// TestAdv30CutAnswerUsageInputCounts: a cut answer whose usage came before
// the cut (a server that writes it first) had its output read from that
// usage (adv29), but its input stayed the request's estimate whatever the
// usage said: a usage reporting 50,000 prompt tokens (a gateway's system
// prompt, a context the body named only by id) for a 9-token estimate was
// charged 9. It is charged the usage's input, the output reservation (256)
// kept beside the few words that came, relayed or lost alike.
func TestAdv30CutAnswerUsageInputCounts(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","model":"x","usage":{"prompt_tokens":50000,"completion_tokens":5,"total_tokens":50005},` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"a few words and then the connection`
	const ct = "Content-Type: application/json\r\n"
	for _, tc := range []struct {
		name   string
		raw    string
		status int
	}{
		{"HTTP/1.0 close-delimited", "HTTP/1.0 200 OK\r\n" + ct + "\r\n" + body, 200},
		{"Content-Length longer than the body", fmt.Sprintf("HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s", ct, len(body)+40, body), 502},
		{"gzip, HTTP/1.0 close-delimited", "HTTP/1.0 200 OK\r\n" + ct + "Content-Encoding: gzip\r\n\r\n" + string(gzipped(t, []byte(body))), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, rawStreamUpstream(t, map[string]string{"": tc.raw}))
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"talk"}]}`)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%.200s), want %d", resp.StatusCode, b, tc.status)
			}
			if out := outputSettled(t, h); out != 256 {
				t.Errorf("charged %v output tokens, want the reservation, 256", out)
			}
			if in := h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"}); in != 50000 {
				t.Errorf("charged %v input tokens, want the usage's 50,000", in)
			}
		})
	}
}

// zstdBlocks30 is b in one zstd frame of blocks of at most 8 KiB (the
// block size is bounded by the window: RFC 8878 §3.1.1.2.4).
func zstdBlocks30(t testing.TB, b []byte) []byte {
	w, err := zstd.NewWriter(nil, zstd.WithWindowSize(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	return w.EncodeAll(b, nil)
}

// A Responses answer cut short after naming the tier it was served at
// (priority, for a request that asked for none) is charged that tier's
// prices, as a whole answer is (tier30): the cut path read the text but
// dropped the tier, settling at the standard price.
func TestCutAnswerChargedAtTheServedTier(t *testing.T) {
	body := `{"id":"resp_x","object":"response","model":"gpt-5","service_tier":"priority","output":[{"type":"message","content":[{"type":"output_text","text":"` +
		strings.Repeat("word ", 3000)
	h := fresh16(t, rawStreamUpstream(t, map[string]string{"": "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body}))
	resp, b := h.do("/v1/responses", `{"model":"gpt-5","input":"talk"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d (%.200s)", resp.StatusCode, b)
	}
	chargedAtPriority(t, h, 3000)
}

// A whole answer without a usage, its text counted instead, is charged
// at the tier it names as served (priority for a request that asked for
// none), as an answer with a usage is (tier30's readers): it was settled
// at the standard price.
func TestAnswerWithoutUsageChargedAtTheServedTier(t *testing.T) {
	body := `{"id":"chatcmpl-x","object":"chat.completion","model":"gpt-5","service_tier":"priority","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("word ", 3000) + `"},"finish_reason":"stop"}]}`
	h := fresh16(t, rawStreamUpstream(t, map[string]string{"": fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)}))
	resp, b := h.do("/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"talk"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d (%.200s)", resp.StatusCode, b)
	}
	chargedAtPriority(t, h, 3000)
}

// A stream that relayed output llmguard could not read before an in-band
// error is charged its reservation, not refunded; its chunks named the
// tier it was served at (priority, asked for none), and the reservation is
// priced at it (tier30: this path dropped the tier).
func TestUnreadStreamErrorChargedAtTheServedTier(t *testing.T) {
	sse := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-5\",\"service_tier\":\"priority\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n" +
		"data: {not json at all\n\n" +
		"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n"
	h := fresh16(t, rawStreamUpstream(t, map[string]string{"": fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(sse), sse)}))
	resp, b := h.do("/v1/chat/completions", `{"model":"gpt-5","stream":true,"max_completion_tokens":1000,"messages":[{"role":"user","content":"talk"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d (%.200s)", resp.StatusCode, b)
	}
	chargedAtPriority(t, h, 1000)
}

// chargedAtPriority checks that h's one gpt-5 request, settled with at
// least minOut output tokens, was charged priority's price of the tokens
// it settled (llmguard_spend_usd_total against the price table), where
// priority costs more than the standard tier.
func chargedAtPriority(t *testing.T, h *harness, minOut float64) {
	t.Helper()
	out := outputSettled(t, h)
	in := h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"})
	u := spec.Usage{InputTokens: int64(in), OutputTokens: int64(out)}
	pol := h.app.policy()
	want, std := pol.Quote("gpt-5", "priority").Price.MicroUSD(u), pol.Quote("gpt-5", "default").Price.MicroUSD(u)
	if out < minOut || want <= std {
		t.Fatalf("%v output tokens; priority %d µUSD, standard %d: want at least %v and a dearer priority", out, want, std, minOut)
	}
	spent := h.scrape()["llmguard_spend_usd_total"].sum(nil)
	if got := int64(spent*1e6 + 0.5); got != want {
		t.Errorf("charged %d µUSD for %v input and %v output tokens, want priority's %d (standard: %d)", got, in, out, want, std)
	}
}
