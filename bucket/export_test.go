package bucket

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
