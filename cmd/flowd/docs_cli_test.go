package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The CLI's own definitions against its documentation: every command and
// every flag in docs/operations.md's CLI tables (a command's flags in the
// row that names it, the global flags in the options table), every
// command in the README's synopsis.
func TestDocsNameEveryCommandAndFlag(t *testing.T) {
	app := newApp()
	ops := readDoc(t, "../../docs/operations.md")
	section := between(t, ops, "\n## The CLI\n", "\n---\n")
	rows := tableRows(section, "| command | |")
	globals := tableRows(section, "| option | env | default | |")
	readme := readDoc(t, "../../README.md")
	synopsis := between(t, between(t, readme, "\n### The CLI\n", "\n## "), "```\n", "\n```")

	for _, f := range app.Flags {
		name := f.Names()[0]
		if name == "help" || name == "version" {
			continue
		}
		if !slices.ContainsFunc(globals, func(r string) bool { return strings.Contains(r, "`--"+name+"`") }) {
			t.Errorf("docs/operations.md's global options table lacks --%s", name)
		}
	}
	var segments []string // the synopsis's alternatives: "run list|get|...", "dev", ...
	for _, line := range strings.Split(synopsis, "\n") {
		segments = append(segments, strings.Split(line, " | ")...)
	}
	for _, leaf := range leafCommands(app.Commands, nil) {
		path := leaf.path
		if !slices.ContainsFunc(segments, func(s string) bool { return names(s, path) }) {
			t.Errorf("README's CLI synopsis lacks flowd %s", strings.Join(path, " "))
		}
		var mine []string
		for _, r := range rows {
			for _, span := range codeSpans(firstCell(r)) {
				if names(span, path) {
					mine = append(mine, r)
					break
				}
			}
		}
		if len(mine) == 0 {
			t.Errorf("docs/operations.md's CLI table lacks flowd %s", strings.Join(path, " "))
			continue
		}
		// A flag is named in the command's row, or in a section of the
		// docs the row links to (the agent's flags have tables of their own).
		text := strings.Join(mine, "\n")
		for _, r := range mine {
			text += "\n" + linkedSections(t, r)
		}
		for _, f := range leaf.cmd.Flags {
			name := f.Names()[0]
			if name == "help" {
				continue
			}
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b`).MatchString(text) {
				t.Errorf("docs/operations.md's CLI table: the row of flowd %s (or a section it links to) lacks --%s", strings.Join(path, " "), name)
			}
		}
	}
}

type leafCmd struct {
	path []string
	cmd  *cli.Command
}

// leafCommands are the commands without subcommands (help aside), with
// their paths.
func leafCommands(cmds []*cli.Command, parent []string) []leafCmd {
	var out []leafCmd
	for _, c := range cmds {
		if c.Hidden || c.Name == "help" {
			continue
		}
		path := append(slices.Clone(parent), c.Name)
		subs := slices.DeleteFunc(slices.Clone(c.Subcommands), func(s *cli.Command) bool { return s.Name == "help" || s.Hidden })
		if len(subs) == 0 {
			out = append(out, leafCmd{path, c})
			continue
		}
		out = append(out, leafCommands(subs, path)...)
	}
	return out
}

// names reports whether text (words; a word may list alternatives,
// "list|get" or "list\|get") names the command path, after an optional
// leading "flowd".
func names(text string, path []string) bool {
	words := strings.Fields(strings.ReplaceAll(text, `\|`, "|"))
	if len(words) > 0 && words[0] == "flowd" {
		words = words[1:]
	}
	if len(words) < len(path) {
		return false
	}
	for i, p := range path {
		if !slices.Contains(strings.Split(words[i], "|"), p) {
			return false
		}
	}
	return true
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// between is the text after start up to end (or the end of text).
func between(t *testing.T, text, start, end string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, start)
	if !ok {
		t.Fatalf("no %q in the document", strings.TrimSpace(start))
	}
	before, _, _ := strings.Cut(after, end)
	return before
}

// tableRows are the rows of the table under header, up to its first
// line that is not a row.
func tableRows(text, header string) []string {
	_, after, ok := strings.Cut(text, header+"\n")
	if !ok {
		return nil
	}
	var rows []string
	for _, line := range strings.Split(after, "\n")[1:] { // past the |---| line
		if !strings.HasPrefix(line, "|") {
			break
		}
		rows = append(rows, line)
	}
	return rows
}

// firstCell is a row's first cell (its \| stay inside it).
func firstCell(row string) string {
	cells := regexp.MustCompile(`[^\\]\|`).Split(strings.TrimPrefix(row, "|"), -1)
	return cells[0] + "x" // the split ate the cell's last character
}

func codeSpans(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// linkedSections is the text of the sections of docs/ that row links to
// ([x](#anchor) in operations.md, [x](file.md#anchor) in another).
func linkedSections(t *testing.T, row string) string {
	t.Helper()
	var out strings.Builder
	for _, m := range regexp.MustCompile(`\]\(([a-z-]*\.md)?#([a-z0-9_-]+)\)`).FindAllStringSubmatch(row, -1) {
		file := m[1]
		if file == "" {
			file = "operations.md"
		}
		sec, ok := section(readDoc(t, "../../docs/"+file), m[2])
		if !ok {
			t.Errorf("docs/operations.md's CLI table links to %s#%s, which is no heading", file, m[2])
		}
		out.WriteString(sec + "\n")
	}
	return out.String()
}

// section is the text under the heading whose anchor is anchor, up to the
// next heading of its level or higher.
func section(doc, anchor string) (string, bool) {
	lines := strings.Split(doc, "\n")
	// heading levels, 0 for other lines and lines in code blocks
	levels := make([]int, len(lines))
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if lv := len(l) - len(strings.TrimLeft(l, "#")); !fenced && lv > 0 && strings.HasPrefix(l[lv:], " ") {
			levels[i] = lv
		}
	}
	for i, l := range lines {
		if levels[i] == 0 || slug(l[levels[i]+1:]) != anchor {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if levels[j] > 0 && levels[j] <= levels[i] {
				end = j
				break
			}
		}
		return strings.Join(lines[i:end], "\n"), true
	}
	return "", false
}

// slug is a heading's anchor as GitHub makes it.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}
