package proxy

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	brotli "github.com/molecule-man/go-brrr"
)

// decodeAs is what a client makes of body sent with Content-Encoding enc
// ("" or identity: body itself; gzip; br; deflate as raw deflate data;
// zstd with any window; any other
// coding an error): the bytes it decodes to, or the error decoding gave.
func decodeAs(enc string, body []byte) ([]byte, error) {
	switch enc {
	case "", "identity":
		return body, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	case "br":
		return io.ReadAll(brotli.NewReader(bytes.NewReader(body)))
	case "deflate": // raw: the tests send no zlib header
		return io.ReadAll(flate.NewReader(bytes.NewReader(body)))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderMaxWindow(1<<30), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return io.ReadAll(zr)
	}
	return nil, io.ErrUnexpectedEOF
}

// TestUndecodedAnswerKeepsItsCoding: through real sockets, a compressed
// upstream answer llmguard relays undecoded — its coding's header broken
// (or a zstd one opening with a skippable frame, which clients read but
// llmguard's window check does not), bytes named br that are not Brotli
// (it has no magic number: its first output is read before the coding is
// dropped), no room in
// max_inflight_response_bytes, a zstd window over 8 MiB — reaches the
// client with the Content-Encoding it was sent with, streamed or not, so
// that the client decodes it to what the upstream sent (or fails to, as
// it would on the upstream's own bytes); it keeps its reservation and is
// counted in responses_unread_total{reason}. A stream llmguard decodes
// reaches the client decoded, without the header; a non-streamed answer
// always as sent. Before, a stream llmguard could not decode lost its
// Content-Encoding (dropped before its decoder was made): its client got
// compressed bytes named as plain text.
func TestUndecodedAnswerKeepsItsCoding(t *testing.T) {
	w := testWeigher(t)
	reserved := w.Chat([]byte(budgetBody)).InputTokens + 50
	answer := jsonAnswer(900) // 1 + 1 tokens
	events := []byte(`data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}` + "\n\ndata: [DONE]\n\n")
	skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 'l', 'l', 'm', 'g'}         // RFC 8878 §3.1.2
	brokenGzip := func(b []byte) []byte { return append([]byte("\x1f\x8b\x09"), b...) } // method 9: not deflate
	asIs := func(b []byte) []byte { return b }                                          // named br: not Brotli
	zstdOf := func(exp byte) func([]byte) []byte {
		return func(b []byte) []byte { return zstdFrame(exp, b, 0, 0, true) }
	}
	for _, tc := range []struct {
		name   string
		stream bool
		enc    string
		code   func(plain []byte) []byte
		budget int64 // max_inflight_response_bytes; zero: the default
		// reason is the unread reason counted; "": the usage is read.
		reason string
	}{
		{name: "stream, gzip decoded", stream: true, enc: "gzip", code: gzipped},
		{name: "stream, zstd decoded", stream: true, enc: "zstd", code: zstdOf(12), budget: 16 << 20},
		{name: "stream, gzip header broken", stream: true, enc: "gzip", code: brokenGzip, reason: unreadUndecodable},
		{name: "stream, zstd after a skippable frame", stream: true, enc: "zstd",
			code: func(b []byte) []byte { return append(append([]byte{}, skippable...), zstdFrame(12, b, 0, 0, true)...) }, reason: unreadUndecodable},
		{name: "stream, br", stream: true, enc: "br", code: asIs, reason: unreadUndecodable},
		// Decoded since adv26: Brotli, and deflate without its zlib wrapper.
		{name: "stream, br decoded", stream: true, enc: "br", code: brotlied},
		{name: "stream, raw deflate decoded", stream: true, enc: "deflate", code: rawDeflated},
		{name: "answer, br read", enc: "br", code: brotlied},
		{name: "answer, raw deflate read", enc: "deflate", code: rawDeflated},
		{name: "stream, zstd window without room", stream: true, enc: "zstd", code: zstdOf(12), budget: 2 << 20, reason: unreadDecodeBudget},
		{name: "stream, zstd window 16 MiB", stream: true, enc: "zstd", code: zstdOf(14), reason: unreadWindow},
		{name: "stream, zstd window 64 MiB", stream: true, enc: "zstd", code: zstdOf(16), reason: unreadWindow},
		{name: "answer, gzip read", enc: "gzip", code: gzipped},
		{name: "answer, gzip header broken", enc: "gzip", code: brokenGzip, reason: unreadUndecodable},
		{name: "answer, zstd after a skippable frame", enc: "zstd",
			code: func(b []byte) []byte { return append(append([]byte{}, skippable...), zstdFrame(12, b, 0, 0, true)...) }, reason: unreadUndecodable},
		{name: "answer, br", enc: "br", code: asIs, reason: unreadUndecodable},
		{name: "answer, no room to hold it", enc: "gzip", code: gzipped, budget: 8 << 10, reason: unreadBudget},
		{name: "answer, zstd window without room", enc: "zstd", code: zstdOf(12), budget: 2 << 20, reason: unreadDecodeBudget},
		{name: "answer, zstd window 16 MiB", enc: "zstd", code: zstdOf(14), reason: unreadWindow},
		{name: "answer, zstd window 64 MiB", enc: "zstd", code: zstdOf(16), reason: unreadWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, body, plain := "application/json", budgetBody, answer
			if tc.stream {
				ct, plain = "text/event-stream", events
				body = strings.Replace(budgetBody, `"max_tokens":50`, `"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}`, 1)
			}
			sent := tc.code(plain)
			url := byteUpstream(t, func(c net.Conn, _ int) bool {
				c.Write(append([]byte("HTTP/1.1 200 OK\r\ncontent-type: "+ct+"\r\ncontent-encoding: "+tc.enc+
					"\r\ncontent-length: "+itoa(len(sent))+"\r\n\r\n"), sent...))
				return true
			})
			r := newRig(t, rigOptions{url: url, w: w, answerBudget: tc.budget})
			before := r.remaining()
			req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer sk-panic")
			resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, err %v", resp.StatusCode, err)
			}
			enc := resp.Header.Get("Content-Encoding")
			// What the client decodes is what the upstream's answer meant.
			meant, merr := decodeAs(tc.enc, sent)
			read, rerr := decodeAs(enc, got)
			if (merr == nil) != (rerr == nil) || !bytes.Equal(read, meant) {
				t.Errorf("the client decodes the %d bytes it got by their content-encoding %q to %d bytes (err %v); the upstream's %d bytes in %q mean %d bytes (err %v)",
					len(got), enc, len(read), rerr, len(sent), tc.enc, len(meant), merr)
			}
			// Relayed undecoded: the bytes and the coding as sent; decoded
			// (a stream whose usage is read): the plain bytes, no coding.
			wantBody, wantEnc := sent, tc.enc
			if tc.stream && tc.reason == "" {
				wantBody, wantEnc = plain, ""
			}
			if !bytes.Equal(got, wantBody) || enc != wantEnc {
				t.Errorf("client got %d bytes with content-encoding %q, want %d with %q", len(got), enc, len(wantBody), wantEnc)
			}
			if cl := resp.Header.Get("Content-Length"); cl != "" && cl != itoa(len(got)) {
				t.Errorf("content-length %s for %d bytes", cl, len(got))
			}
			r.waitLedger(1)
			charged := before - r.remaining()
			if tc.reason == "" && charged != 2 {
				t.Errorf("charged %d, want the 2 tokens reported", charged)
			}
			if tc.reason != "" && charged < reserved {
				t.Errorf("charged %d, want at least the reservation %d", charged, reserved)
			}
			for _, reason := range []string{unreadBudget, unreadTooLarge, unreadDecodeBudget, unreadWindow, unreadUndecodable} {
				want := 0.0
				if reason == tc.reason {
					want = 1
				}
				if n := r.metric("llmguard_responses_unread_total", reason); n != want {
					t.Errorf("responses_unread_total{%s} %v, want %v", reason, n, want)
				}
			}
			r.released(tc.name)
		})
	}
}

