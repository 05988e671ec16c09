package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
)

// StreamSlack widens ReadStream's XRANGE on both sides: an entry's id is
// Redis's clock when the Writer added it, which lags the record's ts by its
// time in the queue and differs from it by the clock skew between the proxy
// and Redis.
const StreamSlack = 5 * time.Minute

// streamPage is how many entries one XRANGE call returns.
const streamPage = 1000

// ReadStream reads back from stream the records whose ts is in [from, to)
// (a zero from or to is unbounded), oldest entry first, with XRANGE in pages
// of 1000 over the ids in [from − StreamSlack, to + StreamSlack +
// DefaultRedisRetryFor] (a record the Writer sent again after an outage has
// a stream id up to DefaultRedisRetryFor past its ts). Entries without a
// parsable "r" field are skipped and counted (bad). An entry whose bytes
// equal an earlier entry's is read once: a Writer whose pipeline timed out
// after Redis had applied it sends the same lines again, and two records
// of the ledger never have the same bytes (each has its own request id and
// nanosecond ts). client is any go-redis client (*redis.Client,
// *redis.ClusterClient, …).
//
// The stream keeps at most about the Writer's MaxLen entries: for long
// periods, read the files.
//
// Errors: XRANGE's error, wrapped with the stream's key.
func ReadStream(ctx context.Context, client redis.Cmdable, stream string, from, to time.Time) (recs []Record, bad int, err error) {
	start, end := "-", "+"
	if !from.IsZero() {
		if ms := from.Add(-StreamSlack).UnixMilli(); ms > 0 {
			start = strconv.FormatInt(ms, 10)
		}
	}
	if !to.IsZero() {
		ms := to.Add(StreamSlack + DefaultRedisRetryFor).UnixMilli()
		if ms < 0 {
			return nil, 0, nil
		}
		end = strconv.FormatInt(ms, 10)
	}
	f := Filter{From: from, To: to}
	seen := map[uint64]struct{}{}
	for {
		msgs, err := client.XRangeN(ctx, stream, start, end, streamPage).Result()
		if err != nil {
			return nil, bad, fmt.Errorf("ledger: xrange %s: %w", stream, err)
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
			h := xxhash.Sum64String(s)
			if _, dup := seen[h]; dup {
				continue
			}
			seen[h] = struct{}{}
			if f.Match(r) {
				recs = append(recs, r)
			}
		}
		if len(msgs) < streamPage {
			return recs, bad, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
