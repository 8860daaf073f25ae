package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, snapshotCommand) }

var snapshotCommand = &cli.Command{
	Name:  "snapshot",
	Usage: "save, restore and inspect state snapshots",
	Subcommands: []*cli.Command{
		{
			Name:  "save",
			Usage: "write the connected agent's state, as of its applied index, to FILE",
			Description: "FILE is written by the agent, on the agent's machine (the path is made absolute\n" +
				"here first).",
			ArgsUsage: "FILE",
			Action:    snapshotSaveAction,
		},
		{
			Name:  "restore",
			Usage: "replace the whole cluster's state with a snapshot FILE",
			Description: "The leader reads FILE on its own machine and installs it on every node; every\n" +
				"change since the snapshot is lost.",
			ArgsUsage: "FILE",
			Action:    snapshotRestoreAction,
		},
		{
			Name:      "inspect",
			Usage:     "summarize a snapshot file offline: applied index, keys per prefix, runs per state",
			ArgsUsage: "FILE",
			Action:    snapshotInspectAction,
		},
	},
}

// snapshotPathArg is the NAME argument, sent as is: the agent resolves it
// in its --snapshot-dir and refuses paths (with what to pass instead).
func snapshotPathArg(cCtx *cli.Context) (string, error) {
	if err := needArgs(cCtx, 1, 1, "NAME"); err != nil {
		return "", err
	}
	return cCtx.Args().First(), nil
}

func snapshotSaveAction(cCtx *cli.Context) error {
	path, err := snapshotPathArg(cCtx)
	if err != nil {
		return err
	}
	var res rpc.SnapshotResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.Call(ctx, rpc.MethodSnapshotSave, rpc.SnapshotParams{Path: path}, &res)
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	fmt.Fprintf(cCtx.App.Writer, "saved snapshot at index %d (%d bytes) to %s\n", res.AppliedIndex, res.Bytes, res.Path)
	return nil
}

func snapshotRestoreAction(cCtx *cli.Context) error {
	path, err := snapshotPathArg(cCtx)
	if err != nil {
		return err
	}
	var res rpc.SnapshotResult
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cCtx.Context, max(callTimeout(cCtx), time.Minute))
	defer cancel()
	if err := c.Call(ctx, rpc.MethodSnapshotRest, rpc.SnapshotParams{Path: path}, &res); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	fmt.Fprintf(cCtx.App.Writer, "restored %s (%d bytes); the cluster is at index %d\n", res.Path, res.Bytes, res.AppliedIndex)
	return nil
}

// prefixNames describe the key prefixes of fsm/keys.go.
var prefixNames = map[string]string{
	"m":   "meta (applied index, clock, settings, counters)",
	"r":   "runs",
	"rsp": "frozen run specs",
	"t":   "tasks",
	"rs":  "run-by-state index",
	"rp":  "runs waiting for admission",
	"rf":  "finished runs by time",
	"q":   "ready index",
	"qs":  "queues",
	"l":   "lease index",
	"w":   "retry / compensation wake-ups",
	"b":   "breakers",
	"e":   "events",
	"n":   "nodes",
}

type prefixCount struct {
	Prefix string `json:"prefix"`
	What   string `json:"what,omitempty"`
	Keys   int    `json:"keys"`
	Bytes  int64  `json:"bytes"`
}

// snapshotSummary is the result of snapshot inspect.
type snapshotSummary struct {
	File         string         `json:"file"`
	Size         int64          `json:"size"`
	AppliedIndex uint64         `json:"applied_index"`
	Clock        time.Time      `json:"clock,omitzero"`
	Keys         int            `json:"keys"`
	Prefixes     []prefixCount  `json:"prefixes"`
	Runs         map[string]int `json:"runs"`
	BadRuns      int            `json:"undecodable_runs,omitempty"`
}

func inspectSnapshot(path string) (*snapshotSummary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sum := &snapshotSummary{File: path, Size: st.Size(), Runs: map[string]int{}}
	counts := map[string]*prefixCount{}
	err = fsm.ReadSnapshot(f, func(k, v []byte) error {
		sum.Keys++
		pfx := string(k)
		if i := bytes.IndexByte(k, '/'); i >= 0 {
			pfx = string(k[:i])
		}
		pc := counts[pfx]
		if pc == nil {
			pc = &prefixCount{Prefix: pfx + "/", What: prefixNames[pfx]}
			counts[pfx] = pc
		}
		pc.Keys++
		pc.Bytes += int64(len(k) + len(v))
		switch {
		case string(k) == "m/applied" && len(v) == 8:
			sum.AppliedIndex = binary.BigEndian.Uint64(v)
		case string(k) == "m/now" && len(v) == 8:
			sum.Clock = time.UnixMilli(int64(binary.BigEndian.Uint64(v))).UTC()
		case pfx == "r":
			r, err := fsm.DecodeRun(v)
			if err != nil || r.State == "" {
				sum.BadRuns++
				return nil
			}
			sum.Runs[string(r.State)]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, pc := range counts {
		sum.Prefixes = append(sum.Prefixes, *pc)
	}
	sort.Slice(sum.Prefixes, func(i, j int) bool { return sum.Prefixes[i].Prefix < sum.Prefixes[j].Prefix })
	return sum, nil
}

func snapshotInspectAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "FILE"); err != nil {
		return err
	}
	path := cCtx.Args().First()
	sum, err := inspectSnapshot(path)
	if err != nil {
		return failf("is it a file written by `flowd snapshot save`?", "%s: %v", path, err)
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, sum)
	}
	tw := newTable(w)
	row(tw, "File:", sum.File)
	row(tw, "Size:", fmt.Sprintf("%d bytes", sum.Size))
	row(tw, "Applied index:", sum.AppliedIndex)
	if !sum.Clock.IsZero() {
		row(tw, "FSM clock:", sum.Clock.Format(time.RFC3339))
	}
	row(tw, "Keys:", sum.Keys)
	tw.Flush()
	fmt.Fprintln(w)
	tw = newTable(w)
	row(tw, "PREFIX", "KEYS", "BYTES", "WHAT")
	for _, pc := range sum.Prefixes {
		row(tw, pc.Prefix, pc.Keys, pc.Bytes, dash(pc.What))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = newTable(w)
	row(tw, "RUN STATE", "RUNS")
	total := 0
	for _, s := range domain.RunStates {
		if n := sum.Runs[string(s)]; n > 0 {
			row(tw, StateLabel(string(s)), n)
			total += n
		}
	}
	row(tw, "total", total)
	if sum.BadRuns > 0 {
		row(tw, "undecodable", sum.BadRuns)
	}
	return tw.Flush()
}
