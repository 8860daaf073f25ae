package raftnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// Benchmarks of the replicated path, three nodes on loopback TCP with raft
// logs fsynced on every append (the default log store), as in production.
// Numbers are reported as custom metrics (tasks/s or entries/s, p50-ms,
// p99-ms); compare flowd against the raw raft ceiling measured the same
// way, as a ratio.
//
//	go test -run ^$ -bench 'Replicated|RawRaft' -benchtime 3s ./cluster/raftnode/

func startTCPCluster(b *testing.B) []*Node {
	b.Helper()
	base := b.TempDir()
	var peers []cluster.Peer
	for i := 0; i < 3; i++ {
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("n%d", i+1), Address: freeAddr(b)})
	}
	var nodes []*Node
	for i, p := range peers {
		n, err := New(Config{Config: cluster.Config{NodeID: p.ID, DataDir: filepath.Join(base, p.ID), RaftBind: p.Address, Peers: peers}, DisableLoops: true})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
		_ = i
	}
	b.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Shutdown()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := nodes[0].WaitForLeader(ctx); err != nil {
		b.Fatal(err)
	}
	return nodes
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func leaderOf(nodes []*Node) *Node {
	for _, n := range nodes {
		if n.IsLeader() {
			return n
		}
	}
	return nil
}

func report(b *testing.B, lat []time.Duration, ops int, elapsed time.Duration, unit string) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), unit)
}

// BenchmarkReplicatedClaimComplete: each worker claims one task and
// completes it (two entries per task) through the leader.
func BenchmarkReplicatedClaimComplete(b *testing.B) {
	for _, workers := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			nodes := startTCPCluster(b)
			l := leaderOf(nodes)
			ctx := context.Background()
			spec := mustSpec(nil, `{"tasks":[{"key":"t","type":"bench"}]}`)
			// Submit in groups so setup stays fast.
			for i := 0; i < b.N; {
				var wg sync.WaitGroup
				for j := 0; j < 64 && i < b.N; j, i = j+1, i+1 {
					wg.Add(1)
					go func(id int) {
						defer wg.Done()
						if _, _, err := l.Propose(ctx, &fsm.Submit{ID: fmt.Sprintf("r%d", id), Spec: spec}); err != nil {
							b.Error(err)
						}
					}(i)
				}
				wg.Wait()
			}
			var done atomic.Int64
			lat := make([][]time.Duration, workers)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for done.Load() < int64(b.N) {
						t0 := time.Now()
						res, _, err := l.Propose(ctx, &fsm.Claim{Waiters: []fsm.Waiter{{WorkerID: fmt.Sprint("w", w), Max: 1}}})
						if err != nil {
							b.Error(err)
							return
						}
						got := res.(*fsm.ClaimResult).Assigned[0]
						if len(got) == 0 {
							return
						}
						if _, _, err := l.ProposeGrouped(ctx, &fsm.Complete{TaskID: got[0].TaskID, Token: got[0].FencingToken}); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(t0))
						done.Add(1)
					}
				}(w)
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			report(b, all, int(done.Load()), elapsed, "tasks/s")
		})
	}
}

type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) any                 { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnap{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noopSnap struct{}

func (noopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (noopSnap) Release()                          {}

// timedLogStore records how long each append (StoreLogs) takes and how many
// entries it held: the log store's share of a commit round.
type timedLogStore struct {
	raft.LogStore
	mu      sync.Mutex
	lat     []time.Duration
	entries int
}

func (s *timedLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *timedLogStore) StoreLogs(logs []*raft.Log) error {
	t0 := time.Now()
	err := s.LogStore.StoreLogs(logs)
	d := time.Since(t0)
	s.mu.Lock()
	s.lat, s.entries = append(s.lat, d), s.entries+len(logs)
	s.mu.Unlock()
	return err
}

func (s *timedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *timedLogStore) reset() {
	s.mu.Lock()
	s.lat, s.entries = nil, 0
	s.mu.Unlock()
}

// benchLogStore opens a raft log and stable store of the given kind in dir
// as a node does (logstore.go), closed when the benchmark ends.
func benchLogStore(b *testing.B, kind, dir string) (raft.LogStore, raft.StableStore) {
	b.Helper()
	n := &Node{cfg: Config{Config: cluster.Config{DataDir: dir, RaftLogStore: kind}}, log: discardLogger()}
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o750); err != nil {
		b.Fatal(err)
	}
	logs, stable, err := n.openRaftStores()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(n.closeAll)
	return logs, stable
}

// BenchmarkRawRaft is the ceiling: the same raft config, log store and TCP
// transport with an FSM that does nothing, for each log store (bolt, wal).
// Eight clients is the queue harness's eight closed-loop producers: what
// raft alone commits for them bounds what any state machine on it can
// acknowledge to them. Reported: entries/s, commit latency around Apply
// (p50-ms, p99-ms), and the log store's append (StoreLogs) on all three
// nodes: append-p50-us, append-p99-us, entries-per-append.
//
//	go test -run '^$' -bench 'RawRaft/clients=(1|8)/' -benchtime 3000x -benchmem -count 3 ./cluster/raftnode/
func BenchmarkRawRaft(b *testing.B) {
	for _, clients := range []int{1, 8, 16, 128} {
		for _, kind := range []string{cluster.LogStoreBolt, cluster.LogStoreWAL} {
			b.Run(fmt.Sprintf("clients=%d/store=%s", clients, kind), func(b *testing.B) { benchRawRaft(b, clients, kind, 1) })
		}
	}
}

// BenchmarkRawRaftEntrySize is raw raft with one entry in flight (one
// client, as the group commit proposes) and entries of a group entry's
// sizes: what an entry's bytes cost the three nodes (appends, fsyncs,
// transport), in CPU (cpu-ns/entry, every node, this process) and in
// commit time. A group entry of the queue workload is ~13 commands, ~4 KB.
//
//	go test -run '^$' -bench RawRaftEntrySize -benchtime 3000x ./cluster/raftnode/
func BenchmarkRawRaftEntrySize(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 16 << 10, 32 << 10} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) { benchRawRaft(b, 1, cluster.LogStoreWAL, size) })
	}
}

