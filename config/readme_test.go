package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
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

// Every link of the README and of the documents it links (CHANGELOG.md,
// docs/*.md) resolves: an in-page link (`](#anchor)`) names one of the
// file's headings, as GitHub spells a heading's anchor (lower case, spaces
// to hyphens, punctuation other than hyphens and underscores dropped), and
// a relative link names a file of the repository, relative to the linking
// file, and, with an anchor, one of that file's headings: a new user
// follows them from the Quickstart on.
func TestREADMELinksResolve(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"../README.md", "../CHANGELOG.md"}, docs...)
	if len(files) < 4 {
		t.Fatalf("documents %v: docs/*.md not found", files)
	}
	readme := headingAnchors(t, "../README.md")
	if !readme["quickstart-offline"] || !readme["reports-for-finance"] {
		t.Fatalf("heading anchors not found as expected: %v", readme)
	}
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		links := linkRE.FindAllStringSubmatch(string(b), -1)
		if f == "../README.md" && len(links) < 10 {
			t.Fatalf("found %d links in README.md: the link pattern is wrong", len(links))
		}
		for _, m := range links {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := f
			if file != "" {
				dest = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", f, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !headingAnchors(t, dest)[anchor] {
				t.Errorf("%s: link %s names no heading of %s", f, target, dest)
			}
		}
	}
}

// headingAnchors is the set of GitHub anchors of the Markdown file's
// headings (outside fenced code blocks).
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[githubAnchor(strings.TrimLeft(line, "#"))] = true
	}
	return anchors
}

// githubAnchor is the anchor GitHub gives a Markdown heading's text.
func githubAnchor(heading string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			sb.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// Every config the README writes with a shell here-document
// (`cat > x.yaml <<'EOF'` … `EOF`), which a new user pastes as it is,
// is a valid config.
func TestREADMEHereDocConfigsAreValid(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := regexp.MustCompile(`(?s)cat > \S+\.yaml <<'EOF'\n(.*?)\nEOF\n`).FindAllStringSubmatch(string(b), -1)
	if len(docs) == 0 {
		t.Fatal("no here-document config in README.md: the pattern is wrong")
	}
	for i, m := range docs {
		if _, err := Parse([]byte(m[1])); err != nil {
			t.Errorf("README here-document config %d: %v\n%s", i, err, m[1])
		}
	}
}