// FuzzTapView: any answer bytes, named with any coding: tapView never
// panics; it gives a decoded view (at most limit bytes) when it gives no
// unread reason, a reason from the fixed set otherwise, with no view but
// for undecodable (the decoded prefix of data that breaks off: at most
// limit bytes too), the bytes as sent when they name no coding; and
// nothing is held of the budget once the view is released.
func FuzzTapView(f *testing.F) {
	f.Add("gzip", gzipped(jsonAnswer(100)))
	f.Add("gzip", []byte("\x1f\x8b\x09"))
	f.Add("x-gzip", gzipped(nil))
	f.Add("deflate", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	f.Add("zstd", zstdFrame(10, []byte("x"), 1, 'y', true))
	f.Add("zstd", zstdFrame(12, nil, 0, 0, true)) // a 4 MiB window: no room
	f.Add("zstd", zstdFrame(16, nil, 0, 0, true))
	f.Add("ZSTD ", append([]byte{0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0}, zstdFrame(10, nil, 0, 0, true)...))
	f.Add("br", []byte("x"))
	f.Add("br", brotlied(jsonAnswer(100)))
	f.Add("deflate", rawDeflated(jsonAnswer(100)))
	f.Add("identity", []byte("plain"))
	f.Fuzz(func(t *testing.T, enc string, body []byte) {
		const limit = 64 << 10
		p := budgetOnly(2 << 20)
		view := heldAnswer{p: p}
		got, why := tapView([]byte(enc), body, limit, &view)
		switch why {
		case "":
			if uncoded([]byte(enc)) {
				if !bytes.Equal(got, body) {
					t.Fatalf("%q: a view of %d bytes, not the %d sent", enc, len(got), len(body))
				}
			} else if got == nil || len(got) > limit {
				t.Fatalf("%q: no reason, a view of %d bytes (nil %v)", enc, len(got), got == nil)
			}
		case unreadUndecodable:
			if len(got) > limit || got != nil && len(got) == 0 {
				t.Fatalf("%q: %s with a view of %d bytes (nil %v)", enc, why, len(got), got == nil)
			}
		case unreadDecodeBudget, unreadWindow:
			if got != nil {
				t.Fatalf("%q: %s with a view of %d bytes", enc, why, len(got))
			}
		default:
			t.Fatalf("%q: reason %q", enc, why)
		}
		view.release()
		if n := p.ResponseBytesHeld(); n != 0 {
			t.Fatalf("%q: %d bytes held after release", enc, n)
		}
	})
}

// brotlied is b in Brotli (RFC 7932).
func brotlied(b []byte) []byte {
	var buf bytes.Buffer
	w, err := brotli.NewWriter(&buf, 5)
	if err != nil {
		panic(err)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// rawDeflated is b as raw deflate data (RFC 1951), without the zlib
// wrapper RFC 9110's "deflate" names, as some servers send it.
func rawDeflated(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, 5)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}
