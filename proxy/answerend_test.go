package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptStep is what a scripted upstream writes, after a pause.
type scriptStep struct {
	pause time.Duration
	write string
}

// startScriptedUpstream answers each connection's first request with
// steps, in order, and then neither writes nor closes until the test
// ends, unless closeAfter is set.
func startScriptedUpstream(t *testing.T, closeAfter bool, steps ...scriptStep) string {
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
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				for _, s := range steps {
					select {
					case <-time.After(s.pause):
					case <-stop:
						return
					}
					if _, err := io.WriteString(c, s.write); err != nil {
						return
					}
				}
				if !closeAfter {
					<-stop
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// lingerAnswer is a chat answer reporting 5 input and 7 output tokens.
const lingerAnswer = `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"a \"quoted\" } ] brace"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`

// An upstream's non-streamed JSON answer of no declared length (close-
// delimited, HTTP/1.1 or HTTP/1.0; chunked without its last chunk) that
// was whole but whose upstream then neither ended it nor closed its
// connection held the caller's answer, its settlement and its ledger
// record until the upstream timeout. It now ends a grace after its value
// closed, whole, settled at the usage it reported. The rig's upstream
// timeout (90 s) is longer than the client's bound, which only ends
// a failing run.
func TestJSONAnswerEndsAfterItsValueThoughTheUpstreamLingers(t *testing.T) {
	w := testWeigher(t)
	big := `{"id":"x","object":"chat.completion","pad":"` + strings.Repeat("p", 4000) + `","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}`
	for _, tc := range []struct {
		name        string
		steps       []scriptStep
		want        string
		maxResponse int
		output      int64 // the output tokens settled
	}{
		{name: "HTTP/1.1 close-delimited", steps: []scriptStep{{write: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + lingerAnswer}}, want: lingerAnswer, output: 7},
		{name: "HTTP/1.0", steps: []scriptStep{{write: "HTTP/1.0 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n\r\n" + lingerAnswer}}, want: lingerAnswer, output: 7},
		{name: "chunked without its last chunk", steps: []scriptStep{{write: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(lingerAnswer)), 16) + "\r\n" + lingerAnswer + "\r\n"}}, want: lingerAnswer, output: 7},
		{name: "in pieces, whitespace after", steps: []scriptStep{
			{write: "HTTP/1.1 200 OK\r\nContent-Type: application/problem+json\r\n\r\n" + lingerAnswer[:40]},
			// Whitespace in the value's last write: one after it may come
			// after the grace on a loaded machine.
			{pause: 20 * time.Millisecond, write: lingerAnswer[40:] + "\n"}}, want: lingerAnswer + "\n", output: 7},
		// Over max_response_bytes: relayed unread as it comes, charged
		// its bytes counted as text (its usage of 7 output tokens beside
		// 4 KB is not taken at its word; unreadCharge).
		{name: "over max_response_bytes", steps: []scriptStep{{write: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + big}}, want: big, maxResponse: 1024,
			output: unreadCharge(w, panicBody, []byte(big)) - w.Chat([]byte(panicBody)).InputTokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startScriptedUpstream(t, false, tc.steps...)
			r := newRig(t, rigOptions{url: up, w: w, timeout: 90 * time.Second, endGrace: 50 * time.Millisecond, maxResponse: tc.maxResponse})
			client := &http.Client{Timeout: time.Minute}
			req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(panicBody))
			req.Header.Set("Authorization", "Bearer sk-panic")
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("the answer did not end for its caller: %v (%d bytes read)", err, len(b))
			}
			if resp.StatusCode != http.StatusOK || string(b) != tc.want {
				t.Fatalf("%d %.300q", resp.StatusCode, b)
			}
			for end := time.Now().Add(time.Minute); r.ledger.count() == 0 && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			if r.ledger.count() != 1 {
				t.Fatalf("%d ledger records, want 1", r.ledger.count())
			}
			r.ledger.mu.Lock()
			rec := r.ledger.records[0]
			r.ledger.mu.Unlock()
			if !nearCharge(rec.OutputTokens, tc.output) || rec.Status != http.StatusOK {
				t.Errorf("settled %d output tokens with status %d, want %d and 200", rec.OutputTokens, rec.Status, tc.output)
			}
		})
	}
}

