package weigher

import (
	"unicode"
)

// runeFlags of every code point, as a two-level table: flagBlock[r>>8] picks
// one of the distinct 256-rune blocks of flagBlocks (most of Unicode is
// unassigned or one script's letters, so a few hundred blocks cover all
// 0x110000 code points, ~100 KiB). It replaces the unicode package's range
// searches (runeFlagsSlow), which made counting non-ASCII text (CJK, emoji,
// accented letters) several times slower than ASCII. Built once at package
// initialisation from the same unicode tables runeFlagsSlow reads;
// TestFlagTableMatchesUnicode checks every code point.
var flagBlock, flagBlocks = buildFlagTable()

func buildFlagTable() ([]uint16, [][256]uint8) {
	all := make([]uint8, unicode.MaxRune+1)
	set := func(t *unicode.RangeTable, f uint8) {
		for _, r := range t.R16 {
			for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
				all[c] |= f
			}
		}
		for _, r := range t.R32 {
			for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
				all[c] |= f
			}
		}
	}
	set(unicode.Letter, fLetter)
	set(unicode.Number, fNumber)
	set(unicode.White_Space, fSpace) // unicode.IsSpace's table outside Latin-1, and the same set inside it
	for _, t := range []*unicode.RangeTable{unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M} {
		set(t, fUpper)
	}
	for _, t := range []*unicode.RangeTable{unicode.Ll, unicode.Lm, unicode.Lo, unicode.M} {
		set(t, fLower)
	}
	all['\r'] |= fNewline
	all['\n'] |= fNewline
	index := make([]uint16, len(all)>>8)
	seen := map[[256]uint8]uint16{}
	var blocks [][256]uint8
	for b := range index {
		blk := [256]uint8(all[b<<8 : b<<8+256])
		k, ok := seen[blk]
		if !ok {
			k = uint16(len(blocks))
			seen[blk] = k
			blocks = append(blocks, blk)
		}
		index[b] = k
	}
	return index, blocks
}

// flagsOf is runeFlagsSlow(r) for a valid code point r, from the table.
func flagsOf(r rune) uint8 { return flagBlocks[flagBlock[r>>8]][r&0xff] }
