package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestReorderArgs(t *testing.T) {
	app := newApp()
	cases := []struct{ in, want string }{
		// Flags after the positional move before it; bool flags take no value.
		{"submit wf.yaml --wait --timeout 5s", "submit --wait --timeout 5s wf.yaml"},
		{"submit wf.yaml --wait extra", "submit --wait wf.yaml extra"},
		{"submit wf.yaml --label a=1 -l b=2 --input={}", "submit --label a=1 -l b=2 --input={} wf.yaml"},
		// Global flags given after the command go to the front.
		{"run get ID --output json", "--output json run get ID"},
		{"run get ID -o=json --addr /x.sock", "-o=json --addr /x.sock run get ID"},
		{"--addr /a.sock run list --state failed", "--addr /a.sock run list --state failed"},
		{"--addr /a.sock run --output json list", "--addr /a.sock --output json run list"},
		// A command's own flag of the same name as a global one stays.
		{"run wait ID --timeout 3s", "run wait --timeout 3s ID"},
		{"run wait ID --timeout 3s -o json", "-o json run wait --timeout 3s ID"},
		// Aliases of subcommands and of the help flag.
		{"help run", "help run"},
		{"run get ID -h", "run get -h ID"},
		// "--" ends the flags: what follows stays an argument.
		{"validate -- --weird.yaml", "validate -- --weird.yaml"},
		{"validate x.yaml -o json -- --y", "-o json validate -- x.yaml --y"},
		// "-" (stdin) and negative numbers are arguments or values.
		{"validate - -o json", "-o json validate -"},
		{"settings set --breaker-failures -1", "settings set --breaker-failures -1"},
		{"queue set q1 --concurrency 3", "queue set --concurrency 3 q1"},
		{"operator raft add-peer n4 127.0.0.1:7004 --timeout 3s", "--timeout 3s operator raft add-peer n4 127.0.0.1:7004"},
		// Unknown flags are kept where the command can report them.
		{"run get ID --bogus", "run get --bogus ID"},
		// The completion flag stays last.
		{"run get ID --output json --generate-bash-completion", "--output json run get ID --generate-bash-completion"},
	}
	for _, c := range cases {
		got := strings.Join(reorderArgs(app, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("reorder(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestShortID(t *testing.T) {
	id := "0192f1a4-7b2c-7def-8abc-3f9a1c2b7d4e"
	if s := shortID(id); s != "3f9a1c2b7d4e" || !strings.Contains(id, s) {
		t.Fatalf("shortID = %q", s)
	}
	if s := shortID("abc"); s != "abc" {
		t.Fatalf("shortID(abc) = %q", s)
	}
}

func TestStateGlyphs(t *testing.T) {
	for _, s := range []string{"pending", "ready", "running", "retrying", "succeeded", "failed", "skipped", "cancelled", "interrupted", "reverting", "reverted"} {
		if g := StateGlyph(s); g == "?" || StateLabel(s) != g+" "+s {
			t.Errorf("state %s: glyph %q label %q", s, g, StateLabel(s))
		}
	}
	if StateGlyph("bogus") != "?" {
		t.Error("unknown state has a glyph")
	}
}

func TestParseLabels(t *testing.T) {
	got, err := parseLabels(nil, []string{"team=data", "list=a", "b", "x="})
	if err != nil {
		t.Fatal(err)
	}
	if got["team"] != "data" || got["list"] != "a,b" || got["x"] != "" || len(got) != 3 {
		t.Fatalf("labels %v", got)
	}
	if _, err := parseLabels(nil, []string{"novalue"}); err == nil {
		t.Fatal("label without = accepted")
	}
}

// The app can be built and run many times in one process (commands are
// cloned from their templates each time).
func TestAppRunsRepeatedly(t *testing.T) {
	for range 3 {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"flowd", "run", "list", "--help"}, nil, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "--state") || !strings.Contains(out.String(), "GLOBAL OPTIONS") {
			t.Fatalf("code %d\n%s\n%s", code, out.String(), errb.String())
		}
		if n := strings.Count(out.String(), "--help, -h"); n != 1 {
			t.Fatalf("help flag listed %d times:\n%s", n, out.String())
		}
	}
	// Every flag of every command reads a FLOWD_* variable.
	app := newApp()
	for _, f := range app.Flags {
		if !hasFlowdEnv(f) {
			t.Errorf("global flag %v has no FLOWD_* variable", f.Names())
		}
	}
	var check func(c *cliCommand, path string)
	check = func(c *cliCommand, path string) {
		for _, f := range c.Flags {
			if !hasFlowdEnv(f) {
				t.Errorf("%s: flag %v has no FLOWD_* variable", path, f.Names())
			}
		}
		for _, s := range c.Subcommands {
			check(s, path+" "+s.Name)
		}
	}
	for _, c := range app.Commands {
		check(c, c.Name)
	}
	if !slices.IsSortedFunc(app.Commands, func(a, b *cliCommand) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("commands are not sorted")
	}
}

type cliCommand = cli.Command

func hasFlowdEnv(f cli.Flag) bool {
	ef, ok := f.(interface{ GetEnvVars() []string })
	if !ok {
		return false
	}
	for _, e := range ef.GetEnvVars() {
		if strings.HasPrefix(e, "FLOWD_") {
			return true
		}
	}
	return false
}
