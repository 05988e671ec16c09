package alert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claimer records that a crossing is being delivered, so that it is
// delivered once however many nodes see it. Claim reports whether this
// caller is the first to claim id before until; the claim is forgotten at
// until. Errors: the claim could not be recorded (the store is down).
type Claimer interface {
	Claim(ctx context.Context, id string, until time.Time) (bool, error)
}

// crossingID names a crossing: the budget's bucket key, its period's start
// (Unix seconds), its quota (in the limit's unit) and the threshold. The
// quota is part of the name so that a budget raised or lowered live is a
// new budget for alerts: its thresholds are armed again against the new
// quota (one raised after it ran out alerts again when it runs out again).
func crossingID(key string, periodStart time.Time, quota int64, threshold float64) string {
	return key + "|" + strconv.FormatInt(periodStart.Unix(), 10) + "|" + strconv.FormatInt(quota, 10) + "|" + strconv.FormatFloat(threshold, 'g', -1, 64)
}

// SetNXer is what RedisClaimer needs of a client: SET key value NX PX.
// *redis.Client and *redis.ClusterClient satisfy it.
type SetNXer interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// RedisClaimer claims crossings with SET NX on the store every node
// shares, the key expiring at the period's end plus ClaimGrace (so that a
// node whose clock is a little behind cannot claim it again). Keys are
// "llmguard:alert:{<16 hex of SHA-256 of id>}", one hash tag each, so that
// on a Redis Cluster every claim is a single-slot command and claims spread
// over the slots. Safe for concurrent use.
type RedisClaimer struct {
	Client SetNXer
	// Now is the clock expiries are computed on; nil: time.Now.
	Now func() time.Time
}

// ClaimGrace is how long a claim outlives its period.
const ClaimGrace = time.Hour

// ClaimKey is the Redis key that claims crossing id.
func ClaimKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "llmguard:alert:{" + hex.EncodeToString(sum[:8]) + "}"
}

// Claim runs SET ClaimKey(id) 1 NX PX (until − now + ClaimGrace).
// Errors: Redis's, wrapped.
func (c *RedisClaimer) Claim(ctx context.Context, id string, until time.Time) (bool, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ttl := max(until.Sub(now()), 0) + ClaimGrace
	ok, err := c.Client.SetNX(ctx, ClaimKey(id), "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("alert: claim: %w", err)
	}
	return ok, nil
}

// MemoryClaimer claims crossings in this process: for the memory store,
// where one node is the whole fleet. It holds at most maxClaims claims,
// dropping expired ones first and then everything (a crossing claimed
// again after that is delivered again: harmless and rare). Its zero value
// is ready; safe for concurrent use.
type MemoryClaimer struct {
	// Now is the clock expiries are read on; nil: time.Now.
	Now func() time.Time

	mu     sync.Mutex
	claims map[string]time.Time
}

const maxClaims = 100000

// Claim reports whether id was unclaimed (or its claim expired); never
// an error.
func (c *MemoryClaimer) Claim(_ context.Context, id string, until time.Time) (bool, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	t := now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if exp, ok := c.claims[id]; ok && t.Before(exp) {
		return false, nil
	}
	if len(c.claims) >= maxClaims {
		for k, exp := range c.claims {
			if !t.Before(exp) {
				delete(c.claims, k)
			}
		}
		if len(c.claims) >= maxClaims {
			c.claims = nil
		}
	}
	if c.claims == nil {
		c.claims = make(map[string]time.Time)
	}
	c.claims[id] = until.Add(ClaimGrace)
	return true, nil
}
