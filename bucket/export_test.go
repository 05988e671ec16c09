package bucket

// Held reports how many buckets and request ids m holds, for tests of its
// forgetting.
func (m *Memory) Held() (buckets, requestIDs int) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		buckets += len(sh.buckets)
		requestIDs += sh.ids.len()
		sh.mu.Unlock()
	}
	return buckets, requestIDs
}
