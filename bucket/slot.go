package bucket

import (
	"strconv"
	"strings"
	"sync"
)

// Redis Cluster places a key in one of 16384 slots by the CRC16 of its hash
// tag: the text between the first '{' and the first '}' after it, when that
// text is not empty; otherwise of the whole key. A script may only touch keys
// of one slot, so the Redis store groups a request's keys by slot.

const slots = 16384

// slotOf returns the Redis Cluster slot of key.
func slotOf(key string) uint16 {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return crc16(key) % slots
}

// hashTag returns key's hash tag, and false when the whole key is hashed.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}

// markerKey names the once-per-request marker of Reconcile in the slot of
// key: "llmguard:{<key's hash tag>}::rc:<requestID>". A key with no hash tag
// gets a short tag of the same slot instead. The empty segment keeps markers
// apart from bucket keys, "llmguard:{<tenant>}:<limit>:<subject>", whose limit
// names are never empty.
func markerKey(key, requestID string) string { return markerIn(key, "rc", requestID) }

// markerSetKey names the set of the once-per-request markers of Reconcile
// of the request ids of one epoch (markerEpoch), in the slot of key:
// "llmguard:{<key's hash tag>}::rcs:<epoch>", each id a member. Its kind,
// three letters, keeps it apart from every marker key of markerKey.
func markerSetKey(key, epoch string) string { return markerIn(key, "rcs", epoch) }

// takenSetKey names the set of the take markers of the request ids of one
// epoch (markerEpoch) whose takes committed in a batch, in the slot of key:
// "llmguard:{<key's hash tag>}::tkt:<epoch>". (A lone take keeps the id's
// marker key of takeMarkerKey; a void writes that key and voidedSetKey.)
func takenSetKey(key, epoch string) string { return markerIn(key, "tkt", epoch) }

// voidedSetKey names the set of the request ids of one epoch (markerEpoch)
// whose takes were voided, in the slot of key:
// "llmguard:{<key's hash tag>}::tkv:<epoch>". A void of such an id adds
// it there (reconcile.lua's mode 'w'), besides leaving "v" in its marker
// key of takeMarkerKey; a batch asks the set, not the marker key.
func voidedSetKey(key, epoch string) string { return markerIn(key, "tkv", epoch) }

// voidedSetOf returns the voided set of the epoch of taken, a taken set
// as takenSetKey or takenSetOf names it (voidedSetKey of the same key and
// epoch).
func voidedSetOf(taken string) string {
	i := strings.Index(taken, "}::tkt:") + len("}::tk")
	return taken[:i] + "v" + taken[i+1:]
}

// takenSetOf returns, for the take marker key of takeMarkerKey, its request
// id and the taken set of its id's epoch in its slot; ok is false for a key
// of another form or an id not of NewRequestID's form.
func takenSetOf(marker string) (set, id string, ok bool) {
	end := strings.IndexByte(marker, '}')
	if end < 0 || !strings.HasPrefix(marker[end:], "}::tk:") {
		return "", "", false
	}
	id = marker[end+len("}::tk:"):]
	epoch, ok := markerEpoch(id)
	if !ok {
		return "", "", false
	}
	return marker[:end+len("}::")] + "tkt:" + epoch, id, true
}

// takeMarkerKey names the take marker of requestID, for Void, in the slot of
// key: "llmguard:{<key's hash tag>}::tk:<requestID>", as markerKey.
func takeMarkerKey(key, requestID string) string { return markerIn(key, "tk", requestID) }

func markerIn(key, kind, requestID string) string {
	tag, ok := hashTag(key)
	if !ok {
		tag = slotTags()[slotOf(key)]
	}
	return "llmguard:{" + tag + "}::" + kind + ":" + requestID
}

// slotTags returns, for every slot, a short tag that hashes to it (the
// smallest base-36 number that does). It is built once, on first use, in a
// few milliseconds.
var slotTags = sync.OnceValue(func() *[slots]string {
	var tags [slots]string
	for i, left := 0, slots; left > 0; i++ {
		s := strconv.FormatInt(int64(i), 36)
		if slot := crc16(s) % slots; tags[slot] == "" {
			tags[slot] = s
			left--
		}
	}
	return &tags
})

// group is the items (or deltas) of one request that share a slot, by index
// in the caller's slice, in the caller's order.
type group struct {
	slot uint16
	idx  []int
}

// groupBySlot splits n keys into slot groups, ordered by each group's first
// key: with the keys narrowest first, the narrowest group comes first.
func groupBySlot(n int, key func(i int) string) []group {
	var groups []group
	for i := range n {
		s := slotOf(key(i))
		j := 0
		for j < len(groups) && groups[j].slot != s {
			j++
		}
		if j == len(groups) {
			groups = append(groups, group{slot: s})
		}
		groups[j].idx = append(groups[j].idx, i)
	}
	return groups
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster
// uses it.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
