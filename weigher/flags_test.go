package weigher

import (
	"testing"
	"unicode"
)

// TestFlagTableMatchesUnicode: the flag table says what the unicode package
// says, for every code point.
func TestFlagTableMatchesUnicode(t *testing.T) {
	bad := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := flagsOf(r), runeFlagsSlow(r); got != want {
			t.Errorf("flagsOf(%U) = %08b, unicode says %08b", r, got, want)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
	t.Logf("%d distinct blocks (%d KiB)", len(flagBlocks), len(flagBlocks)/4+len(flagBlock)*2/1024)
}

func BenchmarkBuildFlagTable(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		buildFlagTable()
	}
}
