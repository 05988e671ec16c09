package spec

import "testing"

// ParseSearchContextSize reads the three sizes in any case and with space
// around them, "" as none, and any other name as the dearest.
func TestParseSearchContextSize(t *testing.T) {
	for in, want := range map[string]SearchContextSize{
		"": SearchContextNone, "  ": SearchContextNone, "low": SearchContextLow, " LOW ": SearchContextLow,
		"Medium": SearchContextMedium, "high": SearchContextHigh, "huge": SearchContextHigh, "lowest": SearchContextHigh,
	} {
		if got := ParseSearchContextSize(in); got != want {
			t.Errorf("ParseSearchContextSize(%q) = %v, want %v", in, got, want)
		}
	}
}
