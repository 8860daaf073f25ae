package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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
	if c := agentConfigOf(t, "--config", p); c.StateWriteWindow != 250*time.Millisecond {
		t.Errorf("file 250ms, no flag: got %v", c.StateWriteWindow)
	}
	if c := agentConfigOf(t, "--config", p, "--state-write-window", "20ms"); c.StateWriteWindow != 20*time.Millisecond {
		t.Errorf("file 250ms, flag 20ms: got %v, want the flag's", c.StateWriteWindow)
	}
	if c := agentConfigOf(t, "--config", p, "--state-write-window", "0"); c.StateWriteWindow >= 0 {
		t.Errorf("flag 0 (every entry at once): got %v, want negative", c.StateWriteWindow)
	}
	t.Setenv("FLOWD_STATE_WRITE_WINDOW", "40ms")
	if c := agentConfigOf(t, "--config", p); c.StateWriteWindow != 40*time.Millisecond {
		t.Errorf("file 250ms, variable 40ms: got %v, want the variable's", c.StateWriteWindow)
	}
	os.Unsetenv("FLOWD_STATE_WRITE_WINDOW")
	if c := agentConfigOf(t, "--node-id", "n1", "--data-dir", dir, "--insecure-plaintext"); c.StateWriteWindow != 0 {
		t.Errorf("no file, no flag: got %v, want 0 (the store's default)", c.StateWriteWindow)
	}
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
		if c := agentConfigOf(t, "--config", p); c.StateWriteWindow >= 0 {
			t.Errorf("file %s: got %v, want negative (every entry at once)", zero, c.StateWriteWindow)
		}
	}
}
