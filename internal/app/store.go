package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
)

// openStore builds the configured bucket store and the functions that
// release it. For Redis it sizes the connection pool, loads the scripts
// (a Redis that is down at start-up is not fatal: the scripts are loaded by
// EVAL on first use) and wraps the store in an asynchronous, batching
// reconciler so that reconciliation never adds a round trip to a request.
func openStore(c config.Store, log *slog.Logger) (bucket.Store, []func() error, error) {
	switch c.Backend {
	case "memory":
		m := bucket.NewMemory(bucket.MemoryOptions{})
		return m, []func() error{m.Close}, nil
	case "redis", "redis_cluster":
	default:
		return nil, nil, fmt.Errorf("app: unknown store backend %q", c.Backend)
	}
	// go-redis timeouts: the request path passes its own deadline
	// (store.timeout) in the context; these only bound a call without one.
	const ioTimeout = time.Second
	var client bucket.RedisScripter
	var closeClient func() error
	if c.Backend == "redis" {
		opt, err := redis.ParseURL(c.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("app: store.redis_url: %w", err)
		}
		opt.PoolSize = c.PoolSize
		opt.MinIdleConns = min(c.PoolSize, 16)
		opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout = ioTimeout, ioTimeout, ioTimeout
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1 // a retry would outlive the request's deadline
		rc := redis.NewClient(opt)
		client, closeClient = rc, rc.Close
	} else {
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 c.ClusterAddrs,
			PoolSize:              c.PoolSize,
			MinIdleConns:          min(c.PoolSize, 16),
			ReadTimeout:           ioTimeout,
			WriteTimeout:          ioTimeout,
			DialTimeout:           ioTimeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
		})
		client, closeClient = cc, cc.Close
	}
	r, err := bucket.NewRedis(bucket.RedisOptions{Client: client})
	if err != nil {
		closeClient()
		return nil, nil, fmt.Errorf("app: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.Load(ctx); err != nil {
		log.Warn("could not load the Redis scripts at start-up; they will be loaded on first use", "err", err)
	}
	async := bucket.NewAsyncReconciler(r, bucket.AsyncOptions{
		OnDrop: func(rc bucket.Reconciliation, err error) {
			log.Error("reconciliation dropped", "request_id", rc.RequestID, "err", err)
		},
	})
	return async, []func() error{async.Close, closeClient}, nil
}
