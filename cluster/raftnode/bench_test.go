package raftnode

import (
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
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
)

// Benchmarks of the replicated path, three nodes on loopback TCP with bolt
// logs fsynced on every append, as in production. Numbers are reported as
// custom metrics (tasks/s, p50-ms, p99-ms); compare flowd against the raw
// raft ceiling measured the same way, as a ratio.
//
//	go test -run ^$ -bench 'Replicated|RawRaft' -benchtime 3s ./cluster/

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

func report(b *testing.B, lat []time.Duration, ops int, elapsed time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), "tasks/s")
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
			report(b, all, int(done.Load()), elapsed)
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

// BenchmarkRawRaft is the ceiling: the same raft config, bolt stores and TCP
// transport with an FSM that does nothing. Eight clients is the queue
// harness's eight closed-loop producers: what raft alone commits for them
// bounds what any state machine on it can acknowledge to them.
func BenchmarkRawRaft(b *testing.B) {
	for _, clients := range []int{1, 8, 16, 128} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			base := b.TempDir()
			var servers []raft.Server
			for i := 0; i < 3; i++ {
				servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint("n", i)), Address: raft.ServerAddress(freeAddr(b))})
			}
			var rafts []*raft.Raft
			for i, s := range servers {
				cfg := raft.DefaultConfig()
				cfg.LocalID = s.ID
				cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
				cfg.CommitTimeout, cfg.BatchApplyCh, cfg.MaxAppendEntries = 5*time.Millisecond, true, 512
				cfg.Logger = NewHCLogger(discardLogger(), "raft")
				dir := filepath.Join(base, fmt.Sprint(i))
				_ = os.MkdirAll(dir, 0o755)
				bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
				if err != nil {
					b.Fatal(err)
				}
				ss, _ := raft.NewFileSnapshotStoreWithLogger(dir, 1, cfg.Logger)
				tr, err := raft.NewTCPTransportWithLogger(string(s.Address), nil, 5, 5*time.Second, cfg.Logger)
				if err != nil {
					b.Fatal(err)
				}
				_ = raft.BootstrapCluster(cfg, bolt, bolt, ss, tr, raft.Configuration{Servers: servers})
				r, err := raft.NewRaft(cfg, noopFSM{}, bolt, bolt, ss, tr)
				if err != nil {
					b.Fatal(err)
				}
				rafts = append(rafts, r)
				b.Cleanup(func() { r.Shutdown().Error(); tr.Close(); bolt.Close() })
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
			var done atomic.Int64
			lat := make([][]time.Duration, clients)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					for done.Add(1) <= int64(b.N) {
						t0 := time.Now()
						if err := leader.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
							b.Error(err)
							return
						}
						lat[c] = append(lat[c], time.Since(t0))
					}
				}(c)
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			report(b, all, b.N, elapsed)
		})
	}
}
