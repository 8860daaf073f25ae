package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc"
)

// The queue workload: producers submit one-task runs, one run.submit per
// job, while workers claim and complete them. RunQueue is the sequence of
// steps: setup, start the workers, start the producers and a watchdog, wait,
// measure, verify.

// QueueConfig is the queue workload's input (the CLI's flags, validated).
type QueueConfig struct {
	Endpoints   []string // agents to spread clients over
	SpawnedPIDs []int    // agents' pids when the CLI started them (else from cluster.status)
	Jobs        int      // one-task runs to submit
	Producers   int      // concurrent producers, one connection each
	Workers     int      // concurrent workers, one connection each
	ClaimMax    int      // tasks per claim
	ClaimNext   bool     // each completion claims the worker's next task in the same call
	Rate        float64  // open-loop jobs/s; 0 = burst
	Payload     int      // bytes of JSON task input per job
	Stall       time.Duration
	CallTimeout time.Duration
	Client      rpc.ClientOptions // auth, logger, dial timeout
	Progress    io.Writer         // one line of progress before the run
}

// QueueReport is the queue workload's result (the `--output json` shape).
type QueueReport struct {
	Mode           string       `json:"mode"`   // queue
	Pacing         string       `json:"pacing"` // burst or paced
	Jobs           int          `json:"jobs"`
	Acked          int          `json:"acked"`           // completions accepted
	Rejected       int          `json:"rejected"`        // completions refused (lost leases)
	CompleteErrors int          `json:"complete_errors"` // completions that failed outright
	Producers      int          `json:"producers"`
	Workers        int          `json:"workers"`
	ClaimMax       int          `json:"claim_max"`
	PayloadBytes   int          `json:"payload_bytes"`
	Seconds        float64      `json:"seconds"` // first submit to last ack
	JobsPerSecond  float64      `json:"jobs_per_second"`
	Paced          *PacedReport `json:"paced,omitempty"`
	// LatencyMS is submit -> completion ack: from the submit call (burst)
	// or from the scheduled submit time (paced).
	LatencyMS    Latency `json:"latency_ms"`
	SubmitCallMS Latency `json:"submit_call_ms"` // run.submit round trips
	AvgClaimSize float64 `json:"avg_claim_size"`
	// RaftEntries is the leader's commit_index delta over the run.
	RaftEntries   uint64  `json:"raft_entries"`
	EntriesPerJob float64 `json:"raft_entries_per_job"`
	Leader        string  `json:"leader,omitempty"`
	AgentPIDs     []int   `json:"agent_pids,omitempty"`
	// AgentCPUSeconds is utime+stime of the agents over the run; null when
	// unknown (CPUNote says why).
	AgentCPUSeconds  *float64 `json:"agent_cpu_seconds"`
	AgentCPUMSPerJob *float64 `json:"agent_cpu_ms_per_job"`
	CPUNote          string   `json:"cpu_note,omitempty"`
	Succeeded        int      `json:"succeeded"` // runs verified succeeded after the run
}

// PacedReport is what a paced (--rate) run adds to the report.
type PacedReport struct {
	TargetRate     float64 `json:"target_rate"`
	KeptUp         bool    `json:"kept_up"`           // jobs_per_second >= 95% of target_rate
	MaxSubmitLagMS float64 `json:"max_submit_lag_ms"` // latest start of a submit after its slot
}

// errBenchDone cancels the run when every job is settled.
var errBenchDone = errors.New("all jobs settled")

type queueJob struct {
	start     time.Time // latency origin: submit call (burst) or slot (paced)
	call      time.Time // run.submit sent
	submitted time.Time // run.submit answered
	acked     time.Time // task.complete accepted
}

// queueRun is the state of one queue run, shared by its steps.
type queueRun struct {
	cfg     QueueConfig
	ctx     context.Context // the caller's: calls in flight outlive the run
	rctx    context.Context // the run's: ends when every job is settled, or on failure
	cancel  context.CancelCauseFunc
	queue   string    // isolates this run from other work
	t0      time.Time // the producers' start: paced slots count from it
	jobs    []queueJob
	ids     []string
	index   sync.Map // run id -> job
	clients []*rpc.Client

	submitted, acked, rejected, failed, total, claims, claimed atomic.Int64
	wwg, pwg                                                   sync.WaitGroup
}

