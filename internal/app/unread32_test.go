package app

// Tests of unread32 (2026-12-06): an uncompressed non-streamed answer that
// finds no room in max_inflight_response_bytes is relayed unread; a caller
// who fills that memory on purpose (large answers read slowly) must not
// get its other answers charged the output reservation alone.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// heldUpstream32 answers x-case "hold" with a 200 whose Content-Length
// promises 1 MiB, sends 60 KiB of it and then nothing until the test ends
// (an answer llmguard holds the first bytes of while it waits for the
// rest, as it would one whose client reads slowly); any other x-case gets
// answers[x-case] written whole, then the connection closed.
func heldUpstream32(t *testing.T, answers map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute)) // a stuck test fails, it does not hang
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if req.Header.Get("x-case") != "hold" {
					io.WriteString(c, answers[req.Header.Get("x-case")])
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 1<<20)
				c.Write([]byte(`{"id":"x","choices":[{"message":{"content":"` + strings.Repeat("a", 60<<10)))
				<-stop
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestUnread32AnswerWithoutRoomChargesItsText: with the answers held
// filling max_inflight_response_bytes (here its least, 64 KiB, held by an
// answer whose rest has not come and whose client reads nothing), a chat
// request with no max output whose upstream answers 3,000 words of JSON
// was relayed unread and charged the 256-token default reservation,
// whatever its usage (4,000 output tokens) or its text (3,898 tokens). It
// is now read as it passes: its top-level usage, when it has one; its
// text's tokens otherwise, escaped CJK text ("\u4e2d" is six ASCII bytes
// for one character) counted as the text it decodes to (counted raw, 3,000
// characters of 5,738 tokens were charged 10,755).
func TestUnread32AnswerWithoutRoomChargesItsText(t *testing.T) {
	words := strings.Join(strings.Fields(words30)[:3000], " ")
	var cjk, cjkEscaped strings.Builder
	for i := range 3000 {
		r := rune(0x4e00 + (i*7919)%20000)
		cjk.WriteRune(r)
		fmt.Fprintf(&cjkEscaped, `\u%04x`, r)
	}
	answer := func(text, usage string) string {
		body := `{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			text + `"},"finish_reason":"stop"}]` + usage + `}`
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	const usage4000 = `,"usage":{"prompt_tokens":9,"completion_tokens":4000,"total_tokens":4009}`
	for _, tc := range []struct {
		name  string
		raw   string // as the JSON string holds it
		text  string // as it decodes; "": the charge is want
		usage string
		want  float64
	}{
		// The usage, read as it passes: 4,000 (reasoning the text does
		// not show beside its 3,898 tokens of text).
		{name: "3,000 words, usage last", raw: words, usage: usage4000, want: 4000},
		// No usage: the text's tokens, and no more than its answer's
		// framing (ids, keys) adds.
		{name: "3,000 words, no usage", raw: words, text: words},
		{name: "3,000 escaped CJK characters, no usage", raw: cjkEscaped.String(), text: cjk.String()},
		// A usage too small for the answer's bytes (5 output tokens
		// beside 20 KB of text): the text counted, as for a held answer
		// (unread37; it was the output reservation, 256).
		{name: "3,000 words, usage of 5 output tokens", raw: words, text: words, usage: `,"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := heldUpstream32(t, map[string]string{"big": answer(tc.raw, tc.usage)})
			// The holding answer asks for another model, so that the tokens
			// of the answer under test are told apart by their label.
			cfg, err := config.Parse([]byte(baseConfig(t, url, `  gpt-4o: {encoding: o200k_base, default_max_output_tokens: 256}
limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
max_inflight_response_bytes: 65536
`)))
			if err != nil {
				t.Fatal(err)
			}
			_, w, err := compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			least, most := tc.want, tc.want
			if tc.text != "" {
				least = float64(w.CountText("gpt-4o-mini", tc.text))
				most = least + 100
			}
			h := frozenHarness(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { // the answer that holds the memory: never ends before the test
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions",
					strings.NewReader(`{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hold"}]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("x-case", "hold")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					<-ctx.Done() // a reader that stops reading until told: closing now would cut the answer
					resp.Body.Close()
				}
			}()
			held := func() float64 { return h.scrape()["llmguard_response_body_bytes_in_flight"].sum(nil) }
			if !waitFor(30*time.Second, func() bool { return held() >= 32<<10 }) {
				t.Fatalf("the first answer holds %v bytes, want 32 KiB or more", held())
			}
			unread := func() float64 {
				return h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "budget"})
			}
			before := unread()
			t.Logf("held %v bytes, %v unread before", held(), before)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"talk"}]}`, "x-case", "big")
			if resp.StatusCode != 200 || !strings.HasSuffix(b, tc.usage+"}") {
				t.Fatalf("status %d, body %.200s…, want 200 and the whole answer", resp.StatusCode, b)
			}
			if n := unread() - before; n != 1 {
				t.Fatalf("%v answers relayed unread for want of room, want 1", n)
			}
			out := func() float64 {
				return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output", "model": "gpt-4o-mini"})
			}
			if !waitFor(30*time.Second, func() bool { return out() > 0 }) {
				t.Fatal("not settled")
			}
			got := out()
			t.Logf("charged %v output tokens", got)
			if got < least || got > most {
				t.Errorf("charged %v output tokens, want %v to %v", got, least, most)
			}
		})
	}
}
