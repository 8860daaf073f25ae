package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// reasonCase is one reason a task waits: how to cause it, what run get and
// the wait say, and how to lift it.
type reasonCase struct {
	name   string
	setup  [][]string // flowd commands before the submission
	spec   string     // the workflow, JSON
	submit []string   // extra submit flags
	// after: commands once the run exists (RUN is its id); with any, the
	// wait is `run wait` after them instead of `submit --wait`.
	after  [][]string
	reason string
	// command is the command that lifts it (RUN is the run's id), "" when
	// only time does; warn is what the wait prints instead of the
	// command's line (no_worker has its own warning).
	command, warn string
	// lift: the commands that lift it (nil: run command as shown); the run
	// then ends with exit code done (0 succeeded, 3 failed or cancelled).
	lift [][]string
	done int
	// cleanup: commands after the case.
	cleanup [][]string
}

// Each reason a ready task waits, on real agents: `flowd submit --wait`
// (or `run wait`) prints a `waiting:` line naming it and the command that
// lifts it, `flowd run get` shows it under Waiting on, run.get carries it
// in waiting_on, and running that command lets the run finish.
func TestWhyWaitingEachReason(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and stalls runs on purpose")
	}
	c := startClusterWith(t, 3, "--idle-type-after", "1s")
	startWorker(t, c, "w1")
	addr := strings.Join(c.endpoints(), ",")
	dir := t.TempDir()
	flowd := func(args ...string) cliResult {
		return flowdCLI(t, append([]string{"--addr", addr}, args...)...)
	}
	must := func(args ...string) cliResult {
		t.Helper()
		r := flowd(args...)
		if r.code != 0 {
			t.Fatalf("flowd %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.out, r.errOut)
		}
		return r
	}
	one := func(typ, queue string) string {
		return `{"name":"why","tasks":[{"key":"a","type":"` + typ + `","queue":"` + queue + `"}]}`
	}
	// A run that keeps a task running in queue q (for the cap cases).
	holder := func(q string) []string {
		return []string{"submit", "--input", "{}", writeSpec(t, dir, `{"name":"holder","tasks":[{"key":"h","type":"long","queue":"`+q+`","input":{"Seconds":120}}]}`)}
	}
	cases := []reasonCase{
		{name: "queue paused", setup: [][]string{{"queue", "pause", "qp", "--create"}}, spec: one("echo", "qp"),
			reason: "queue_paused", command: "flowd queue resume qp"},
		{name: "paused for the run", setup: [][]string{{"queue", "pause", "qr", "--create"}}, spec: one("echo", "qr"),
			after:  [][]string{{"queue", "pause", "qr", "--run", "RUN"}, {"queue", "resume", "qr"}},
			reason: "run_paused", command: "flowd queue resume qr --run RUN"},
		{name: "interrupted", setup: [][]string{{"queue", "pause", "qi", "--create"}}, spec: one("echo", "qi"),
			after:  [][]string{{"run", "interrupt", "RUN"}, {"queue", "resume", "qi"}},
			reason: "run_interrupted", command: "flowd run resume RUN"},
		{name: "concurrency cap", setup: [][]string{{"queue", "set", "qc", "--create", "--concurrency", "1"}, holder("qc")}, spec: one("echo", "qc"),
			reason: "concurrency", command: "flowd queue set qc --concurrency N", lift: [][]string{{"queue", "set", "qc", "--concurrency", "0"}}},
		{name: "admission", setup: [][]string{{"queue", "pause", "qa", "--create"}, {"submit", writeSpec(t, dir, one("echo", "qa"))},
			{"settings", "set", "--max-running-runs", "1"}}, spec: one("echo", "default"),
			reason: "admission", command: "flowd settings set --max-running-runs N", lift: [][]string{{"settings", "set", "--max-running-runs", "0"}},
			cleanup: [][]string{{"queue", "resume", "qa"}}},
		{name: "rate limit", setup: [][]string{{"queue", "set", "ql", "--create", "--rate", "0.01"}},
			spec:   `{"name":"why","tasks":[{"key":"a","type":"echo","queue":"ql"},{"key":"b","type":"echo","queue":"ql"}]}`,
			reason: "rate_limit", command: "flowd queue set ql --rate R", lift: [][]string{{"queue", "set", "ql", "--rate", "0"}}},
		{name: "breaker open", setup: [][]string{{"settings", "set", "--breaker-failures", "1", "--breaker-cooldown", "10m"}},
			spec: one("panic", "default"), reason: "breaker_open", command: "flowd settings set --breaker-failures -1", done: 3,
			cleanup: [][]string{{"settings", "set", "--breaker-failures", "0", "--breaker-cooldown", "0s"}}},
		{name: "retry backoff", spec: `{"name":"why","tasks":[{"key":"a","type":"flaky-api","input":{"fail_first":1},
			"retry":{"max_attempts":2,"initial_backoff_ms":60000,"max_backoff_ms":60000}}]}`,
			reason: "retry_backoff", lift: [][]string{{"run", "cancel", "RUN"}}, done: 3},
		{name: "delayed start", spec: one("echo", "default"), submit: []string{"--delay", "1h"},
			reason: "start_at", lift: [][]string{{"run", "cancel", "RUN"}}, done: 3},
		{name: "no worker", spec: one("nobody", "default"), reason: "no_worker",
			command: "flowd worker run --type nobody --exec CMD", warn: "start one with `flowd worker run --type nobody --exec CMD`",
			lift: [][]string{{"run", "cancel", "RUN"}}, done: 3},
	}
	// The breaker opens on a failure before its case's run is submitted.
	runIDRE := regexp.MustCompile(`submitted: ([0-9a-f-]{36})`)
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			for _, args := range tc.setup {
				must(args...)
			}
			if tc.reason == "concurrency" {
				waitRunning(t, c, "qc", 1) // the holder's task holds the cap
			}
			if tc.reason == "breaker_open" {
				if r := flowd("submit", writeSpec(t, dir, tc.spec), "--wait", "--wait-timeout", "30s"); r.code != 3 {
					t.Fatalf("the failing run that opens the breaker: exit %d\n%s%s", r.code, r.out, r.errOut)
				}
			}
			spec := writeSpec(t, dir, tc.spec)
			var res cliResult
			if tc.after == nil {
				res = flowd(append(append([]string{"submit", spec}, tc.submit...), "--wait", "--wait-timeout", "5s")...)
			} else {
				res = must(append([]string{"submit", spec}, tc.submit...)...)
			}
			m := runIDRE.FindStringSubmatch(res.out)
			if m == nil {
				t.Fatalf("no run id in:\n%s%s", res.out, res.errOut)
			}
			id := m[1]
			sub := func(s string) string { return strings.ReplaceAll(s, "RUN", id) }
			if tc.after != nil {
				for _, args := range tc.after {
					for i := range args {
						args[i] = sub(args[i])
					}
					must(args...)
				}
				res = flowd("run", "wait", id, "--wait-timeout", "5s")
			}
			// The wait: exit 4 (still waiting), the reason on stderr.
			want := tc.warn
			if want == "" && tc.command != "" {
				want = "lift it with `" + sub(tc.command) + "`"
			}
			if res.code != 4 || !strings.Contains(res.errOut, "waiting:") && tc.warn == "" || !strings.Contains(res.errOut, want) {
				t.Fatalf("the wait: exit %d, want 4 and %q on stderr:\n%s", res.code, want, res.errOut)
			}
			// run get: the table and JSON.
			if get := must("run", "get", id); !strings.Contains(get.out, "Waiting ") || tc.command != "" && tc.reason != "no_worker" && !strings.Contains(get.out, sub(tc.command)) {
				t.Fatalf("run get does not say why (%s, %q):\n%s", tc.reason, sub(tc.command), get.out)
			}
			var run rpc.Run
			if err := json.Unmarshal([]byte(must("run", "get", id, "-o", "json").out), &run); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, w := range run.WaitingOn {
				found = found || w.Reason == tc.reason && w.Command == sub(tc.command) && w.Message != ""
			}
			if !found {
				t.Fatalf("run.get waiting_on %+v, want reason %s with command %q", run.WaitingOn, tc.reason, sub(tc.command))
			}
			// Lift it: the run finishes.
			lift := tc.lift
			if lift == nil {
				lift = [][]string{strings.Fields(strings.TrimPrefix(sub(tc.command), "flowd "))}
			}
			for _, args := range lift {
				for i := range args {
					args[i] = sub(args[i])
				}
				must(args...)
			}
			if r := flowd("run", "wait", id, "--wait-timeout", "30s"); r.code != tc.done {
				t.Fatalf("after %v: run wait exit %d, want %d\n%s%s", lift, r.code, tc.done, r.out, r.errOut)
			}
			for _, args := range tc.cleanup {
				must(args...)
			}
		})
	}
}

// waitRunning waits until queue q has n running tasks.
func waitRunning(t *testing.T, c *cluster, q string, n int) {
	t.Helper()
	cl := c.client()
	testutil.Eventually(t, 20*time.Second, 25*time.Millisecond, "queue "+q+" to run its holder", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := cl.QueueList(ctx)
		if err != nil {
			return err
		}
		for _, qq := range res.Queues {
			if qq.Name == q && qq.Running == n {
				return nil
			}
		}
		return fmt.Errorf("queues %+v", res.Queues)
	})
}

// writeSpec writes a workflow file under dir and returns its path.
func writeSpec(t testing.TB, dir, spec string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "spec-*.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(spec); err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(f.Name())
}
