package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// BenchmarkFSMClaimComplete measures the state machine alone, per task: one
// claim entry and one complete entry, applied one at a time (no batching),
// over badger (as in production, with the in-memory index mirror) and over
// the in-memory store.
//
//	go test -run ^$ -bench FSMClaimComplete -benchmem ./fsm/
func BenchmarkFSMClaimComplete(b *testing.B) {
	for _, backend := range []string{"badger", "mem"} {
		b.Run(backend, func(b *testing.B) {
			var st store.Store = store.NewMemStore()
			if backend == "badger" {
				bs, err := OpenBadger(b.TempDir(), store.BadgerOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer bs.Close()
				if st, err = NewIndexedStore(bs); err != nil {
					b.Fatal(err)
				}
			}
			f, _ := New(st, Options{})
			h := &harness{t: b, f: f, now: 1_700_000_000_000}
			spec, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"t","type":"bench","input":{"n":1}}]}`), domain.DefaultLimits)
			for i := 0; i < b.N; i++ {
				h.ok(&Submit{ID: fmt.Sprintf("r%08d", i), Spec: spec})
			}
			h.log = nil
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := h.ok(&Claim{Waiters: []Waiter{{WorkerID: "w", Max: 1}}}).(*ClaimResult)
				c := res.Assigned[0][0]
				h.ok(&Complete{TaskID: c.TaskID, Token: c.FencingToken})
				h.log = h.log[:0]
			}
		})
	}
}

// BenchmarkFSMClaimCompleteBatched applies 64 claims or completes per
// ApplyBatch, the shape raft's batching produces under load.
func BenchmarkFSMClaimCompleteBatched(b *testing.B) {
	bs, err := OpenBadger(b.TempDir(), store.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close()
	st, _ := NewIndexedStore(bs)
	f, _ := New(st, Options{})
	spec, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"t","type":"bench"}]}`), domain.DefaultLimits)
	idx := uint64(0)
	batch := func(cmds []Command) []any {
		var es []Entry
		for _, c := range cmds {
			c.Stamp(1_700_000_000_000)
			buf, _ := Encode(c)
			idx++
			es = append(es, Entry{Index: idx, Data: buf})
		}
		return f.ApplyBatch(es)
	}
	var subs []Command
	for i := 0; i < b.N; i++ {
		subs = append(subs, &Submit{ID: fmt.Sprintf("r%08d", i), Spec: spec})
		if len(subs) == 64 || i == b.N-1 {
			batch(subs)
			subs = nil
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(64, b.N-done)
		var claims []Command
		for i := 0; i < n; i++ {
			claims = append(claims, &Claim{Waiters: []Waiter{{WorkerID: "w", Max: 1}}})
		}
		var completes []Command
		for _, r := range batch(claims) {
			for _, c := range r.(*ClaimResult).Assigned[0] {
				completes = append(completes, &Complete{TaskID: c.TaskID, Token: c.FencingToken})
			}
		}
		batch(completes)
		done += n
	}
}

// countingStore counts the writes committed through it, by key prefix.
type countingStore struct {
	store.Store
	writes map[string]int
	bytes  map[string]int
	total  int
	size   int // key and value bytes
}

func (c *countingStore) Commit(batches [][]store.Write) error {
	for _, b := range batches {
		for _, w := range b {
			p := string(w.Key)
			if i := bytes.IndexByte(w.Key, '/'); i >= 0 {
				p = string(w.Key[:i+1])
			}
			c.writes[p]++
			c.total++
			if c.bytes != nil {
				c.bytes[p] += len(w.Key) + len(w.Val)
			}
			c.size += len(w.Key) + len(w.Val)
		}
	}
	return c.Store.Commit(batches)
}

