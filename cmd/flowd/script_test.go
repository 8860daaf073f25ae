package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// TestMain registers the flowd command for the testscript suite: scripts
// run it as a program, in-process builds of this test binary.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"flowd": func() { os.Exit(run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar: the offline commands, and the
// client commands against a cluster a script starts (script_cluster_test.go).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: scriptCmds(),
		Setup: func(env *testscript.Env) error {
			// No agent is reachable from a script unless it starts one.
			env.Setenv("FLOWD_ADDR", "unix://"+env.WorkDir+"/none.sock")
			env.Setenv("NO_COLOR", "1")
			return setupScriptState(env)
		},
	})
}

func scriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	cmds := map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"mksnapshot": cmdMakeSnapshot,
	}
	maps.Copy(cmds, clusterCmds)
	return cmds
}

// cmdMakeSnapshot writes a snapshot file of an in-memory state machine with
// N runs submitted (mksnapshot FILE N).
func cmdMakeSnapshot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mksnapshot FILE N")
	}
	var n int
	if _, err := fmt.Sscan(args[1], &n); err != nil {
		ts.Fatalf("N: %v", err)
	}
	if err := makeSnapshot(ts.MkAbs(args[0]), n); err != nil {
		ts.Fatalf("mksnapshot: %v", err)
	}
}

// makeSnapshot applies n submissions of a two-task workflow to a fresh
// in-memory FSM and saves its snapshot at path.
func makeSnapshot(path string, n int) error {
	f, err := fsm.New(store.NewMemStore(), fsm.Options{})
	if err != nil {
		return err
	}
	spec, err := domain.ParseSpec(json.RawMessage(`{"name":"snap","tasks":[{"key":"a","type":"echo"},{"key":"b","type":"echo","deps":["a"]}]}`), domain.DefaultLimits)
	if err != nil {
		return err
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	for i := range n {
		cmd := &fsm.Submit{ID: fmt.Sprintf("0194a000-0000-7000-8000-%012d", i+1), Spec: spec}
		cmd.Stamp(at + int64(i))
		b, err := fsm.Encode(cmd)
		if err != nil {
			return err
		}
		if res := f.Apply(fsm.Entry{Index: uint64(i + 1), Data: b}); res != nil {
			if err, ok := res.(error); ok {
				return err
			}
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := snap.WriteTo(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
