package bucket

import "context"

// Held reports how many buckets and request ids m holds, for tests of its
// forgetting.
func (m *Memory) Held() (buckets, requestIDs int) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for _, e := range sh.buckets {
			if !e.gone {
				buckets++
			}
		}
		requestIDs += sh.ids.len()
		sh.mu.Unlock()
	}
	return buckets, requestIDs
}

// Slots is the number of bucket entries the shards' maps hold, tombstones
// of buckets left full included.
func (m *Memory) Slots() (n int) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.buckets)
		sh.mu.Unlock()
	}
	return n
}

// Len is the number of denials c holds, after its pending maintenance.
func (c *DenyCache) Len() int {
	c.denials.CleanUp()
	return c.denials.EstimatedSize()
}

// Waiting reports how many takes wait for another take's lease
// acquisition, for the single-flight test.
func (l *Leased) Waiting() int { return int(l.waiting.Load()) }

// SlotOf is the hash slot of key as the Redis store groups takes by it (0
// for every key of a store that is not a cluster's).
func SlotOf(key string) uint16 { return slotOf(key) }

// HoldTakes marks slot's takes as in flight, so that every take of the slot
// queues until ReleaseTakes: a test builds a batch of known order with it.
func (r *Redis) HoldTakes(slot uint16) {
	b := r.takes
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slots[slot] == nil {
		b.slots[slot] = &takeSlot{}
	}
	b.slots[slot].busy = true
}

// TakesIdle reports whether slot has no call in flight and no take
// queued: the previous call's batcher has marked it idle (it does so
// after answering the call's takes).
func (r *Redis) TakesIdle(slot uint16) bool {
	b := r.takes
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slots[slot]
	return s == nil || !s.busy && len(s.queue) == 0
}

// QueuedTakes is how many takes of slot wait in its queue.
func (r *Redis) QueuedTakes(slot uint16) int {
	b := r.takes
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.slots[slot]; s != nil {
		return len(s.queue)
	}
	return 0
}

// ReleaseTakes ends a HoldTakes: the queued takes go, as one script call
// (DefaultTakeBatch at most per call).
func (r *Redis) ReleaseTakes(slot uint16) { r.takes.next(slot) }

// SendTakesAsBatches has every take use takebatch.lua, a lone one
// as a batch of one, so that the contract suite runs through it.
func (r *Redis) SendTakesAsBatches() { r.takes.alone = true }

// SendLoneTakesGeneric has a lone take of token buckets run take.lua's
// generic body (the single layout) instead of its fast path (the lone
// layout), so that tests can compare the two.
func (r *Redis) SendLoneTakesGeneric() { r.takes.generic = true }

// WithBackgroundForTest marks ctx as a ChargeBack flush's (withBackground).
func WithBackgroundForTest(ctx context.Context) context.Context { return withBackground(ctx) }