// BenchmarkFSMQueueJob measures the queue workload's job (a one-task run
// submitted, claimed, completed) through the FSM over badger, with group
// entries of 1, 4 and 16 commands: the difference is the per-entry cost
// (transaction, flush, commit) that group commit spreads over a group.
//
//	go test -run ^$ -bench FSMQueueJob -benchmem ./fsm/
//
// window=1000 has the event window full from the start, as a long-lived
// cluster has, so entries also trim the oldest events; the default window
// (100 000 events) fills after ~30 000 jobs: -benchtime 80000x shows the
// trim at that size, where it costs more (a longer store to seek).
func BenchmarkFSMQueueJob(b *testing.B) {
	for _, group := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) { benchQueueJob(b, group, 0) })
	}
	b.Run("group=16/window=1000", func(b *testing.B) { benchQueueJob(b, 16, 1000) })
	// The same over the in-memory store: the state machine's own cost
	// without badger's (its commit, its writer and compactions).
	b.Run("group=16/store=mem", func(b *testing.B) { benchQueueJob(b, 16, -1) })
}

// queueBench is the queue workload's fixture for the state machine's
// benchmarks: an FSM over st, one entry per apply at the next index, the
// job's spec (one task, a 200-byte input, as the queue harness submits)
// and group waiting workers.
type queueBench struct {
	f       *FSM
	index   uint64
	spec    domain.Spec
	waiters []Waiter
}

func newQueueBench(b *testing.B, st store.Store, group int) *queueBench {
	f, _ := indexedFSM(b, st)
	payload := `{"seq":1,"pad":"` + strings.Repeat("x", 180) + `"}`
	spec, err := domain.ParseSpec([]byte(`{"name":"q","tasks":[{"key":"job","type":"noop","input":`+payload+`}]}`), domain.DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	q := &queueBench{f: f, spec: spec, waiters: make([]Waiter, group)}
	for i := range q.waiters {
		q.waiters[i] = Waiter{WorkerID: fmt.Sprintf("w%d", i), Types: []string{"noop"}, Max: 1}
	}
	return q
}

// enc stamps and encodes a command (a Multi's sub-command).
func (q *queueBench) enc(c Command) []byte {
	c.Stamp(1_700_000_000_000)
	buf, _ := Encode(c)
	return buf
}

// apply applies c as the next entry.
func (q *queueBench) apply(c Command) any {
	q.index++
	return q.f.ApplyBatch([]Entry{{Index: q.index, Data: q.enc(c)}})[0]
}

// submits is a Multi of one job's submit per waiting worker.
func (q *queueBench) submits() *Multi {
	m := &Multi{}
	for range q.waiters {
		m.Cmds = append(m.Cmds, q.enc(&Submit{ID: uuid.Must(uuid.NewV7()).String(), Spec: q.spec}))
	}
	return m
}

// benchQueueJob is the job-queue workload as the state machine sees
// it after group commit: per round, one Multi entry of group one-task submits,
// one claim entry for group waiting workers and one Multi of their
// completions, over badger with the index mirror. Reports the writes that
// reach badger per job next to time and allocations per job. window < 0
// runs it over the in-memory store instead (default event window).
func benchQueueJob(b *testing.B, group, window int) {
	var st store.Store = store.NewMemStore() // window < 0: in memory
	if window >= 0 {
		bs, err := OpenBadger(b.TempDir(), store.BadgerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer bs.Close()
		st = bs
	}
	counted := &countingStore{Store: st, writes: map[string]int{}, bytes: map[string]int{}} // what reaches badger
	q := newQueueBench(b, counted, group)
	if window > 0 {
		q.apply(&SettingsSet{EventWindow: &window})
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testutil.ProcessCPU()
	jobs := 0
	for jobs < b.N {
		q.apply(q.submits())
		cr, ok := q.apply(&Claim{Waiters: q.waiters}).(*ClaimResult)
		if !ok {
			b.Fatal("claim failed")
		}
		comps := &Multi{}
		for _, got := range cr.Assigned {
			for _, c := range got {
				comps.Cmds = append(comps.Cmds, q.enc(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Result: json.RawMessage(`{"ok":true}`)}))
			}
		}
		if len(comps.Cmds) != group {
			b.Fatalf("claimed %d of %d", len(comps.Cmds), group)
		}
		q.apply(comps)
		jobs += group
	}
	b.ReportMetric(float64(counted.total)/float64(jobs), "writes/job")
	b.ReportMetric(float64(counted.size)/float64(jobs), "bytes/job")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(jobs), "ns/job")
	b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Nanoseconds())/float64(jobs), "cpu-ns/job")
	if testing.Verbose() {
		for p, n := range counted.writes {
			b.Logf("%-8s %.2f writes/job %6.0f bytes/job", p, float64(n)/float64(jobs), float64(counted.bytes[p])/float64(jobs))
		}
	}
}

