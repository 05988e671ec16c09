package config

import (
	"os"
	"strings"
	"testing"
)

// The README's configuration reference is a valid config.
func TestREADMEConfigReferenceIsValid(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Configuration reference")
	if i < 0 {
		t.Fatal("no configuration reference in README.md")
	}
	start := strings.Index(doc[i:], "```yaml\n")
	end := strings.Index(doc[i+start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no yaml block in the configuration reference")
	}
	block := doc[i+start+8 : i+start+8+end]
	if _, err := Parse([]byte(block)); err != nil {
		t.Fatalf("README configuration reference: %v", err)
	}
}
