package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Loading a file of nothing but white space says the file is empty (and
// nothing else): an editor that truncates before it writes makes a
// reload read one, and "upstreams: at least one upstream is required"
// named a section the file does have (trial2).
func TestLoadEmptyFileSaysSo(t *testing.T) {
	for _, body := range []string{"", "\n  \n\t\n"} {
		path := filepath.Join(t.TempDir(), "llmguard.yaml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		var ce *Error
		if !errors.As(err, &ce) || !slices.Equal(ce.Problems, []string{emptyFileProblem}) {
			t.Errorf("Load(%q) = %v, want only %q", body, err, emptyFileProblem)
		}
	}
}