// BenchmarkReopenRetained measures opening a badger state that retains
// many finished one-task runs (the derived indexes are rebuilt from the
// records on open): FLOWD_BENCH_RETAINED tasks (default 100000), each run
// with FLOWD_BENCH_LABELS labels (default 0; env, team, customer, then
// l3, l4, ...).
//
//	FLOWD_BENCH_RETAINED=1000000 go test -run ^$ -bench ReopenRetained -benchtime 1x ./fsm/
func BenchmarkReopenRetained(b *testing.B) {
	n, nl := 100000, 0
	if v := os.Getenv("FLOWD_BENCH_RETAINED"); v != "" {
		fmt.Sscan(v, &n)
	}
	if v := os.Getenv("FLOWD_BENCH_LABELS"); v != "" {
		fmt.Sscan(v, &nl)
	}
	labels := func(i int) map[string]string {
		if nl == 0 {
			return nil
		}
		l := map[string]string{}
		for j := range nl {
			switch j {
			case 0:
				l["env"] = []string{"prod", "staging", "dev"}[i%3]
			case 1:
				l["team"] = []string{"data", "web", "ops", "ml"}[i%4]
			case 2:
				l["customer"] = fmt.Sprintf("c%d", i%1000)
			default:
				l[fmt.Sprintf("l%d", j)] = fmt.Sprintf("v%d", i%(10*j))
			}
		}
		return l
	}
	dir := b.TempDir()
	bs, err := OpenBadger(dir, store.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	input := `{"seq":1,"pad":"` + strings.Repeat("x", 180) + `"}`
	var batch []store.Write
	flush := func() {
		if err := bs.Commit([][]store.Write{batch}); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range n {
		id := fmt.Sprintf("0193%08x-0000-7000-8000-%012x", i, i)
		tk := &Task{RunID: id, Key: "job", Type: "noop", Queue: "default", Input: json.RawMessage(input), LeaseMS: 30000,
			State: "succeeded", Attempt: 1, FencingToken: uint64(i), StartedAt: 1, FinishedAt: 2, Result: json.RawMessage(`{"ok":true}`),
			Attempts: []Attempt{{N: 1, Worker: "w1", Token: uint64(i), ClaimedAt: 1, EndedAt: 2, Outcome: OutcomeSucceeded}}}
		tv, _ := marshal(tk)
		rv, _ := marshal(&Run{ID: id, Workflow: "q", State: "succeeded", CreatedAt: 1, FinishedAt: 2, Labels: labels(i)})
		batch = append(batch, store.Write{Key: taskKey(id, "job"), Val: tv}, store.Write{Key: runKey(id), Val: rv})
		if len(batch) >= 4000 {
			flush()
		}
	}
	flush()
	if err := bs.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var labelsAfter time.Duration // from the start of the open to the label index built
	var heapMB, rssMB float64
	for range b.N {
		start := time.Now()
		bs, err := OpenBadger(dir, store.BadgerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		idx, err := NewIndexedStore(bs)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		<-idx.labelsReady()
		labelsAfter += time.Since(start)
		// What the open state holds in memory: the Go heap (derived
		// indexes, caches) after a collection, and the process's RSS.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heapMB = float64(ms.HeapInuse) / (1 << 20)
		rssMB = selfRSSMB()
		idx.Close()
		b.StartTimer()
	}
	b.ReportMetric(heapMB, "MB-heap-open")
	b.ReportMetric(rssMB, "MB-rss-open")
	b.ReportMetric(labelsAfter.Seconds()/float64(b.N), "s-labels-ready")
	b.ReportMetric(float64(n), "tasks")
	b.ReportMetric(float64(nl), "labels/run")
}

// BenchmarkRunListLabels measures run.list over 100,000 retained runs
// with labels (FLOWD_BENCH_RUNS to change the count), on badger with the
// in-memory index mirror as in production: the first page (100 runs) and
// a full paged walk, without a selector, with a common label (env=prod, a
// third of the runs), a combination (env=prod,team=data, a twelfth) and a
// rare one (customer=c7, 1 in 1,000), and with a state besides. There is
// no label index: a filtered page examines run records newest first until
// it has its page or has examined MaxListScan, so the cost per page
// follows how rare the match is, and a walk reads every run once.
//
//	go test -run ^$ -bench RunListLabels -benchmem ./fsm/
func BenchmarkRunListLabels(b *testing.B) {
	n := 100_000
	if v := os.Getenv("FLOWD_BENCH_RUNS"); v != "" {
		fmt.Sscan(v, &n)
	}
	bs, err := OpenBadger(b.TempDir(), store.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close()
	var batch []store.Write
	flush := func() {
		if err := bs.Commit([][]store.Write{batch}); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	envs, teams := []string{"prod", "staging", "dev"}, []string{"data", "web", "ops", "ml"}
	for i := range n {
		id := fmt.Sprintf("0193%08x-0000-7000-8000-%012x", i, i)
		state := domain.RunSucceeded
		if i%10 == 0 {
			state = domain.RunFailed
		}
		rv, err := marshal(&Run{ID: id, Workflow: "etl", State: state, CreatedAt: int64(1_700_000_000_000 + i), FinishedAt: 2,
			Labels: map[string]string{"env": envs[i%3], "team": teams[i%4], "customer": fmt.Sprintf("c%d", i%1000)}})
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, store.Write{Key: runKey(id), Val: rv})
		if len(batch) >= 4000 {
			flush()
		}
	}
	flush()
	f, idx := indexedFSM(b, bs)
	<-idx.labelsReady()
	for _, c := range []struct {
		name     string
		state    domain.RunState
		labels   map[string]string
		selector string // run.list's selector, parsed
	}{
		{"none", "", nil, ""},
		{"env=prod", "", map[string]string{"env": "prod"}, ""},
		{"env=prod,team=data", "", map[string]string{"env": "prod", "team": "data"}, ""},
		{"customer=c7", "", map[string]string{"customer": "c7"}, ""},
		{"failed,env=prod", domain.RunFailed, map[string]string{"env": "prod"}, ""},
		// Selectors: != checked per run (alone: scanned), k by the
		// index (env: 3 values) or per run (customer: 1000 values).
		{"sel:env=prod,team!=data", "", nil, "env=prod,team!=data"},
		{"sel:team!=data", "", nil, "team!=data"},
		{"sel:customer=c7,team!=data", "", nil, "customer=c7,team!=data"},
		{"sel:env,!nosuch", "", nil, "env,!nosuch"},
		{"sel:customer,env=dev", "", nil, "customer,env=dev"},
	} {
		sel, err := domain.ParseSelector(c.selector)
		if err != nil {
			b.Fatal(err)
		}
		q := RunFilter{Labels: c.labels, Selector: sel}
		b.Run(c.name+"/first_page", func(b *testing.B) {
			var got int
			for range b.N {
				runs, _, err := f.ListRunsWhere(c.state, q, 100, "")
				if err != nil {
					b.Fatal(err)
				}
				got = len(runs)
			}
			b.ReportMetric(float64(got), "runs/page")
		})
		b.Run(c.name+"/walk", func(b *testing.B) {
			var got, pages int
			for range b.N {
				got, pages = 0, 0
				for cursor := ""; ; {
					runs, next, err := f.ListRunsWhere(c.state, q, 100, cursor)
					if err != nil {
						b.Fatal(err)
					}
					got, pages = got+len(runs), pages+1
					if next == "" {
						break
					}
					cursor = next
				}
			}
			b.ReportMetric(float64(got), "runs")
			b.ReportMetric(float64(pages), "pages")
		})
	}
}

// BenchmarkLabelIndexBytes measures the memory the label index costs: the
// rl/ keys of FLOWD_BENCH_RUNS runs (default 100,000) with the three labels
// of BenchmarkRunListLabels, built into a mirror B-tree as a reopen builds
// them, as heap bytes per run per label (runtime.MemStats after a GC).
//
//	go test -run ^$ -bench LabelIndexBytes -benchtime 1x ./fsm/
func BenchmarkLabelIndexBytes(b *testing.B) {
	n := 100_000
	if v := os.Getenv("FLOWD_BENCH_RUNS"); v != "" {
		fmt.Sscan(v, &n)
	}
	ms := store.NewMemStore()
	var batch []store.Write
	envs, teams := []string{"prod", "staging", "dev"}, []string{"data", "web", "ops", "ml"}
	for i := range n {
		id := fmt.Sprintf("0193%08x-0000-7000-8000-%012x", i, i)
		rv, err := marshal(&Run{ID: id, Workflow: "etl", State: domain.RunSucceeded, CreatedAt: int64(1_700_000_000_000 + i),
			Labels: map[string]string{"env": envs[i%3], "team": teams[i%4], "customer": fmt.Sprintf("c%d", i%1000)}})
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, store.Write{Key: runKey(id), Val: rv})
	}
	if err := ms.Commit([][]store.Write{batch}); err != nil {
		b.Fatal(err)
	}
	batch = nil
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perLabel float64
	for range b.N {
		r, release, _ := ms.View()
		before := heap()
		mem := store.NewTree()
		labels := 0
		if err := deriveIndexes(r, func(k []byte) {
			if isQueryOnly(k) {
				mem.Put(k, []byte{})
				labels++
			}
		}); err != nil {
			b.Fatal(err)
		}
		perLabel = float64(heap()-before) / float64(labels)
		runtime.KeepAlive(mem)
		release()
	}
	b.ReportMetric(perLabel, "B/label")
}

// selfRSSMB is this process's resident set (VmRSS), in MB; 0 where /proc
// is not there.
func selfRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkFSMEntryOverhead measures what one raft entry costs the state
// machine whatever it holds: an entry of one no-op command, applied alone
// (one ApplyBatch per entry, as raft hands them over under light load),
// over badger with the index mirror, with a retained population so views
// and commits touch a realistic store.
//
//	go test -run ^$ -bench FSMEntryOverhead -benchmem ./fsm/
func BenchmarkFSMEntryOverhead(b *testing.B) {
	f := openBadgerFSM(b)
	spec, err := domain.ParseSpec([]byte(`{"name":"q","tasks":[{"key":"job","type":"noop"}]}`), domain.DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	apply := oneEntryEach(b, f, func(uint64) int64 { return 1_700_000_000_000 })
	for i := range 2000 { // ready tasks in the index mirror
		apply(&Submit{ID: fmt.Sprintf("r%05d", i), Spec: spec})
	}
	index := f.AppliedIndex()
	noop, _ := Encode(&Noop{})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		index++
		f.ApplyBatch([]Entry{{Index: index, Data: noop}})
	}
}

// BenchmarkFSMQueueJobSDK is the job queue as an agent applies it under
// flowd's SDK at W=64 with 8 producers: every entry one Multi of 8 submits
// and 8 completions that each claim the worker's next task, over badger
// behind the write-behind window and the index mirror, as an agent opens
// its state. Its cpu-ns/job is a replica's apply CPU per job.
//
//	go test -run ^$ -bench FSMQueueJobSDK -benchmem ./fsm/
func BenchmarkFSMQueueJobSDK(b *testing.B) {
	bs, err := OpenBadger(b.TempDir(), store.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	wb := store.NewWriteBehind(bs, store.DefaultWriteBehindAge)
	defer wb.Close()
	const group = 8
	q := newQueueBench(b, wb, group)
	// Every worker holds a task before the clock starts.
	q.apply(q.submits())
	held := q.apply(&Claim{Waiters: q.waiters}).(*ClaimResult).Assigned
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testutil.ProcessCPU()
	jobs := 0
	for jobs < b.N {
		m := q.submits()
		for i := range group {
			c, w := held[i][0], q.waiters[i]
			m.Cmds = append(m.Cmds, q.enc(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Result: json.RawMessage(`{"ok":true}`), Claim: &w}))
		}
		res := q.apply(m).(*MultiResult)
		for i := range group {
			ack := res.Results[group+i].(*AckResult)
			if len(ack.Claimed) != 1 {
				b.Fatalf("a completion's claim of the next task got %d tasks: %+v", len(ack.Claimed), ack)
			}
			held[i] = ack.Claimed
		}
		jobs += group
	}
	b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Nanoseconds())/float64(jobs), "cpu-ns/job")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(jobs), "ns/job")
}