// A body that is not one JSON value — a value followed by more than
// whitespace, or a JSON Lines body, a value per line — is not ended at a
// value's close: the bytes its upstream sends after a silence longer than
// the grace reach the caller, and the answer ends when the upstream
// closes it.
func TestAnswerNotOneValueWaitsForItsUpstream(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name, ctype, first, more string
		grace                    time.Duration
	}{
		{name: "a value and more", ctype: "application/json", first: lingerAnswer + ` {"more":1}`, grace: 50 * time.Millisecond},
		// The value's end armed the cut; the bytes after it, 20 ms
		// later and well within the grace, disarm it for good.
		{name: "a value, then more within the grace", ctype: "application/json", first: lingerAnswer, more: ` {"more":1}`, grace: time.Second},
		{name: "JSON Lines", ctype: "application/jsonl", first: lingerAnswer + "\n", grace: 50 * time.Millisecond},
		{name: "not JSON at all", ctype: "application/json", first: `"a string"`, grace: 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const tail = `{"tail":2}`
			up := startScriptedUpstream(t, true,
				scriptStep{write: "HTTP/1.1 200 OK\r\nContent-Type: " + tc.ctype + "\r\n\r\n" + tc.first},
				scriptStep{pause: 20 * time.Millisecond, write: tc.more},
				// Twice the grace or more: a cut would come first.
				scriptStep{pause: max(2*tc.grace, 500*time.Millisecond), write: tail})
			r := newRig(t, rigOptions{url: up, w: w, timeout: 5 * time.Minute, endGrace: tc.grace})
			status, b, err := r.post(panicBody)
			if err != nil || status != http.StatusOK || b != tc.first+tc.more+tail {
				t.Fatalf("%d %v %.300q, want the whole body", status, err, b)
			}
		})
	}
}

// valueEnd closes at a top-level object's or array's end, whatever the
// brackets and escapes in its strings, in whatever pieces it comes; it
// gives up on anything but whitespace before or after the value.
func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want valueState
	}{
		{`{}`, valueClosed},
		{" \r\n\t[1,[2],{\"a\":[]}]  \n", valueClosed},
		{`{"a":"}\"]\\"}`, valueClosed},
		{`{"a":"\\\"}"`, valueIn},
		{`{"a":{"b":[`, valueIn},
		{`{"a":"x\`, valueEscape},
		{``, valueBefore},
		{`   `, valueBefore},
		{`{}{}`, valueNot},
		{`{} x`, valueNot},
		{`"str"`, valueNot},
		{`12`, valueNot},
		{"\ufeff{}", valueNot},
	} {
		var whole valueEnd
		whole.feed([]byte(tc.in))
		if whole.state != tc.want {
			t.Errorf("%q: state %d, want %d", tc.in, whole.state, tc.want)
		}
		var bytewise valueEnd
		for i := range len(tc.in) {
			bytewise.feed([]byte{tc.in[i]})
		}
		if bytewise != whole {
			t.Errorf("%q fed a byte at a time: %+v, whole: %+v", tc.in, bytewise, whole)
		}
	}
}

func TestJSONType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, " application/json ;": true,
		"application/problem+json": true, "application/vnd.api+json;x=1": true,
		"application/jsonl": false, "application/x-ndjson": false, "text/plain": false, "": false,
		"+json": false, "application/json-seq": false, "text/event-stream": false,
	} {
		if got := jsonType([]byte(ct)); got != want {
			t.Errorf("jsonType(%q) = %v, want %v", ct, got, want)
		}
	}
}

// FuzzValueEnd: fed in two pieces split anywhere, valueEnd ends where it
// ends fed whole; a valid JSON object or array (surrounded by whitespace)
// is closed, and closed at no earlier byte than its last bracket.
func FuzzValueEnd(f *testing.F) {
	for _, s := range []string{`{}`, ` [1,"]",{"a":"\"}"}] `, `{"a":"\\"}`, `{}{}`, `"x"`, "{\"\\u005d\":1}\n"} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		var whole valueEnd
		whole.feed(in)
		if cut < 0 {
			cut = -cut
		}
		if len(in) > 0 {
			cut %= len(in) + 1
		} else {
			cut = 0
		}
		var split valueEnd
		split.feed(in[:cut])
		split.feed(in[cut:])
		if split != whole {
			t.Fatalf("split at %d: %+v, whole: %+v", cut, split, whole)
		}
		trimmed := strings.TrimSpace(string(in))
		if !json.Valid(in) || trimmed == "" || (trimmed[0] != '{' && trimmed[0] != '[') {
			return
		}
		if whole.state != valueClosed {
			t.Fatalf("%q is one JSON value: state %d", in, whole.state)
		}
		last := strings.LastIndexAny(string(in), "}]")
		var early valueEnd
		early.feed(in[:last])
		if early.state == valueClosed {
			t.Fatalf("%q closed before its last bracket", in)
		}
	})
}

// BenchmarkValueEnd follows a 16 KiB chat answer (text, escapes and
// nesting) through valueEnd.
func BenchmarkValueEnd(b *testing.B) {
	msg := strings.Repeat(`word \"quoted\" {x} `, 800)
	body := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + msg + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v valueEnd
		v.feed(body)
		if v.state != valueClosed {
			b.Fatal(v.state)
		}
	}
}
