package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// The rolling-upgrade tests run two binaries that differ in one rule: the
// release (flowdBin, newest version fsm.MaxVersion) and one built with
// -tags flowd_testv2, which applies one version more (the probe) and, from
// it on, labels every new run flowd.fsm_version=<probe>
// (fsm/version_max_testv2.go). A fresh cluster of the release starts at
// the release's newest version (daemon/upgrade_fresh.go).

const probeLabel = "flowd.fsm_version"

var (
	releaseV = int(fsm.MaxVersion)
	probeV   = releaseV + 1
	probeVal = strconv.Itoa(probeV)
)

// waitRelease waits until a fresh cluster of the release raised itself to
// the release's newest version, then gives it work (a run), so that it is
// no longer fresh: from then on only a finalize raises it.
func (c *cluster) waitRelease() {
	c.t.Helper()
	c.fsmVersions(func(v *rpc.FSMVersion) bool { return v.Active == releaseV })
	c.submitProbe(c.agents[0])
}

var (
	v2Once sync.Once
	v2Bin  string
	v2Err  error
)

func flowdV2Bin(t *testing.T) string {
	t.Helper()
	v2Once.Do(func() {
		v2Bin = filepath.Join(filepath.Dir(flowdBin), "flowd-v2")
		cmd := exec.Command("go", "build", "-tags", "flowd_testv2", "-o", v2Bin, "./cmd/flowd")
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			v2Err = errors.New(string(out))
		}
	})
	if v2Err != nil {
		t.Fatalf("build the version-2 binary: %v", v2Err)
	}
	return v2Bin
}

// jobLoad is a submit/claim/complete load through every agent: a producer
// submitting one-task runs with ids of its own (a retry after an unknown
// outcome is the same run) and two workers claiming and completing. It can
// be paused (the producer stops, the workers drain) to compare digests.
type jobLoad struct {
	t       *testing.T
	cl      *rpc.Client
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	gate    chan struct{} // closed: the producer may submit
	more    chan struct{} // closed at the producer's next run
	runs    []string
	tokens  map[string]map[uint64]bool // task id -> tokens of accepted completions
	doubled []string
}

func startJobLoad(t *testing.T, c *cluster) *jobLoad {
	l := &jobLoad{t: t, cl: c.client(), stop: make(chan struct{}), gate: make(chan struct{}), more: make(chan struct{}),
		tokens: map[string]map[uint64]bool{}}
	close(l.gate)
	l.wg.Add(3)
	go l.produce()
	go l.work("w1")
	go l.work("w2")
	return l
}

func (l *jobLoad) produce() {
	defer l.wg.Done()
	wf := json.RawMessage(`{"name":"job","tasks":[{"key":"a","type":"job","input":{"pad":"` + strings.Repeat("p", 200) + `"}}]}`)
	for {
		l.mu.Lock()
		gate := l.gate
		l.mu.Unlock()
		select {
		case <-l.stop:
			return
		case <-gate:
		}
		id := uuid.Must(uuid.NewV7()).String()
		giveUp := time.Now().Add(30 * time.Second)
		for {
			// Any error while agents restart (unavailable, a connection
			// closed under the call) is an unknown outcome: the same id
			// again is the same run.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := l.cl.RunSubmit(ctx, rpc.SubmitParams{ID: id, Workflow: wf})
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(giveUp) {
				l.t.Errorf("submit %s: %v", id, err)
				return
			}
		}
		l.mu.Lock()
		l.runs = append(l.runs, id)
		close(l.more)
		l.more = make(chan struct{})
		l.mu.Unlock()
		select {
		case <-l.stop:
			return
		case <-time.After(10 * time.Millisecond): // the producer's pace
		}
	}
}

func (l *jobLoad) work(worker string) {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tasks, err := l.cl.TaskClaim(ctx, rpc.ClaimParams{WorkerID: worker, Types: []string{"job"}, Max: 4, WaitMS: 300})
		cancel()
		if err != nil {
			continue // unavailable during a restart: the client re-sends its request id
		}
		for _, tk := range tasks {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ack, err := l.cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: tk.TaskID, FencingToken: tk.FencingToken, Result: json.RawMessage(`{"ok":true}`)})
				cancel()
				if err != nil {
					continue // outcome unknown: a completion repeats safely by its token
				}
				if ack.Accepted {
					l.mu.Lock()
					if l.tokens[tk.TaskID] == nil {
						l.tokens[tk.TaskID] = map[uint64]bool{}
					}
					l.tokens[tk.TaskID][tk.FencingToken] = true
					if len(l.tokens[tk.TaskID]) > 1 {
						l.doubled = append(l.doubled, tk.TaskID)
					}
					l.mu.Unlock()
				}
				break
			}
		}
	}
}

