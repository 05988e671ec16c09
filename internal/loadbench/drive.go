package loadbench

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Cell is one point of the matrix: a body shape at a concurrency.
type Cell struct {
	Shape
	// Concurrency is the number of workers, each with one request in
	// flight at a time on its own keep-alive connection.
	Concurrency int
}

// requestTimeout bounds one request of the load.
const requestTimeout = 60 * time.Second

// load is what one run of a cell against one target measured on the
// client's side.
type load struct {
	n        int             // requests answered as expected
	errs     int             // requests that failed or were answered otherwise
	firstErr string          // the first failure, for the notes
	elapsed  time.Duration   // from the first request sent to the last answer
	lat      []time.Duration // latency of each answered request, sorted
	bytes    int64           // request body bytes sent
}

// newClient is the load generator's client of one target: a fasthttp
// HostClient with enough connections for every worker, reading each answer
// whole (streams too: the latency is to the last byte).
func newClient(addr string) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                          addr,
		Name:                          "llmguard-bench",
		MaxConns:                      512,
		MaxIdleConnDuration:           time.Minute,
		ReadTimeout:                   requestTimeout,
		WriteTimeout:                  requestTimeout,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
	}
}

// conversations returns the body builders of cell's workers, worker w's
// seeded seed+w.
func conversations(pool *textPool, cell Cell, seed uint64) []*conversation {
	convs := make([]*conversation, cell.Concurrency)
	for w := range convs {
		convs[w] = newConversation(pool, cell.Shape, seed+uint64(w))
	}
	return convs
}

// drive sends cell's load to base through client: one worker per
// conversation in convs (cell.Concurrency of them), each sending its
// conversation's next body as soon as the last is answered, until requests
// have been sent in all or the time cap has passed, whichever comes first.
// The bodies are built between requests, outside the latency; buffers are
// reused, so the generator allocates almost nothing per request. A later
// drive with the same convs continues their conversations.
func drive(client *fasthttp.HostClient, base string, convs []*conversation, cell Cell, requests int, limit time.Duration) load {
	uri := base + "/v1/chat/completions"
	var issued atomic.Int64
	deadline := time.Now().Add(limit)
	per := make([]load, cell.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cell.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &per[w]
			l.lat = make([]time.Duration, 0, requests/cell.Concurrency+1)
			conv := convs[w]
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for issued.Add(1) <= int64(requests) && time.Now().Before(deadline) {
				body := conv.next()
				req.Reset()
				req.SetRequestURI(uri)
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/json")
				req.Header.Set("Authorization", "Bearer "+benchKey)
				req.SetBodyRaw(body)
				t0 := time.Now()
				err := client.DoTimeout(req, resp, requestTimeout)
				d := time.Since(t0)
				if err == nil {
					err = checkAnswer(resp, cell.Stream)
				}
				if err != nil {
					if l.errs == 0 {
						l.firstErr = err.Error()
					}
					l.errs++
					continue
				}
				l.n++
				l.bytes += int64(len(body))
				l.lat = append(l.lat, d)
			}
		}()
	}
	wg.Wait()
	out := load{elapsed: time.Since(start)}
	for _, l := range per {
		out.n += l.n
		out.errs += l.errs
		out.bytes += l.bytes
		out.lat = append(out.lat, l.lat...)
		if out.firstErr == "" {
			out.firstErr = l.firstErr
		}
	}
	slices.Sort(out.lat)
	return out
}

var (
	streamEnd = []byte("data: [DONE]\n\n")
	usageKey  = []byte(`"usage":{"prompt_tokens":`)
)

// checkAnswer reports an answer that is not the mock's complete one: status
// 200 and usage, and for a stream the final [DONE] event.
func checkAnswer(resp *fasthttp.Response, stream bool) error {
	body := resp.Body()
	switch {
	case resp.StatusCode() != fasthttp.StatusOK:
		return fmt.Errorf("status %d: %.200s", resp.StatusCode(), body)
	case !bytes.Contains(body, usageKey):
		return fmt.Errorf("no usage in the answer: %.200s", body)
	case stream && !bytes.HasSuffix(body, streamEnd):
		return fmt.Errorf("stream without [DONE]: %.200s", body)
	}
	return nil
}

// quantile is the q-quantile of sorted by the nearest-rank method (the
// largest value when there are fewer than 1/(1-q) samples), 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(sorted))*q)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
