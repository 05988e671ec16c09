package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// maxDockerfileBytes bounds what parseDockerfile reads.
const maxDockerfileBytes = 1 << 20

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line  int      // 1-based line of its first line
	cmd   string   // upper case: FROM, RUN, COPY, …
	flags []string // leading --name=value words (COPY --from=build), as written
	// args are the JSON array's strings in exec form (json true), else the
	// rest of the instruction split on white space.
	args []string
	json bool
	raw  string // everything after the instruction's name, flags included
}

// errHeredoc is returned for a here-document (RUN <<EOF), which this
// parser does not read.
var errHeredoc = errors.New("here-documents are not supported")

// parseDockerfile reads a Dockerfile as the reference describes it
// (https://docs.docker.com/reference/dockerfile/#format): parser
// directives (only escape= changes parsing, to \ or `), comment lines
// starting with #, which are also dropped inside a continued instruction,
// a line ending in the escape character continued by the next, and
// instructions as a name followed by arguments, in exec form when they are
// a JSON array of strings and in shell form otherwise. Errors: input over
// maxDockerfileBytes, an unknown escape character, a line that starts with
// something other than an instruction name, an instruction without
// arguments, a continuation at the end of the file, and a here-document
// (errHeredoc).
func parseDockerfile(src string) ([]instruction, error) {
	if len(src) > maxDockerfileBytes {
		return nil, fmt.Errorf("dockerfile: %d bytes, over %d", len(src), maxDockerfileBytes)
	}
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	escape := byte('\\')
	i := 0
	// Parser directives: "# key=value" lines before anything else.
	for ; i < len(lines); i++ {
		k, v, ok := directive(lines[i])
		if !ok {
			break
		}
		if k == "escape" {
			if v != `\` && v != "`" {
				return nil, fmt.Errorf("dockerfile: line %d: escape must be \\ or `, not %q", i+1, v)
			}
			escape = v[0]
		}
	}
	var out []instruction
	for i < len(lines) {
		start := i
		text := strings.TrimSpace(lines[i])
		i++
		if text == "" || text[0] == '#' {
			continue
		}
		var b strings.Builder
		for {
			cont := strings.HasSuffix(text, string(escape))
			if cont {
				text = text[:len(text)-1]
			}
			b.WriteString(text)
			if !cont {
				break
			}
			// Comment and empty lines inside a continuation are dropped.
			for i < len(lines) {
				t := strings.TrimSpace(lines[i])
				if t != "" && t[0] != '#' {
					break
				}
				i++
			}
			if i == len(lines) {
				return nil, fmt.Errorf("dockerfile: line %d: the instruction is continued past the end of the file", start+1)
			}
			b.WriteByte(' ')
			text = strings.TrimSpace(lines[i])
			i++
		}
		in, err := parseInstruction(b.String())
		if err != nil {
			return nil, fmt.Errorf("dockerfile: line %d: %w", start+1, err)
		}
		in.line = start + 1
		out = append(out, in)
	}
	return out, nil
}

// directive reads a parser directive line, "# name=value".
func directive(line string) (name, value string, ok bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "#") {
		return "", "", false
	}
	k, v, ok := strings.Cut(strings.TrimSpace(t[1:]), "=")
	k = strings.ToLower(strings.TrimSpace(k))
	if !ok || k == "" || strings.ContainsFunc(k, unicode.IsSpace) {
		return "", "", false
	}
	return k, strings.TrimSpace(v), true
}

