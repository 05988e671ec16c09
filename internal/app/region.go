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
	"github.com/llmguard/llmguard/internal/respguard"
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
		c := respguard.NewClient(opt)
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
	logShortShares(pol(), time.Duration(x.Every), time.Now(), log)
	return ex, nil
}

// logShortShares writes one INFO line per exchanged limit whose region
// holds less than its configured share at start-up: at a first start (or
// after its record was lost, or its split changed) a region holds its
// floor until its record reaches back burst/rate + 3 × every (README,
// "Regions"), an hour for an hourly limit, which its callers see as a
// small RateLimit-Policy q=; the line says so and for how long at least,
// where the operator looks first (trial17: q=3000 of a 60000-token limit
// split 0.6 for a minute, with nothing in the log).
func logShortShares(pol *policy.Policy, every time.Duration, now time.Time, log *slog.Logger) {
	for i := range pol.Rules() {
		r := &pol.Rules()[i]
		g := r.Regional
		if g == nil || !g.Exchanged {
			continue
		}
		held, configured := g.Share(now), g.Shares[g.Self]
		if held >= configured {
			continue
		}
		log.Info("region exchange: this region holds less than its configured share of a limit for now; a share the plan grows is used burst/rate + 3 × every after it was granted (at a first start: its floor that long at least)",
			"limit", r.Name, "region", g.Region, "share", float64(held)/policy.PPM, "configured_share", float64(configured)/policy.PPM,
			"grow_after", g.Fill+region.GrowIntervals*every)
	}
}
