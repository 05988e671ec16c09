package app

import (
	"log/slog"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// adminMaxConnections caps the admin listener's open connections: scrapes,
// health checks and the admin API need few, and each holds a file
// descriptor the proxy's upstream dials and Redis need too.
const adminMaxConnections = 256

// minDefaultConnections is the least default max_connections, whatever the
// file-descriptor limit: a limit so low that half of it is below this is a
// misconfigured host, and a proxy that refused its 65th caller would be
// worse than one that runs out of descriptors under attack.
const minDefaultConnections = 64

// fileLimit is the process's file-descriptor limit (RLIMIT_NOFILE's soft
// value, which the Go runtime raises to the hard value at start-up on
// Linux), or 0 when it cannot be read or is unlimited.
func fileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur == ^uint64(0) {
		return 0
	}
	return l.Cur
}

// maxConnections is the proxy listener's connection cap (fasthttp's
// Server.Concurrency) for configured (config max_connections; 0: the
// default) under the file-descriptor limit files (0: unknown): configured
// when set, else half of files (at least minDefaultConnections, at most
// maxDefaultConnections), else
// fasthttp's own default (256 × 1024). A configured cap at or above the
// limit is kept, and logged: connections could then use up the
// descriptors the upstream dials need.
func maxConnections(configured int, files uint64, log *slog.Logger) int {
	if configured > 0 {
		if files > 0 && uint64(configured) >= files {
			log.Warn("max_connections is not below the file-descriptor limit: connections that send half a request can use up the descriptors upstream dials and Redis need",
				"max_connections", configured, "file_limit", files)
		}
		return configured
	}
	if files == 0 {
		return fasthttp.DefaultConcurrency
	}
	return int(min(max(files/2, minDefaultConnections), maxDefaultConnections))
}

// maxDefaultConnections caps the default max_connections whatever the
// file-descriptor limit: each connection holds its read buffer
// (proxy.ReadBufferSize, 16 KiB) while it sends its request, so half of a
// container's usual limit of 1,048,576 descriptors would let half-sent
// requests hold some 8 GiB; 65,536 hold about 1 GiB.
const maxDefaultConnections = 65536

// connectionMetrics are the proxy listener's open connections and the
// connections it refused at its cap, read from srv when scraped.
func connectionMetrics(srv *fasthttp.Server, limit int) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmguard_open_connections",
			Help: "Caller connections the proxy listener holds open, idle keep-alive ones included.",
		}, func() float64 { return float64(max(srv.GetOpenConnectionsCount(), 0)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmguard_max_connections",
			Help: "The proxy listener's connection cap (max_connections, or half the file-descriptor limit).",
		}, func() float64 { return float64(limit) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llmguard_connections_refused_total",
			Help: "Caller connections answered 503 and closed because max_connections were open.",
		}, func() float64 { return float64(srv.GetRejectedConnectionsCount()) }),
	}
}
