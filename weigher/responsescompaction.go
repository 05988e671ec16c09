package weigher

import "github.com/tidwall/gjson"

// responsesCompaction reads a Responses "context_management" value (cm):
// ok when it asks for server-side compaction, at the context, in tokens,
// from which the upstream compacts.
//
// OpenAI's Responses API takes a list of entries such as
// {"type":"compaction","compact_threshold":200000}; "When the rendered
// token count crosses the configured threshold, the server runs
// server-side compaction" in the same call — a pass that reads the whole
// context and writes an encrypted compaction item — and "prunes context
// before continuing inference"
// (https://developers.openai.com/api/docs/guides/compaction). The call
// then runs two model passes, the second reading a summary the body does
// not show. The count is rendered as the response streams, so output
// counts towards it too. OpenAI documents neither a default nor a least
// threshold, and compaction is its only documented strategy, so each
// entry is read as a compaction, and one whose compact_threshold is not a
// positive count (absent, null, a word) as compacting at any size: at 0.
// at is the least threshold of the entries. A single entry given as an
// object where a list was expected is read as that entry; null, an empty
// list or another value asks for nothing.
func responsesCompaction(cm gjson.Result) (at int64, ok bool) {
	entry := func(e gjson.Result) {
		var n int64
		if e.IsObject() {
			n, _ = tokenCount(e.Get("compact_threshold"))
		}
		if !ok || n < at {
			at = n
		}
		ok = true
	}
	switch {
	case cm.IsArray():
		cm.ForEach(func(_, e gjson.Result) bool {
			entry(e)
			return true
		})
	case cm.IsObject():
		entry(cm)
	}
	return at, ok
}
