package weigher

import "sync/atomic"

// chunkShapesSlots is how many shapes a Weigher shares between its
// streams: OpenAI's chat streams take four (the role chunk, the content
// chunks, the finish chunk, the include_usage chunk); the rest for tool
// calls, completions and other upstreams.
const chunkShapesSlots = 8

// chunkShapes are the last chunk shapes a Weigher's streams built, shared
// so that a stream's first chunks of each shape are read on the fast path
// too (ids, "created", obfuscation strings and usage figures differ
// between streams, the rest of a shape does not; see chunk_skeleton.go). Memory: at most chunkShapesSlots shapes of
// some 5 KiB each. The zero value holds none. Safe for concurrent use: a
// slot's shape is replaced whole, never changed.
type chunkShapes struct {
	slot [chunkShapesSlots]atomic.Pointer[chunkShape]
	next atomic.Uint32
}

// add shares sh, replacing the oldest shape; nothing when c is nil.
func (c *chunkShapes) add(sh *chunkShape) {
	if c == nil {
		return
	}
	c.slot[c.next.Add(1)%chunkShapesSlots].Store(sh)
}