// grow waits until the producer has submitted n more runs.
func (l *jobLoad) grow(n int) {
	l.t.Helper()
	deadline := time.After(60 * time.Second)
	l.mu.Lock()
	want := len(l.runs) + n
	for len(l.runs) < want {
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			l.t.Fatalf("the load made no progress: %d of %d runs in 60s", len(l.submitted()), want)
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
}

// pause stops the producer and waits until every run it submitted has
// succeeded (the workers drained them); resume lets it go on.
func (l *jobLoad) pause() {
	l.mu.Lock()
	l.gate = make(chan struct{})
	l.mu.Unlock()
	l.waitDone()
}

func (l *jobLoad) resume() {
	l.mu.Lock()
	close(l.gate)
	l.mu.Unlock()
}

func (l *jobLoad) submitted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.runs...)
}

// waitDone waits until every submitted run has succeeded.
func (l *jobLoad) waitDone() {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, id := range l.submitted() {
		for {
			res, err := l.cl.RunWait(ctx, id, 30000)
			if err == nil && res.Done && res.Run.State == "succeeded" {
				break
			}
			if ctx.Err() != nil || err == nil && res.Done {
				l.t.Fatalf("run %s did not succeed: %+v %v", id, res, err)
			}
		}
	}
}

// end stops the load and checks that nothing was lost or doubled.
func (l *jobLoad) end() int {
	l.t.Helper()
	l.pause()
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.doubled) > 0 {
		l.t.Fatalf("tasks completed under two fencing tokens: %v", l.doubled)
	}
	if len(l.tokens) != len(l.runs) {
		l.t.Fatalf("%d runs submitted, %d tasks completed", len(l.runs), len(l.tokens))
	}
	return len(l.runs)
}

// replace stops a (SIGTERM: a graceful stop hands leadership over) and
// starts bin in its place with the same flags and data dir.
func (c *cluster) replace(a *agent, bin string) {
	c.t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s did not stop within 20s", a.id)
	}
	a.log.Close()
	a.bin = bin
	c.start(a)
}

// fsmVersions waits until every agent answers and returns each one's view.
func (c *cluster) fsmVersions(want func(*rpc.FSMVersion) bool) map[string]rpc.FSMVersion {
	c.t.Helper()
	var out map[string]rpc.FSMVersion
	// polling external processes
	testutil.Eventually(c.t, 20*time.Second, 50*time.Millisecond, "every agent's state-machine version", func() error {
		out = map[string]rpc.FSMVersion{}
		for _, a := range c.agents {
			if st := c.status(a); st != nil && st.FSMVersion != nil && want(st.FSMVersion) {
				out[a.id] = *st.FSMVersion
			}
		}
		if len(out) == len(c.agents) {
			return nil
		}
		return fmt.Errorf("versions %v", out)
	})
	return out
}

// submitProbe submits a run through a and returns its labels as each
// agent reads them.
func (c *cluster) submitProbe(a *agent) map[string]map[string]string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := uuid.Must(uuid.NewV7()).String()
	if _, err := c.client(a).RunSubmit(ctx, rpc.SubmitParams{ID: id, Workflow: json.RawMessage(`{"name":"probe","tasks":[{"key":"a","type":"probe"}]}`),
		Labels: map[string]string{"via": a.id}}); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, b := range c.agents {
		for { // each agent's own state, once it has applied the submit
			r, err := c.client(b).RunGet(ctx, id)
			if err == nil {
				out[b.id] = r.Labels
				break
			}
			if !errors.Is(err, domain.ErrNotFound) {
				c.t.Fatalf("run get on %s: %v", b.id, err)
			}
			time.Sleep(20 * time.Millisecond) // replication to an external process
		}
	}
	return out
}

