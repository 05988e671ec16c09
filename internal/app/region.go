package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/region"
)

// openRegions builds the region exchange when the config has one
// (region_exchange:), on the store's Redis for this node's region and a
// small client of each peer region's Redis (closed with the exchange), and
// reads this region's shares once before the node serves (a Redis that
// does not answer leaves each exchanged limit at its region's floor until
// the first step that reads it). nil, nil when the exchange is off. The
// caller runs it (Exchange.Run) and stops it before the store closes.
func openRegions(cfg *config.Config, st *stores, pol func() *policy.Policy, reg prometheus.Registerer, log *slog.Logger) (*region.Exchange, error) {
	x := cfg.RegionExchange
	if x == nil {
		return nil, nil
	}
	if st.client == nil { // Validate refuses the exchange without a Redis store
		return nil, fmt.Errorf("app: region_exchange needs a redis or redis_cluster store")
	}
	clients := map[string]redis.Scripter{cfg.Region: st.client}
	for _, r := range slices.Sorted(maps.Keys(x.Peers)) {
		opt, err := redis.ParseURL(x.Peers[r])
		if err != nil {
			return nil, fmt.Errorf("app: region_exchange.peers.%s: %w", r, err)
		}
		// A few connections, each call bounded by the exchange; fail fast
		// (no retries, one dial attempt) as the store's client does.
		opt.PoolSize, opt.MaxRetries, opt.DialerRetries, opt.ContextTimeoutEnabled = 4, -1, 1, true
		opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout = time.Second, time.Second, time.Second
		c := redis.NewClient(opt)
		st.close = append([]func() error{c.Close}, st.close...)
		clients[r] = c
	}
	ex, err := region.New(region.Options{Region: cfg.Region, Redis: clients, Every: time.Duration(x.Every), MaxStep: x.MaxStep,
		Policy: pol, Logger: log, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ex.Refresh(ctx); err != nil {
		log.Warn("region exchange: could not read this region's shares at start-up; exchanged limits hold their region's floor until it answers", "err", err)
	}
	return ex, nil
}