// clusterSample is what the bench reads of the cluster before and after.
type clusterSample struct {
	commit  uint64
	pids    []int
	cpuNote string
	cpu     uint64
	cpuErr  error
}

// RunQueue runs the queue workload. The report is nil when the run did not
// complete (the error says why); with a report, a *VerifyError says that
// some runs did not succeed.
func RunQueue(ctx context.Context, cfg QueueConfig) (*QueueReport, error) {
	r := &queueRun{cfg: cfg, ctx: ctx, queue: "bench-" + uuid.NewString()[:8],
		jobs: make([]queueJob, cfg.Jobs), ids: make([]string, cfg.Jobs)}
	before, err := r.sampleBefore()
	if err != nil {
		return nil, err
	}
	r.rctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	defer r.closeClients()
	r.announce()
	if err := r.startWorkers(); err != nil { // first, so the first jobs find them polling
		return nil, err
	}
	r.startProducers()
	go r.watchdog()
	r.pwg.Wait()
	r.wwg.Wait()
	if cause := context.Cause(r.rctx); !errors.Is(cause, errBenchDone) {
		if cause == nil || errors.Is(cause, context.Canceled) {
			cause = errors.New("interrupted")
		}
		return nil, fmt.Errorf("queue bench: %w", cause)
	}
	rep := r.measure(before)
	verr := VerifyRuns(ctx, cfg.Endpoints, cfg.Client, cfg.CallTimeout, r.ids, &rep.Succeeded)
	return rep, verr
}

// sampleBefore reads the leader's commit index, the agents' pids and their
// CPU time before the run.
func (r *queueRun) sampleBefore() (clusterSample, error) {
	sts := clusterStatuses(r.ctx, r.cfg.Endpoints, r.cfg.Client)
	commit, _, ok := leaderCommit(sts)
	if !ok {
		return clusterSample{}, errors.New("no agent answered cluster.status; is the cluster up (flowd health)?")
	}
	s := clusterSample{commit: commit}
	s.pids, s.cpuNote = agentPIDs(r.cfg.SpawnedPIDs, sts)
	s.cpu, s.cpuErr = cpuTicks(s.pids)
	return s, nil
}

// announce prints the workload's one progress line.
func (r *queueRun) announce() {
	mode := "as fast as they go"
	if r.cfg.Rate > 0 {
		mode = fmt.Sprintf("at %g jobs/s", r.cfg.Rate)
	}
	fmt.Fprintf(r.cfg.Progress, "queue bench: %d one-task runs from %d producers (%s), %d workers claiming up to %d...\n",
		r.cfg.Jobs, r.cfg.Producers, mode, r.cfg.Workers, r.cfg.ClaimMax)
}

// settled counts one job's completion outcome and ends the run with the
// last one.
func (r *queueRun) settled(counter *atomic.Int64) {
	counter.Add(1) // before total: the last one sees every counter final
	if r.total.Add(1) == int64(r.cfg.Jobs) {
		r.cancel(errBenchDone)
	}
}

func (r *queueRun) closeClients() {
	for _, cl := range r.clients {
		cl.Close()
	}
}

// slot is job i's scheduled submit time in a paced run.
func (r *queueRun) slot(i int) time.Time {
	return r.t0.Add(time.Duration(float64(i) * float64(time.Second) / r.cfg.Rate))
}

// queueWorkflow is job i's one-task run, with a JSON input of size bytes
// (or the smallest that names the job, when size is smaller).
func queueWorkflow(queue string, i, size int) json.RawMessage {
	head, tail := `{"job":`+strconv.Itoa(i)+`,"pad":"`, `"}`
	in := head + strings.Repeat("x", max(0, size-len(head)-len(tail))) + tail
	return json.RawMessage(`{"name":"bench-queue","tasks":[{"key":"job","type":"bench","queue":"` + queue + `","input":` + in + `}]}`)
}
