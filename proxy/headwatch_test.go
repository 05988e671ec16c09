package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/weigher"
)

// TestClientGoneBeforeTheAnswerHead: a client that leaves while the
// upstream has not sent its answer head yet (a non-streamed call while the
// model generates; a stream the upstream has queued) has its upstream
// connection closed, its in-flight slot given back and its reservation
// kept (the upstream may bill what it generated), long before the
// upstream's timeout. Before, llmguard noticed nothing until the upstream
// answered or its timeout passed (10 minutes by default): with a 4 s
// timeout, the slot and the upstream connection were held 4.0 s after the
// client left, streamed or not; now about 0.5 s (streamWatchEvery).
func TestClientGoneBeforeTheAnswerHead(t *testing.T) {
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, body string }{{"json", panicBody}, {"stream", panicStreamBody}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan net.Conn, 1)
			closed := make(chan struct{})
			go func() { // reads the request, answers nothing, notes the close
				c, err := ln.Accept()
				if err != nil {
					return
				}
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				got <- c
				io.Copy(io.Discard, br)
				close(closed)
			}()
			// The upstream's timeout is far past the wait below: only the
			// client's leaving can end the call within it.
			r := newRig(t, rigOptions{url: "http://" + ln.Addr().String(), w: w, timeout: 10 * time.Minute,
				limits: "  - {name: one, scope: user, unit: concurrent, max: 1}\n"})
			before := tokensLeft(r)
			c, err := net.Dial("tcp", r.url[len("http://"):])
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-panic\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(tc.body)) + "\r\n\r\n" + tc.body))
			uc := <-got
			defer uc.Close()
			if r.inFlight() != 1 {
				t.Fatal("the request holds no slot while the upstream generates")
			}
			c.Close()
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				t.Fatal("the upstream connection is still open 30 s after the client left: the upstream generates for nobody")
			}
			r.waitFree(tc.name)
			est := w.Chat([]byte(tc.body))
			for i := 0; i < 1000 && r.ledger.count() == 0; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if got, want := before-tokensLeft(r), est.InputTokens+est.OutputTokens; got != want {
				t.Fatalf("charged %d tokens, want the reservation %d: the upstream may bill what it generated", got, want)
			}
			if n := r.ledger.count(); n != 1 {
				t.Fatalf("%d ledger records, want 1", n)
			}
			// Counted as an admitted request its client closed (499), not
			// as an upstream error (adv31: outcome upstream_error, status
			// 502, and a failed upstream response recorded).
			if rec := r.ledger.records[0]; rec.Status != statusClientClosed {
				t.Errorf("ledger status %d, want %d", rec.Status, statusClientClosed)
			}
			// The outcome is counted as the handler ends, which may follow
			// the ledger's record (CI, two CPU hogs: both 0 when read at
			// once): wait for one.
			for i := 0; i < 1000 && requestsBy(t, r.reg, "allowed")+requestsBy(t, r.reg, "upstream_error") == 0; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if a, e := requestsBy(t, r.reg, "allowed"), requestsBy(t, r.reg, "upstream_error"); a != 1 || e != 0 {
				t.Errorf("outcomes: allowed %v, upstream_error %v; want 1 and 0", a, e)
			}
			if n := upstreamResponses(t, r.reg); n != 0 {
				t.Errorf("%v upstream responses recorded for a call its client left", n)
			}
		})
	}
}

// tokensLeft is the rig's user-tokens bucket level, read with a take of
// cost 0 (the rig's remaining with other limits beside it).
func tokensLeft(r *panicRig) int64 {
	r.t.Helper()
	pr, _ := r.pol.Identify("sk-panic")
	for _, rule := range r.pol.Match(nil, pr, "gpt-4o-mini", "/v1/chat/completions") {
		if rule.Name != "user-tokens" {
			continue
		}
		d, err := r.store.Take(context.Background(), newRequestID(), []bucket.Item{{Key: rule.Key(pr), Limit: rule.LimitAt(time.Now()), Cost: 0}})
		if err != nil {
			r.t.Fatal(err)
		}
		return d.Buckets[0].Remaining
	}
	r.t.Fatal("no rule user-tokens")
	return 0
}

// upstreamResponses is the sum of llmguard_upstream_responses_total.
func upstreamResponses(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "llmguard_upstream_responses_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
