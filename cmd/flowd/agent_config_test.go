package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/daemon"
)

// agentConfigOf runs agentConfig over args as `flowd agent` parses them
// (the command's own flags, FLOWD_* variables included).
func agentConfigOf(t *testing.T, args ...string) daemon.Config {
	t.Helper()
	var got daemon.Config
	cmd := cloneCommand(agentCommand)
	cmd.Action = func(cCtx *cli.Context) error {
		c, err := agentConfig(cCtx)
		got = c
		return err
	}
	app := &cli.App{Name: "flowd", Commands: []*cli.Command{cmd}, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run(append([]string{"flowd", "agent"}, args...)); err != nil {
		t.Fatalf("agent %v: %v", args, err)
	}
	return got
}

// A flag with a default must not hide the config file's key: the file's
// state_write_window was replaced by the flag's default (100 ms) whether
// or not the flag was given.
func TestAgentStateWriteWindowFromFileUnlessFlagged(t *testing.T) {
	t.Setenv("FLOWD_STATE_WRITE_WINDOW", "") // restored after the test
	os.Unsetenv("FLOWD_STATE_WRITE_WINDOW")
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	file := "node_id: n1\ndata_dir: " + dir + "\ninsecure_plaintext: true\nstate_write_window: 250ms\n"
	if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := windowOf(agentConfigOf(t, "--config", p)); got != "250ms" {
		t.Errorf("file 250ms, no flag: got %v", got)
	}
	if got := windowOf(agentConfigOf(t, "--config", p, "--state-write-window", "20ms")); got != "20ms" {
		t.Errorf("file 250ms, flag 20ms: got %v, want the flag's", got)
	}
	if got := windowOf(agentConfigOf(t, "--config", p, "--state-write-window", "0")); got != "0s" {
		t.Errorf("flag 0 (every entry at once): got %v, want a written 0s", got)
	}
	t.Setenv("FLOWD_STATE_WRITE_WINDOW", "40ms")
	if got := windowOf(agentConfigOf(t, "--config", p)); got != "40ms" {
		t.Errorf("file 250ms, variable 40ms: got %v, want the variable's", got)
	}
	os.Unsetenv("FLOWD_STATE_WRITE_WINDOW")
	if got := windowOf(agentConfigOf(t, "--node-id", "n1", "--data-dir", dir, "--insecure-plaintext")); got != "unset" {
		t.Errorf("no file, no flag: got %v, want unset (the store's default)", got)
	}
}

// windowOf is the state write window a config holds: "unset" (the
// default) or the duration written. daemon's TestStateWriteWindowSettings
// checks what the agent makes of each.
func windowOf(c daemon.Config) string {
	if c.StateWriteWindow == nil {
		return "unset"
	}
	return c.StateWriteWindow.String()
}

// The file's 0, like the flag's, writes every entry at once.
func TestAgentStateWriteWindowZeroInFile(t *testing.T) {
	t.Setenv("FLOWD_STATE_WRITE_WINDOW", "") // restored after the test
	os.Unsetenv("FLOWD_STATE_WRITE_WINDOW")
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	for _, zero := range []string{"0s", "0", `"0"`} {
		if err := os.WriteFile(p, []byte("node_id: n1\ndata_dir: "+dir+"\ninsecure_plaintext: true\nstate_write_window: "+zero+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := windowOf(agentConfigOf(t, "--config", p)); got != "0s" {
			t.Errorf("file %s: got %v, want a written 0s (every entry at once)", zero, got)
		}
	}
}
