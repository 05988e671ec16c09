//go:build unix

package app

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// `validate` (and `serve`, a reload) refuses a ledger.file that exists
// and is not a regular file: a directory, or a FIFO, whose open blocked
// `serve` before it listened (adv48).
func TestValidateLedgerFile(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	cases := map[string]string{
		dir:                                "not a regular file",
		filepath.Join(dir, "ledger.jsonl"): "",
	}
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		cases[fifo] = "not a regular file"
	}
	for file, want := range cases {
		cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf("ledger: {file: %q}\n", file))))
		if err != nil {
			t.Fatal(err)
		}
		findings, err := CheckConfig(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		fatal := Fatal(findings)
		switch {
		case want == "" && len(fatal) > 0:
			t.Errorf("%s: refused: %v", file, fatal)
		case want != "" && (len(fatal) != 1 || !strings.Contains(fatal[0].String(), "ledger.file") || !strings.Contains(fatal[0].String(), want)):
			t.Errorf("%s: findings %v, want one naming ledger.file saying %q", file, findings, want)
		}
	}
}
