package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// A start-up failure that is not a config's problems reads as every other
// error serve prints, "llmguard: …"; a config's problems keep their
// "<file>: invalid configuration:" heading, one problem a line.
func TestPrintConfigErrorPrefixesOtherErrors(t *testing.T) {
	var b strings.Builder
	printConfigError(&b, "/etc/llmguard.yaml", errors.New("app: ledger: ledger.jsonl is written by another process"))
	if got, want := b.String(), "llmguard: app: ledger: ledger.jsonl is written by another process\n"; got != want {
		t.Errorf("other error printed %q, want %q", got, want)
	}
	b.Reset()
	printConfigError(&b, "/etc/llmguard.yaml", &config.Error{Problems: []string{"limits[0].rate: must be positive"}})
	if got, want := b.String(), "/etc/llmguard.yaml: invalid configuration:\n  - limits[0].rate: must be positive\n"; got != want {
		t.Errorf("config problems printed %q, want %q", got, want)
	}
}
