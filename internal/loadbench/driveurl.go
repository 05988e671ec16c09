package loadbench

import (
	"fmt"
	"net/url"
	"time"
)

// DriveOptions are the load of [DriveURL]: one cell sent to a proxy
// already running, for measuring a process started by hand (under
// valgrind's callgrind, strace or perf) with the benchmark's own load.
type DriveOptions struct {
	// URL is the target's base URL (http://host:port).
	URL string
	// Cell is the body shape and concurrency.
	Cell Cell
	// Warmup is the requests sent first, unmeasured (at least two per
	// worker are always sent, as the benchmark does). Requests is the
	// measured requests, sent after the optional Between callback.
	Warmup, Requests int
	// Seed picks the conversations (0: 1).
	Seed uint64
	// Between, when not nil, runs after the warm-up and before the
	// measured requests (callgrind_control -z, say); After runs after
	// them. Their errors stop the run.
	Between, After func() error
}

// DriveResult is what DriveURL measured: requests answered as expected and
// the others (with the first failure), and the time the measured requests
// took.
type DriveResult struct {
	N, Errors  int
	FirstError string
	Elapsed    time.Duration
}

// DriveURL sends o's load to the proxy at o.URL: the warm-up, o.Between,
// o.Requests requests, o.After. There is no time cap but a request's
// (60 s). Errors: a bad URL, a callback's error.
func DriveURL(o DriveOptions) (DriveResult, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return DriveResult{}, fmt.Errorf("loadbench: %w", err)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	client := newClient(u.Host)
	convs := conversations(newTextPool(1), o.Cell, o.Seed)
	drive(client, o.URL, convs, o.Cell, max(o.Warmup, 2*o.Cell.Concurrency), time.Hour)
	if o.Between != nil {
		if err := o.Between(); err != nil {
			return DriveResult{}, err
		}
	}
	l := drive(client, o.URL, convs, o.Cell, o.Requests, time.Hour)
	if o.After != nil {
		if err := o.After(); err != nil {
			return DriveResult{}, err
		}
	}
	return DriveResult{N: l.n, Errors: l.errs, FirstError: l.firstErr, Elapsed: l.elapsed}, nil
}
