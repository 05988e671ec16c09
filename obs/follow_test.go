package obs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAccessLogFollowsItsPath: an access log file removed or moved while
// llmguard runs (rm, logrotate without copytruncate) is made again at its
// path within followEvery, and the lines after that are in it. Before,
// lumberjack kept writing to its open descriptor: every later line went to
// the unlinked (or moved) file until the next rotation.
func TestAccessLogFollowsItsPath(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(path string) error
	}{
		{name: "removed", remove: os.Remove},
		{name: "moved", remove: func(path string) error { return os.Rename(path, path+".1") }},
		{name: "replaced", remove: func(path string) error {
			if err := os.Rename(path, path+".1"); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o600) // logrotate's create
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "access.log")
			w, closeW, err := OpenOutput(path, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer closeW()
			now := time.Unix(1_700_000_000, 0)
			f, ok := w.(*followingFile)
			if !ok {
				t.Fatalf("OpenOutput gave a %T, want a *followingFile", w)
			}
			f.now = func() time.Time { return now }
			write := func(line string) {
				t.Helper()
				if _, err := w.Write([]byte(line + "\n")); err != nil {
					t.Fatal(err)
				}
			}
			write("one")
			if err := tc.remove(path); err != nil {
				t.Fatal(err)
			}
			write("two") // within followEvery of the last look: may go to the old file
			now = now.Add(followEvery)
			write("three")
			write("four")
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("the path after the file was %s: %v", tc.name, err)
			}
			if !strings.HasSuffix(string(got), "three\nfour\n") || strings.Contains(string(got), "one") {
				t.Errorf("%s after the file was %s holds %q, want the lines from three on", path, tc.name, got)
			}
		})
	}
}
