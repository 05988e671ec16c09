package proxy

import (
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// unreachableLogEvery is the least time between two "upstream
// unreachable" lines: an upstream that refuses every call at 1000
// requests a second wrote 1000 WARN lines a second, one per call
// (trial18), where a store outage writes one line every 10 s.
const unreachableLogEvery = 10 * time.Second

// unreachableLog spaces the WARN lines about calls that could not reach
// their upstream: the first at once, then at most one every interval,
// each counting the calls that failed since the line before (those not
// logged included). The zero value is not usable: see
// newUnreachableLog. Safe for concurrent use.
type unreachableLog struct {
	every  *rate.Sometimes
	failed atomic.Int64 // calls failed since the last line
}

func newUnreachableLog(every time.Duration) *unreachableLog {
	return &unreachableLog{every: &rate.Sometimes{First: 1, Interval: every}}
}

// note counts one call to upstream that failed with err (the request's
// id), and logs it when a line is due.
func (u *unreachableLog) note(log *slog.Logger, upstream string, err error, id string) {
	u.failed.Add(1)
	u.every.Do(func() {
		log.Warn("upstream unreachable", "upstream", upstream, "err", err, "request_id", id,
			"failed_calls", u.failed.Swap(0), "next_line_after", u.every.Interval)
	})
}
