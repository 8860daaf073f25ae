package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// Backups that need no hands (docs/operations.md, "Backups"): snapshots
// taken on the leader whichever agent the CLI reaches, streamed over the
// connection to and from local files, refused when damaged, and taken on
// a schedule with retention.

// cli runs the flowd binary against sock and returns its combined output.
func cli(t *testing.T, sock string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(flowdBin, append([]string{"--addr", "unix://" + sock, "--route", "any", "--timeout", "30s"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustCLI(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := cli(t, sock, args...)
	if err != nil {
		t.Fatalf("flowd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// A save through a follower is taken on the leader and lands in the
// leader's --snapshot-dir; --node picks another agent.
func TestSnapshotSaveRunsOnTheLeaderFromAFollower(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.waitLeader()
	fs := c.followers(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.client().RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"kept","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, fs[0].sock, "snapshot", "save", "s1", "-o", "json")
	var res rpc.SnapshotResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Node != leader.id || res.Path != filepath.Join(leader.dir, "snapshots", "s1") || len(res.SHA256) != 64 {
		t.Fatalf("save through follower %s: %+v, want it on leader %s", fs[0].id, res, leader.id)
	}
	if _, err := os.Stat(res.Path); err != nil {
		t.Fatalf("not on the leader: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fs[0].dir, "snapshots", "s1")); !os.IsNotExist(err) {
		t.Fatalf("the connected follower wrote the file too (%v)", err)
	}
	// --node: the other follower, reached through the first.
	out = mustCLI(t, fs[0].sock, "snapshot", "save", "--node", fs[1].id, "s2")
	if !strings.Contains(out, "saved "+fs[1].id+"'s snapshot") {
		t.Fatalf("save --node %s: %s", fs[1].id, out)
	}
	if _, err := os.Stat(filepath.Join(fs[1].dir, "snapshots", "s2")); err != nil {
		t.Fatalf("--node %s: %v", fs[1].id, err)
	}
	if out, err := cli(t, fs[0].sock, "snapshot", "save", "--node", "n9", "s3"); err == nil || !strings.Contains(out, `no member "n9"`) {
		t.Fatalf("save --node n9: %v\n%s", err, out)
	}
	// And restore through a follower reads the leader's directory.
	if out := mustCLI(t, fs[1].sock, "snapshot", "restore", "s1"); !strings.Contains(out, "through leader "+leader.id) {
		t.Fatalf("restore s1: %s", out)
	}
	// Standard output to standard input: save --out - | restore --in -.
	save := exec.Command(flowdBin, "--addr", "unix://"+fs[0].sock, "--timeout", "30s", "snapshot", "save", "--out", "-")
	var snap, msg bytes.Buffer
	save.Stdout, save.Stderr = &snap, &msg
	if err := save.Run(); err != nil || !strings.Contains(msg.String(), "to standard output") {
		t.Fatalf("save --out -: %v\n%s", err, msg.String())
	}
	if !bytes.HasPrefix(snap.Bytes(), []byte("FLOWDSNAP")) || !strings.Contains(msg.String(), fmt.Sprintf("%x", sha256.Sum256(snap.Bytes()))) {
		t.Fatalf("standard output is not the snapshot the agent hashed (%d bytes)\n%s", snap.Len(), msg.String())
	}
	restore := exec.Command(flowdBin, "--addr", "unix://"+fs[1].sock, "--timeout", "30s", "snapshot", "restore", "--in", "-")
	restore.Stdin = &snap
	if out, err := restore.CombinedOutput(); err != nil || !strings.Contains(string(out), "restored standard input") {
		t.Fatalf("restore --in -: %v\n%s", err, out)
	}
}

// runFacts are what a restore must bring back of a run.
type runFacts struct {
	State string
	Tasks []string // key state attempt result error
}

// allRuns reads every run with its tasks from a.
func allRuns(t *testing.T, cl *rpc.Client) map[string]runFacts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ids []string
	cursor := ""
	for {
		page, err := cl.RunList(ctx, rpc.ListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	out := make(map[string]runFacts, len(ids))
	var mu sync.Mutex
	errs := make(chan error, 8)
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				r, err := cl.RunGet(ctx, id)
				if err != nil {
					errs <- fmt.Errorf("run %s: %w", id, err)
					return
				}
				f := runFacts{State: string(r.State)}
				for _, tk := range r.Tasks {
					var res bytes.Buffer
					_ = json.Compact(&res, tk.Result)
					f.Tasks = append(f.Tasks, fmt.Sprintf("%s %s %d %s %q", tk.Key, tk.State, tk.Attempt, res.String(), tk.Error))
				}
				mu.Lock()
				out[id] = f
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		select {
		case work <- id:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return out
}

// claim claims as a worker does: again after a -32004 (a leader change
// during the wait), until ctx ends.
func claim(ctx context.Context, cl *rpc.Client, p rpc.ClaimParams) ([]rpc.Claimed, error) {
	for {
		got, err := cl.TaskClaim(ctx, p)
		if !errors.Is(err, domain.ErrUnavailable) || ctx.Err() != nil {
			return got, err
		}
	}
}

// makeRuns submits n one-task runs and drives them into every kind of
// state: 70% succeeded with a result, 10% failed, 10% cancelled, 10% left
// with a ready task.
func makeRuns(t *testing.T, cl *rpc.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kind := func(i int) string {
		switch i % 10 {
		case 7:
			return "bad"
		case 8, 9:
			return "idle"
		}
		return "ok"
	}
	// The failures are on purpose: no breaker holds the type back.
	if err := cl.CallIdempotent(ctx, rpc.MethodSettingsSet, map[string]any{"breaker_failures": -1}, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	cancelled := make(chan string, n)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				wf := fmt.Sprintf(`{"name":"drill","tasks":[{"key":"a","type":%q,"input":{"i":%d}}]}`, kind(i), i)
				// An id makes the submit safe to retry across a leader change.
				res, err := cl.RunSubmit(ctx, rpc.SubmitParams{ID: uuid.Must(uuid.NewV7()).String(), Workflow: json.RawMessage(wf), Labels: map[string]string{"i": strconv.Itoa(i)}})
				if err != nil {
					errs <- err
					return
				}
				if i%10 == 8 {
					cancelled <- res.ID
				}
			}
		}()
	}
	wg.Wait()
	close(cancelled)
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for id := range cancelled {
		if _, err := cl.RunVerb(ctx, rpc.MethodRunCancel, id, "drill"); err != nil {
			t.Fatal(err)
		}
	}
	// Work the ok and bad tasks off.
	want := n/10*8 + max(0, min(n%10, 8))
	done := 0
	no := false
	for done < want {
		got, err := claim(ctx, cl, rpc.ClaimParams{WorkerID: "drill", Types: []string{"ok", "bad"}, Max: 64, WaitMS: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("no more tasks after %d of %d", done, want)
		}
		for _, tk := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var in struct{ I int }
				_ = json.Unmarshal(tk.Input, &in)
				var err error
				if tk.Type == "bad" {
					_, err = cl.TaskFail(ctx, rpc.FailParams{TaskID: tk.TaskID, FencingToken: tk.FencingToken, Error: fmt.Sprintf("bad input %d", in.I), Retryable: &no})
				} else {
					_, err = cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: tk.TaskID, FencingToken: tk.FencingToken,
						Result: json.RawMessage(fmt.Sprintf(`{"i":%d,"out":"r-%d"}`, in.I, in.I))})
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		done += len(got)
	}
}

// The restore drill of docs/operations.md ("Backups"), between real
// processes: save a running 3-agent cluster's snapshot over a follower's
// connection into a local file, start a fresh 3-agent cluster, upload the
// file through one of its followers, and check that every run is there
// with its states and results and that the cluster takes writes.
// FLOWD_DRILL_RUNS sets the number of runs (default 1000).
func TestSnapshotRestoreDrill(t *testing.T) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("FLOWD_DRILL_RUNS")); err == nil && v > 0 {
		n = v
	}
	old := startCluster(t, 3)
	oldLeader := old.waitLeader()
	oldCl := old.client()
	t0 := time.Now()
	makeRuns(t, oldCl, n)
	t.Logf("%d runs made in %s", n, time.Since(t0).Round(time.Millisecond))
	want := allRuns(t, old.client(oldLeader))
	if len(want) != n {
		t.Fatalf("%d runs on the old cluster, want %d", len(want), n)
	}

	file := filepath.Join(t.TempDir(), "backup.snap")
	oldLeader = old.waitLeader() // (the load of makeRuns may have moved it)
	t0 = time.Now()
	out := mustCLI(t, old.followers(oldLeader)[0].sock, "snapshot", "save", "--out", file, "-o", "json")
	saveTook := time.Since(t0)
	var saved rpc.SnapshotResult
	if err := json.Unmarshal([]byte(out), &saved); err != nil || saved.Path != file {
		t.Fatalf("save --out: %v\n%s", err, out)
	}
	st, err := os.Stat(file)
	if err != nil || st.Size() != saved.Bytes {
		t.Fatalf("save --out: %v %v, want %d bytes", st, err, saved.Bytes)
	}
	// No temporary copy is left on the agent once the download ended.
	for _, a := range old.agents {
		if left, _ := filepath.Glob(filepath.Join(a.dir, "snapshots", ".flowd-tmp-*")); len(left) > 0 {
			t.Fatalf("temporary files left on %s: %v", a.id, left)
		}
	}
	old.stopAll()

	fresh := startCluster(t, 3)
	freshLeader := fresh.waitLeader()
	via := fresh.followers(freshLeader)[0]
	t0 = time.Now()
	out = mustCLI(t, via.sock, "snapshot", "restore", "--in", file, "-o", "json")
	restoreTook := time.Since(t0)
	var restored rpc.SnapshotResult
	if err := json.Unmarshal([]byte(out), &restored); err != nil || restored.Path != file || restored.AppliedIndex < saved.AppliedIndex {
		t.Fatalf("restore --in: %v\n%s", err, out)
	}
	// Every agent of the fresh cluster serves every run as it was, once it
	// applied what the leader had when it answered. (Not "applied =
	// commit": barriers are log entries the state machine never sees.)
	for _, a := range fresh.agents {
		// polling another process
		testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, a.id+" to catch up", func() error {
			if st := fresh.status(a); st == nil || st.AppliedIndex < restored.AppliedIndex {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		got := allRuns(t, fresh.client(a))
		if len(got) != len(want) {
			t.Fatalf("%s holds %d runs after the restore, want %d", a.id, len(got), len(want))
		}
		for id, w := range want {
			if g := got[id]; g.State != w.State || strings.Join(g.Tasks, "|") != strings.Join(w.Tasks, "|") {
				t.Fatalf("%s: run %s is %+v after the restore, want %+v", a.id, id, g, w)
			}
		}
	}
	states := map[string]int{}
	for _, w := range want {
		states[w.State]++
	}
	// The restored cluster takes writes: a new run, and a task that was
	// ready in the snapshot, both worked to the end.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := fresh.client(via)
	sub, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"after","tasks":[{"key":"a","type":"after"}]}`)})
	if err != nil {
		t.Fatalf("submit after the restore: %v", err)
	}
	for _, typ := range []string{"after", "idle"} {
		got, err := claim(ctx, cl, rpc.ClaimParams{WorkerID: "after", Types: []string{typ}, WaitMS: 5000})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim %s after the restore: %v %v", typ, got, err)
		}
		if _, err := cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: got[0].TaskID, FencingToken: got[0].FencingToken, Result: json.RawMessage(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if w, err := cl.RunWait(ctx, sub.ID, 10000); err != nil || !w.Done || w.Run.State != "succeeded" {
		t.Fatalf("the run submitted after the restore: %+v %v", w, err)
	}
	t.Logf("drill: %d runs %v, file %d bytes from %s; save --out %s, restore --in %s (a fresh 3-agent cluster, through a follower)",
		n, states, st.Size(), saved.Node, saveTook.Round(time.Millisecond), restoreTook.Round(time.Millisecond))
}

// upload sends data as a snapshot upload through cl in chunks and then
// asks for its restore declaring bytes and sum.
func upload(ctx context.Context, cl *rpc.Client, data []byte, bytes int64, sum string) error {
	var up rpc.SnapshotUploadResult
	if err := cl.Call(ctx, rpc.MethodSnapshotUpload, rpc.SnapshotUploadParams{}, &up); err != nil {
		return err
	}
	for off := 0; off < len(data); off += 256 << 10 {
		end := min(off+256<<10, len(data))
		var wr rpc.SnapshotWriteResult
		p := rpc.SnapshotWriteParams{SnapshotTransfer: up.SnapshotTransfer, Offset: int64(off), Data: data[off:end]}
		if err := cl.Call(ctx, rpc.MethodSnapshotWrite, p, &wr); err != nil {
			return err
		}
	}
	var res rpc.SnapshotResult
	return cl.Call(ctx, rpc.MethodSnapshotRestore, rpc.SnapshotParams{Transfer: up.Transfer, Node: up.Node, Bytes: bytes, SHA256: sum}, &res)
}

// A damaged upload restores nothing: a truncated one, one whose bytes
// changed on the way (SHA-256), one that is intact but not a complete
// snapshot, chunks out of order, and a truncated file given to the CLI.
// Only the intact upload replaces the state. No temporary file is left.
func TestSnapshotDamagedUploadRestoresNothing(t *testing.T) {
	c := startCluster(t, 1)
	a := c.agents[0]
	cl := c.client(a)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"before","tasks":[{"key":"a","type":"echo","input":{"pad":"` + strings.Repeat("x", 3000) + `"}}]}`)}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "good.snap")
	mustCLI(t, a.sock, "snapshot", "save", "--out", file)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(good))
	// A run the snapshot does not hold: a restore would remove it.
	after, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"after","tasks":[{"key":"a","type":"echo"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	intact := func(what string) {
		t.Helper()
		if _, err := cl.RunGet(ctx, after.ID); err != nil {
			t.Fatalf("%s: the run made after the snapshot is gone (%v): something was restored", what, err)
		}
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want an error with %q", what, err, want)
		}
		intact(what)
	}

	half := good[:len(good)/2]
	refused("truncated upload", upload(ctx, cl, half, int64(len(good)), sum), "incomplete")
	flipped := bytes.Clone(good)
	flipped[len(flipped)/3] ^= 0x40
	refused("corrupted upload", upload(ctx, cl, flipped, int64(len(good)), sum), "SHA-256")
	short := good[:len(good)-7] // consistent size and sum, but no trailer
	refused("truncated file", upload(ctx, cl, short, int64(len(short)), fmt.Sprintf("%x", sha256.Sum256(short))), "bad snapshot")
	// Chunks out of order are refused as they come.
	var up rpc.SnapshotUploadResult
	if err := cl.Call(ctx, rpc.MethodSnapshotUpload, rpc.SnapshotUploadParams{}, &up); err != nil {
		t.Fatal(err)
	}
	err = cl.Call(ctx, rpc.MethodSnapshotWrite, rpc.SnapshotWriteParams{SnapshotTransfer: up.SnapshotTransfer, Offset: 10, Data: good[10:20]}, nil)
	refused("a chunk out of order", err, "send the chunks in order")
	// Abandoned mid-way (a CLI killed): closing it makes a restore of it
	// impossible.
	if err := cl.Call(ctx, rpc.MethodSnapshotWrite, rpc.SnapshotWriteParams{SnapshotTransfer: up.SnapshotTransfer, Offset: 0, Data: half}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cl.Call(ctx, rpc.MethodSnapshotClose, up.SnapshotTransfer, nil); err != nil {
		t.Fatal(err)
	}
	err = cl.Call(ctx, rpc.MethodSnapshotRestore, rpc.SnapshotParams{Transfer: up.Transfer, Bytes: int64(len(half)), SHA256: fmt.Sprintf("%x", sha256.Sum256(half))}, nil)
	refused("a closed upload", err, "no open snapshot upload")
	// The CLI checks a local file before it uploads anything.
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, half, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, a.sock, "snapshot", "restore", "--in", bad)
	if err == nil || !strings.Contains(out, "nothing was restored") {
		t.Fatalf("restore --in a truncated file: %v\n%s", err, out)
	}
	intact("restore --in a truncated file")
	if left, _ := filepath.Glob(filepath.Join(a.dir, "snapshots", ".flowd-tmp-*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	// The intact upload restores: the later run is gone.
	if err := upload(ctx, cl, good, int64(len(good)), sum); err != nil {
		t.Fatalf("intact upload: %v", err)
	}
	if _, err := cl.RunGet(ctx, after.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the intact upload did not restore: run %s: %v", after.ID, err)
	}
}

// Scheduled snapshots: an agent with --snapshot-interval writes them into
// its --snapshot-dir and keeps --snapshot-retain of them; files it did not
// write are never removed; each is logged and the metric moves.
func TestScheduledSnapshotsAndRetention(t *testing.T) {
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	start := time.Now()
	c := startClusterWith(t, 1, "--snapshot-interval", "1s", "--snapshot-retain", "2", "--http-addr", httpAddr)
	a := c.agents[0]
	dir := filepath.Join(a.dir, "snapshots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	others := []string{"manual.snap", "flowd-20200101T000000.000Z-n2.snap", "flowd-someday-n1.snap", "flowd-20200101T000000.000Z-n1.snap.bak"}
	for _, n := range others {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("not ours"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := func() []string {
		ents, _ := os.ReadDir(dir)
		var out []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "flowd-2") && strings.HasSuffix(e.Name(), "-n1.snap") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	logged := func() []string {
		b, _ := os.ReadFile(a.dir + ".log")
		var files []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `msg="scheduled snapshot"`) {
				_, f, _ := strings.Cut(l, " file=")
				f, _, _ = strings.Cut(f, " ")
				files = append(files, filepath.Base(f))
			}
		}
		return files
	}
	// Wait (polling the agent's directory and log: another process) until
	// four were taken and the newest two are what is kept.
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, "four snapshots taken and the newest two kept", func() error {
		l, s := logged(), scheduled()
		if len(l) >= 4 && len(s) == 2 && s[1] == l[len(l)-1] {
			if s[0] != l[len(l)-2] {
				t.Fatalf("kept %v, want the newest two of %v", s, l)
			}
			for _, gone := range l[:len(l)-2] {
				if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
					t.Fatalf("%s was not removed (%v)", gone, err)
				}
			}
			return nil
		}
		return fmt.Errorf("logged %v, directory holds %v", l, s)
	})
	for _, n := range others {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("retention removed %s, which the scheduler did not write: %v", n, err)
		}
	}
	// A scheduled file is a complete snapshot.
	if out := mustCLI(t, a.sock, "snapshot", "inspect", filepath.Join(dir, scheduled()[0])); !strings.Contains(out, "Applied index:") {
		t.Fatalf("inspect: %s", out)
	}
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var last float64
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "flowd_snapshot_last_success_timestamp_seconds "); ok {
			last, _ = strconv.ParseFloat(v, 64)
		}
	}
	if last < float64(start.Unix()) || !strings.Contains(string(body), "flowd_scheduled_snapshots_total ") {
		t.Fatalf("flowd_snapshot_last_success_timestamp_seconds = %v, want after %d", last, start.Unix())
	}
}