func benchRawRaft(b *testing.B, clients int, kind string, size int) {
	base := b.TempDir()
	var servers []raft.Server
	for i := 0; i < 3; i++ {
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint("n", i)), Address: raft.ServerAddress(freeAddr(b))})
	}
	var rafts []*raft.Raft
	var stores []*timedLogStore
	for i, s := range servers {
		cfg := raft.DefaultConfig()
		cfg.LocalID = s.ID
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
		cfg.CommitTimeout, cfg.BatchApplyCh, cfg.MaxAppendEntries = 5*time.Millisecond, true, 512
		cfg.Logger = NewHCLogger(discardLogger(), "raft")
		dir := filepath.Join(base, fmt.Sprint(i))
		logs, stable := benchLogStore(b, kind, dir)
		ts := &timedLogStore{LogStore: logs}
		stores = append(stores, ts)
		ss, _ := raft.NewFileSnapshotStoreWithLogger(dir, 1, cfg.Logger)
		tr, err := raft.NewTCPTransportWithLogger(string(s.Address), nil, 5, 5*time.Second, cfg.Logger)
		if err != nil {
			b.Fatal(err)
		}
		_ = raft.BootstrapCluster(cfg, ts, stable, ss, tr, raft.Configuration{Servers: servers})
		r, err := raft.NewRaft(cfg, noopFSM{}, ts, stable, ss, tr)
		if err != nil {
			b.Fatal(err)
		}
		rafts = append(rafts, r)
		b.Cleanup(func() { r.Shutdown().Error(); tr.Close() })
	}
	obs := make(chan raft.Observation, 16)
	for _, r := range rafts {
		r.RegisterObserver(raft.NewObserver(obs, false, nil))
	}
	var leader *raft.Raft
	for leader == nil {
		for _, r := range rafts {
			if r.State() == raft.Leader {
				leader = r
			}
		}
		if leader == nil {
			<-obs
		}
	}
	if err := leader.Barrier(5 * time.Second).Error(); err != nil {
		b.Fatal(err)
	}
	for _, s := range stores {
		s.reset()
	}
	payload := bytes.Repeat([]byte("x"), size)
	var done atomic.Int64
	lat := make([][]time.Duration, clients)
	b.ResetTimer()
	cpu0 := testutil.ProcessCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for done.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := leader.Apply(payload, 5*time.Second).Error(); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := testutil.ProcessCPU() - cpu0
	b.StopTimer()
	var all, appends []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	entries := 0
	for _, s := range stores {
		s.mu.Lock()
		appends, entries = append(appends, s.lat...), entries+s.entries
		s.mu.Unlock()
	}
	report(b, all, b.N, elapsed, "entries/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/entry")
	}
	if len(appends) > 0 {
		sort.Slice(appends, func(i, j int) bool { return appends[i] < appends[j] })
		b.ReportMetric(float64(appends[len(appends)/2].Microseconds()), "append-p50-us")
		b.ReportMetric(float64(appends[len(appends)*99/100].Microseconds()), "append-p99-us")
		b.ReportMetric(float64(entries)/float64(len(appends)), "entries-per-append")
	}
}