// A three-agent cluster is upgraded one agent at a time, under a
// submit/claim/complete load, to a release with a new rule behind
// state-machine version 2; one agent is rolled back and forward again on
// the way. At every step the replicas are equal and the old rule holds;
// after finalize the new rule is in force on all three; the old binary then
// refuses to start on the upgraded data; nothing was lost or doubled.
func TestRollingUpgradeUnderLoad(t *testing.T) {
	v2 := flowdV2Bin(t)
	c := startCluster(t, 3)
	c.waitRelease()
	for _, a := range c.agents {
		a.args = append(a.args, "--upgrade-auto-finalize", "-1s") // finalized by hand below
	}
	load := startJobLoad(t, c)
	step := func(what string) {
		t.Helper()
		load.grow(50) // the load goes on with the new agent
		load.pause()
		sameState(t, c)
		for id, v := range c.fsmVersions(func(*rpc.FSMVersion) bool { return true }) {
			if v.Active != releaseV {
				t.Fatalf("%s: %s at active version %d before finalize", what, id, v.Active)
			}
		}
		for id, labels := range c.submitProbe(c.agents[0]) {
			if labels[probeLabel] != "" {
				t.Fatalf("%s: the new rule is in force on %s before finalize: %v", what, id, labels)
			}
		}
		t.Logf("%s: %d runs, replicas equal", what, len(load.submitted()))
		load.resume()
		load.grow(50) // under load when the next agent is replaced
	}
	step("all on the release")
	// Upgrade n1, roll it back (allowed: the active version is still the release's),
	// and upgrade it again; then the others, the leader among them.
	c.replace(c.agents[0], v2)
	step("n1 upgraded")
	c.replace(c.agents[0], flowdBin)
	step("n1 rolled back")
	for _, a := range c.agents {
		c.replace(a, v2)
		step(a.id + " upgraded")
	}

	flowd := func(args ...string) (string, error) {
		out, err := exec.Command(v2, append([]string{"--addr", strings.Join(c.endpoints(), ",")}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := flowd("-o", "json", "operator", "upgrade", "status")
	var st rpc.UpgradeStatus
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Active != releaseV || st.Target != probeV || st.Blocker != "" || len(st.Members) != 3 {
		t.Fatalf("upgrade status: %v\n%s", err, out)
	}
	if out, err := flowd("operator", "upgrade", "finalize"); err != nil || !strings.Contains(out, fmt.Sprintf("raised from %d to %d", releaseV, probeV)) {
		t.Fatalf("finalize: %v\n%s", err, out)
	}
	c.fsmVersions(func(v *rpc.FSMVersion) bool { return v.Active == probeV && v.Max == probeV })
	for _, via := range c.agents {
		for id, labels := range c.submitProbe(via) {
			if labels[probeLabel] != probeVal {
				t.Fatalf("after finalize, a run submitted through %s has no %s on %s: %v", via.id, probeLabel, id, labels)
			}
		}
	}
	if out, err := flowd("operator", "upgrade", "finalize"); err != nil || !strings.Contains(out, "already at version "+probeVal) {
		t.Fatalf("finalize again: %v\n%s", err, out)
	}
	n := load.end()
	sameState(t, c)
	t.Logf("%d jobs through the rolling upgrade, none lost or doubled", n)

	// The release cannot apply the probe version: on the upgraded data it refuses
	// to start, exit 78, naming the versions; the upgraded binary rejoins.
	last := c.agents[2]
	c.replace(last, flowdBin)
	if code := waitExit(t, last, 20*time.Second); code != 78 {
		t.Fatalf("the release on version-%d data exited %d, want 78\n%s", probeV, code, tail(agentLog(last), 10))
	}
	if log := agentLog(last); !strings.Contains(log, "state-machine version "+probeVal) || !strings.Contains(log, fmt.Sprintf("applies versions 1-%d", releaseV)) {
		t.Fatalf("the refusal does not name the versions:\n%s", tail(log, 10))
	}
	last.bin = v2
	c.start(last)
	sameState(t, c)
}

// With --upgrade-auto-finalize, a cluster whose voters all apply the probe
// version is raised to it by the leader without an operator.
func TestUpgradeAutoFinalize(t *testing.T) {
	v2 := flowdV2Bin(t)
	c := startCluster(t, 3)
	c.waitRelease()
	for _, a := range c.agents {
		a.args = append(a.args, "--upgrade-auto-finalize", "1s")
		c.replace(a, v2)
	}
	c.fsmVersions(func(v *rpc.FSMVersion) bool { return v.Active == probeV })
	for id, labels := range c.submitProbe(c.agents[1]) {
		if labels[probeLabel] != probeVal {
			t.Fatalf("no %s on %s after auto-finalize: %v", probeLabel, id, labels)
		}
	}
	if b, _ := os.ReadFile(c.agents[0].dir + ".log"); !strings.Contains(string(b)+agentLog(c.agents[1])+agentLog(c.agents[2]), "by=auto-finalize") {
		t.Fatal("no agent logged the automatic raise")
	}
}
