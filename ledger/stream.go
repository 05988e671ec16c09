package ledger

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
)

// StreamSlack widens ScanStream's XRANGE on both sides: an entry's id is
// Redis's clock when the Writer added it, which lags the record's ts by its
// time in the queue and differs from it by the clock skew between the proxy
// and Redis.
const StreamSlack = 5 * time.Minute

// streamPage is how many entries one XRANGE call returns.
const streamPage = 1000

// streamPageTimeout bounds one XRANGE page of ScanStream, every try
// go-redis makes of it included (when the client has
// ContextTimeoutEnabled, as llmguard's ledger clients do): a healthy
// Redis answers a page of 1000 entries in milliseconds, and a frozen one
// then fails the read in this time rather than after go-redis's three
// tries of its 3 s read timeout.
const streamPageTimeout = 3 * time.Second

// dedupeWindow is how far apart, in stream-id time, two entries with the
// same bytes can be: a Writer sends a record again at most
// DefaultRedisRetryFor after it first tried, and StreamSlack covers the
// clocks. ScanStream forgets an entry's hash once the entries it reads
// are this much younger, so what it holds is bounded by the entries of
// one window, not by the stream's length.
const dedupeWindow = DefaultRedisRetryFor + StreamSlack

// ScanStream calls fn with each record of stream whose ts is in [from, to)
// (a zero from or to is unbounded), oldest entry first, reading with
// XRANGE in pages of 1000 over the ids in [from − StreamSlack, to +
// StreamSlack + DefaultRedisRetryFor] (a record the Writer sent again after
// an outage has a stream id up to DefaultRedisRetryFor past its ts), each
// page within streamPageTimeout (3 s). Entries without a parsable "r"
// field are skipped and counted (bad). An entry whose bytes equal an
// earlier entry's is read once: a Writer whose pipeline timed out after
// Redis had applied it sends the same lines again, and two records of the
// ledger never have the same bytes (each has its own request id and
// nanosecond ts). Memory: about 50 bytes (a map entry and a queue slot
// for its 8-byte hash and id time) per entry of the last dedupeWindow
// (1 h 5 min) of stream ids, whatever the range's length. client is any go-redis client (*redis.Client,
// *redis.ClusterClient, …).
//
// The stream keeps at most about the Writer's MaxLen entries: for long
// periods, read the files.
//
// Errors: XRANGE's error, wrapped with the stream's key (fn has been
// called for the records read before it).
func ScanStream(ctx context.Context, client redis.Cmdable, stream string, from, to time.Time, fn func(Record)) (bad int, err error) {
	start, end := "-", "+"
	if !from.IsZero() {
		if ms := from.Add(-StreamSlack).UnixMilli(); ms > 0 {
			start = strconv.FormatInt(ms, 10)
		}
	}
	if !to.IsZero() {
		ms := to.Add(StreamSlack + DefaultRedisRetryFor).UnixMilli()
		if ms < 0 {
			return 0, nil
		}
		end = strconv.FormatInt(ms, 10)
	}
	f := Filter{From: from, To: to}
	var seen recentLines
	for {
		pctx, cancel := context.WithTimeout(ctx, streamPageTimeout)
		msgs, err := client.XRangeN(pctx, stream, start, end, streamPage).Result()
		cancel()
		if err != nil {
			return bad, fmt.Errorf("ledger: xrange %s: %w", stream, err)
		}
		for _, m := range msgs {
			s, ok := m.Values[streamField].(string)
			r, parsed := Record{}, false
			if ok && len(s) > 0 {
				r, parsed = parseLine([]byte(s))
			}
			if !parsed {
				bad++
				continue
			}
			if seen.repeat(xxhash.Sum64String(s), idMillis(m.ID)) {
				continue
			}
			if f.Match(r) {
				fn(r)
			}
		}
		if len(msgs) < streamPage {
			return bad, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// idMillis is the milliseconds part of a stream entry id ("1700000000000-0");
// 0 when it has none (ids are Redis's, so this does not happen).
func idMillis(id string) int64 {
	if i := strings.IndexByte(id, '-'); i >= 0 {
		id = id[:i]
	}
	ms, _ := strconv.ParseInt(id, 10, 64)
	return ms
}

// recentLines remembers the hashes of the entries read in the last
// dedupeWindow of stream-id time, in id order. The zero value is empty
// and ready.
type recentLines struct {
	at    map[uint64]int64 // hash → id time of the entry, ms
	order []hashAt         // the same, oldest first; order[head:] is live
	head  int
}

type hashAt struct {
	hash uint64
	ms   int64
}

// repeat reports whether an entry with hash h was read within dedupeWindow
// before ms, and otherwise records it at ms, forgetting what has fallen out
// of the window.
func (r *recentLines) repeat(h uint64, ms int64) bool {
	if r.at == nil {
		r.at = map[uint64]int64{}
	}
	if _, ok := r.at[h]; ok {
		return true
	}
	for r.head < len(r.order) && r.order[r.head].ms < ms-dedupeWindow.Milliseconds() {
		delete(r.at, r.order[r.head].hash)
		r.head++
	}
	if r.head > len(r.order)/2 && r.head > 1024 { // reuse the front, amortized O(1)
		r.order = append(r.order[:0], r.order[r.head:]...)
		r.head = 0
	}
	r.at[h] = ms
	r.order = append(r.order, hashAt{h, ms})
	return false
}
