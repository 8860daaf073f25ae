package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
			Usage: "write the leader's state (or --node's), as of its applied index, to NAME in its --snapshot-dir, or to a local --out FILE",
			Description: "With NAME, the agent writes the file into its own --snapshot-dir (a file name, not a\n" +
				"path). With --out FILE the snapshot streams over the connection into FILE on this\n" +
				"machine (\"-\": standard output), checked against its size and SHA-256. Whichever agent\n" +
				"the CLI is connected to, the leader takes the snapshot unless --node names another.",
			ArgsUsage: "[NAME]",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", EnvVars: []string{"FLOWD_SNAPSHOT_OUT"}, TakesFile: true, Usage: "stream the snapshot into this local `FILE` (- for standard output) instead of a NAME on the agent"},
				&cli.StringFlag{Name: "node", EnvVars: []string{"FLOWD_SNAPSHOT_NODE"}, Usage: "the agent `ID` whose state is saved", DefaultText: "the leader"},
			},
			Action: snapshotSaveAction,
		},
		{
			Name:  "restore",
			Usage: "replace the whole cluster's state with snapshot NAME from the leader's --snapshot-dir, or a local --in FILE",
			Description: "The leader installs the snapshot on every node; every change since the snapshot is\n" +
				"lost. With NAME the leader reads the file from its --snapshot-dir; with --in FILE the\n" +
				"file is uploaded over the connection (\"-\": standard input), and restored only if all\n" +
				"of it arrived intact (size and SHA-256).",
			ArgsUsage: "[NAME]",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "in", EnvVars: []string{"FLOWD_SNAPSHOT_IN"}, TakesFile: true, Usage: "upload this local `FILE` (- for standard input) instead of reading NAME on the leader"},
			},
			Action: snapshotRestoreAction,
		},
		{
			Name:      "inspect",
			Usage:     "summarize a snapshot file offline: applied index, keys per prefix, runs per state",
			ArgsUsage: "FILE",
			Action:    snapshotInspectAction,
		},
	},
}

// snapshotTarget is the NAME argument, sent as is (the agent resolves it in
// its --snapshot-dir and refuses paths, with what to pass instead), or the
// local file of flag (--out, --in); exactly one of them.
func snapshotTarget(cCtx *cli.Context, flag string) (name, local string, err error) {
	local = cCtx.String(flag)
	if local != "" {
		if cCtx.NArg() > 0 {
			return "", "", usageErr(cCtx, "pass NAME (a file in the agent's --snapshot-dir) or --%s FILE (a local file), not both", flag)
		}
		return "", local, nil
	}
	if cCtx.NArg() == 0 {
		return "", "", usageErr(cCtx, "missing NAME (a file name in the agent's --snapshot-dir) or --%s FILE (a local file)", flag)
	}
	if err := needArgs(cCtx, 1, 1, "NAME"); err != nil {
		return "", "", err
	}
	return cCtx.Args().First(), "", nil
}

func snapshotSaveAction(cCtx *cli.Context) error {
	name, out, err := snapshotTarget(cCtx, "out")
	if err != nil {
		return err
	}
	node := cCtx.String("node")
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	var res rpc.SnapshotResult
	w := cCtx.App.Writer
	switch out {
	case "":
		ctx, cancel := context.WithTimeout(cCtx.Context, max(callTimeout(cCtx), time.Minute))
		defer cancel()
		err = c.Call(ctx, rpc.MethodSnapshotSave, rpc.SnapshotParams{Path: name, Leader: node == "", Node: node}, &res)
	case "-":
		res, err = downloadSnapshot(cCtx, cCtx.Context, c, node, cCtx.App.Writer)
		w = cCtx.App.ErrWriter // the snapshot is on standard output
	default:
		res, err = saveToFile(cCtx, cCtx.Context, c, node, out)
	}
	if err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(w, res)
	}
	where := res.Path
	if out == "-" {
		where = "standard output"
	} else if out == "" {
		where = res.Path + " on " + res.Node
	}
	fmt.Fprintf(w, "saved %s's snapshot at index %d (%d bytes, sha256 %s) to %s\n", res.Node, res.AppliedIndex, res.Bytes, res.SHA256, where)
	return nil
}

func snapshotRestoreAction(cCtx *cli.Context) error {
	name, in, err := snapshotTarget(cCtx, "in")
	if err != nil {
		return err
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	var res rpc.SnapshotResult
	switch in {
	case "":
		ctx, cancel := context.WithTimeout(cCtx.Context, max(callTimeout(cCtx), 2*time.Minute))
		defer cancel()
		err = c.Call(ctx, rpc.MethodSnapshotRestore, rpc.SnapshotParams{Path: name}, &res)
	case "-":
		res, err = uploadSnapshot(cCtx, cCtx.Context, c, cCtx.App.Reader)
		res.Path = "standard input"
	default:
		var f *os.File
		if f, err = os.Open(in); err != nil {
			return failf("pass a file written by `flowd snapshot save --out`", "%v", err)
		}
		defer f.Close()
		// Check it here first: a file that is not a complete snapshot
		// is not worth uploading.
		if err := fsm.ReadSnapshot(f, func(k, v []byte) error { return nil }); err != nil {
			return failf("pass a file written by `flowd snapshot save --out`; `flowd snapshot inspect FILE` shows what it holds", "%s: %v (nothing was restored)", in, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		res, err = uploadSnapshot(cCtx, cCtx.Context, c, f)
		res.Path, _ = filepath.Abs(in)
	}
	if err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	fmt.Fprintf(cCtx.App.Writer, "restored %s (%d bytes) through leader %s in %s; the cluster is at index %d\n",
		res.Path, res.Bytes, res.Node, time.Since(start).Round(time.Millisecond), res.AppliedIndex)
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