// parseInstruction splits one joined instruction into name, flags and
// arguments.
func parseInstruction(s string) (instruction, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	if name == "" {
		return instruction{}, errors.New("an empty instruction")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return instruction{}, fmt.Errorf("%.40q does not start with an instruction name", s)
		}
	}
	in := instruction{cmd: strings.ToUpper(name), raw: strings.TrimSpace(rest)}
	rest = in.raw
	if rest == "" {
		return instruction{}, fmt.Errorf("%s without arguments", in.cmd)
	}
	if strings.Contains(rest, "<<") && (in.cmd == "RUN" || in.cmd == "COPY" || in.cmd == "ADD") {
		return instruction{}, errHeredoc
	}
	for strings.HasPrefix(rest, "--") { // COPY --from=, RUN --mount=, FROM --platform=
		f, r, _ := strings.Cut(rest, " ")
		in.flags = append(in.flags, f)
		rest = strings.TrimSpace(r)
	}
	if strings.HasPrefix(rest, "[") {
		var arr []string
		if json.Unmarshal([]byte(rest), &arr) == nil {
			in.args, in.json = arr, true
			return in, nil
		}
		// Not a JSON array of strings: shell form, as Docker reads it.
	}
	in.args = strings.Fields(rest)
	return in, nil
}

// flag returns the value of the instruction's --name=value flag.
func (in instruction) flag(name string) (string, bool) {
	for _, f := range in.flags {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestParseDockerfile(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\n# escape=\\\n\n" +
		"ARG V=1\n" +
		"FROM golang:${V} AS build\n" +
		"# a comment\n" +
		"RUN a \\\n  # dropped\n\n  && b\n" +
		"COPY --from=build --chown=1:1 /out/x /usr/local/bin/x\n" +
		"ENTRYPOINT [\"/usr/local/bin/x\", \"-l\"]\n" +
		"CMD [not json\n" +
		"user nonroot\n"
	got, err := parseDockerfile(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []instruction{
		{line: 4, cmd: "ARG", args: []string{"V=1"}},
		{line: 5, cmd: "FROM", args: []string{"golang:${V}", "AS", "build"}},
		{line: 7, cmd: "RUN", args: []string{"a", "&&", "b"}},
		{line: 11, cmd: "COPY", flags: []string{"--from=build", "--chown=1:1"}, args: []string{"/out/x", "/usr/local/bin/x"}},
		{line: 12, cmd: "ENTRYPOINT", args: []string{"/usr/local/bin/x", "-l"}, json: true},
		{line: 13, cmd: "CMD", args: []string{"[not", "json"}},
		{line: 14, cmd: "USER", args: []string{"nonroot"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d instructions, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.line != w.line || g.cmd != w.cmd || g.json != w.json || fmt.Sprint(g.flags) != fmt.Sprint(w.flags) || fmt.Sprint(g.args) != fmt.Sprint(w.args) {
			t.Errorf("instruction %d = %+v, want %+v", i, g, w)
		}
	}
	if v, _ := got[3].flag("from"); v != "build" {
		t.Errorf("COPY --from = %q, want build", v)
	}

	backtick, err := parseDockerfile("# escape=`\nRUN a `\n b\n")
	if err != nil || len(backtick) != 1 || fmt.Sprint(backtick[0].args) != "[a b]" {
		t.Errorf("escape=`: %+v, %v", backtick, err)
	}
	for _, bad := range []string{
		"RUN a \\\n",           // continued past the end
		"FROM\n",               // no arguments
		"=x y\n",               // not an instruction
		"RUN <<EOF\nls\nEOF\n", // here-document
		"# escape=x\nFROM a\n", // bad escape
		strings.Repeat("#", maxDockerfileBytes+1),
	} {
		if _, err := parseDockerfile(bad); err == nil {
			t.Errorf("parseDockerfile(%.30q) accepted it", bad)
		}
	}
}

// FuzzParseDockerfile feeds the parser arbitrary text: it must not panic,
// and what it returns must be well formed.
func FuzzParseDockerfile(f *testing.F) {
	f.Add("FROM a AS b\nRUN x \\\n y\nCOPY --from=b /a /b\nCMD [\"x\"]\n")
	f.Add("# escape=`\nRUN a `\n# c\n b\n")
	f.Add("RUN a \\")
	f.Add("\r\n\t#\n[\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		ins, err := parseDockerfile(src)
		if err != nil {
			return
		}
		prev := 0
		for _, in := range ins {
			if in.cmd == "" || strings.ToUpper(in.cmd) != in.cmd || in.line <= prev {
				t.Fatalf("malformed instruction %+v after line %d", in, prev)
			}
			prev = in.line
		}
	})
}
