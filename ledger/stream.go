package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

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
// of 1000 over the ids in [from − StreamSlack, to + StreamSlack]. Entries
// without a parsable "r" field are skipped. client is any go-redis client
// (*redis.Client, *redis.ClusterClient, …).
//
// The stream keeps at most about the Writer's MaxLen entries: for long
// periods, read the files.
//
// Errors: XRANGE's error, wrapped with the stream's key.
func ReadStream(ctx context.Context, client redis.Cmdable, stream string, from, to time.Time) ([]Record, error) {
	start, end := "-", "+"
	if !from.IsZero() {
		if ms := from.Add(-StreamSlack).UnixMilli(); ms > 0 {
			start = strconv.FormatInt(ms, 10)
		}
	}
	if !to.IsZero() {
		ms := to.Add(StreamSlack).UnixMilli()
		if ms < 0 {
			return nil, nil
		}
		end = strconv.FormatInt(ms, 10)
	}
	f := Filter{From: from, To: to}
	var recs []Record
	for {
		msgs, err := client.XRangeN(ctx, stream, start, end, streamPage).Result()
		if err != nil {
			return nil, fmt.Errorf("ledger: xrange %s: %w", stream, err)
		}
		for _, m := range msgs {
			s, ok := m.Values[streamField].(string)
			if !ok || len(s) == 0 {
				continue
			}
			if r, ok := parseLine([]byte(s)); ok && f.Match(r) {
				recs = append(recs, r)
			}
		}
		if len(msgs) < streamPage {
			return recs, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
