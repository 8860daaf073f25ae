package raftnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
)

// Outage recovery (DESIGN.md, "Quorum-loss recovery"): when a majority of
// the voters is gone for good, a survivor's data dir is given a new raft
// configuration offline, with raft.RecoverCluster, and its agent is started
// again as the leader of that configuration.

// ErrDataDirInUse: the data dir's stores are locked by a running agent.
var ErrDataDirInUse = errors.New("the data dir is in use by a running agent")

// DataDirInfo is what a stopped node's data dir holds (Inspect).
type DataDirInfo struct {
	// LastIndex and LastTerm are the raft log's last entry (or the newest
	// snapshot's, when the log ends before it): what a recovery from this
	// data dir would keep. Pick the survivor with the highest LastTerm, then
	// the highest LastIndex.
	LastIndex uint64 `json:"last_index"`
	LastTerm  uint64 `json:"last_term"`
	// FirstIndex is the oldest entry still in the log (0: empty).
	FirstIndex uint64 `json:"first_index"`
	// AppliedIndex is the state store's applied index.
	AppliedIndex uint64 `json:"applied_index"`
	// SnapshotIndex and SnapshotTerm are the newest raft snapshot's (0: none).
	SnapshotIndex uint64 `json:"snapshot_index"`
	SnapshotTerm  uint64 `json:"snapshot_term"`
	// CurrentTerm is the term raft last persisted.
	CurrentTerm uint64 `json:"current_term"`
	// Servers is the latest raft configuration in the log (committed or not).
	Servers []cluster.PeerStatus `json:"servers"`
	// LogStore is the data dir's raft log store (cluster.LogStoreWAL or
	// LogStoreBolt).
	LogStore string `json:"log_store"`
}

// RecoverResult reports a recovery.
type RecoverResult struct {
	Before DataDirInfo `json:"before"`
	// Servers is the new configuration.
	Servers []cluster.Peer `json:"servers"`
	// Replayed is how many log entries were applied to the state during the
	// recovery (entries the state store had not applied yet; they include
	// any the old cluster never committed).
	Replayed int `json:"replayed"`
	// AppliedIndex is the state's applied index afterwards, and the index
	// of the snapshot that now holds the new configuration.
	AppliedIndex uint64 `json:"applied_index"`
}

// ReadPeersFile reads a peers.json file: a JSON array of
// {"id": "n1", "address": "10.0.0.1:7001"} objects (Consul's format;
// "non_voter": true is refused: every flowd member is a voter).
func ReadPeersFile(path string) ([]cluster.Peer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw []struct {
		ID       string `json:"id"`
		Address  string `json:"address"`
		NonVoter bool   `json:"non_voter"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: %w (want a JSON array of {\"id\": \"n1\", \"address\": \"host:port\"})", path, err)
	}
	var parts []string
	for i, p := range raw {
		if p.NonVoter {
			return nil, fmt.Errorf("%s: entry %d (%s): non_voter is not supported; list voters only", path, i, p.ID)
		}
		if p.ID == "" || p.Address == "" || strings.ContainsAny(p.ID+p.Address, ",=") {
			return nil, fmt.Errorf("%s: entry %d needs an \"id\" and a host:port \"address\" (without ',' or '=')", path, i)
		}
		parts = append(parts, p.ID+"="+p.Address)
	}
	peers, err := cluster.ParsePeers(strings.Join(parts, ","))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("%s lists no servers", path)
	}
	return peers, nil
}

// offlineNode opens a stopped node's stores exactly as New does (openStores,
// without raft). catchUp restores the newest snapshot into a state store
// that is behind it, as an agent's start would.
func offlineNode(cfg Config, catchUp bool) (*Node, error) {
	cfg.defaults()
	if cfg.NodeID == "" {
		return nil, errors.New("node id is required (--node-id): the id this data dir's agent runs with")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("data dir is required (--data-dir)")
	}
	dir := filepath.Join(cfg.DataDir, "raft")
	if kind, err := detectLogStore(dir); err != nil {
		return nil, err
	} else if kind == "" {
		return nil, fmt.Errorf("no raft log in %s (neither %s nor %s/): --data-dir must be the stopped agent's existing data dir", dir, boltLogFile, walLogDir)
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), stop: make(chan struct{}), failed: make(chan struct{})}
	n.digest = newDigestState(n)
	n.cfg.skipCatchUp = !catchUp
	if err := n.openStores(); err != nil {
		n.closeAll()
		if inUse(err) {
			return nil, fmt.Errorf("%w (%v)", ErrDataDirInUse, err)
		}
		return nil, err
	}
	return n, nil
}

// inUse reports whether an open failed on another process's file lock
// (badger's directory lock, or bolt's after its 1 s timeout).
func inUse(err error) bool {
	return errors.Is(err, bbolt.ErrTimeout) || errors.Is(err, syscall.EWOULDBLOCK) ||
		strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// offlineRaftConfig is the raft configuration for the offline calls.
func (n *Node) offlineRaftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.NodeID)
	rc.NoSnapshotRestoreOnStart = true
	rc.Logger = NewHCLogger(n.log, "raft")
	return rc
}

// info reads what the opened stores hold.
func (n *Node) info(f raft.FSM, snaps raft.SnapshotStore, trans raft.Transport) (DataDirInfo, error) {
	d := DataDirInfo{LogStore: n.logStore}
	var err error
	d.AppliedIndex = n.fsm.AppliedIndex()
	if d.FirstIndex, err = n.cfg.LogStore.FirstIndex(); err != nil {
		return d, err
	}
	if d.LastIndex, err = n.cfg.LogStore.LastIndex(); err != nil {
		return d, err
	}
	if d.LastIndex > 0 {
		var l raft.Log
		if err := n.cfg.LogStore.GetLog(d.LastIndex, &l); err != nil {
			return d, fmt.Errorf("read the last log entry %d: %w", d.LastIndex, err)
		}
		d.LastTerm = l.Term
	}
	metas, err := snaps.List()
	if err != nil {
		return d, fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) > 0 {
		d.SnapshotIndex, d.SnapshotTerm = metas[0].Index, metas[0].Term
		if metas[0].Index > d.LastIndex {
			d.LastIndex, d.LastTerm = metas[0].Index, metas[0].Term
		}
	}
	if d.CurrentTerm, err = n.cfg.StableStore.GetUint64([]byte("CurrentTerm")); err != nil && err.Error() != "not found" {
		return d, fmt.Errorf("read the current term: %w", err)
	}
	conf, err := raft.GetConfiguration(n.offlineRaftConfig(), f, n.cfg.LogStore, n.cfg.StableStore, snaps, trans)
	if err != nil {
		return d, fmt.Errorf("read the raft configuration: %w", err)
	}
	for _, s := range conf.Servers {
		d.Servers = append(d.Servers, cluster.PeerStatus{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	return d, nil
}

// Inspect reads a stopped node's data dir and changes nothing: how an
// operator picks the survivor to recover from.
func Inspect(cfg Config) (DataDirInfo, error) {
	n, err := offlineNode(cfg, false)
	if err != nil {
		return DataDirInfo{}, err
	}
	defer n.closeAll()
	_, trans := raft.NewInmemTransport("")
	return n.info(&raftFSM{f: n.fsm}, n.cfg.SnapshotStore, trans)
}

// Recover gives a stopped node's data dir a new raft configuration
// (servers; nil: this node alone at the address the old configuration
// lists for it) with raft.RecoverCluster, for when a majority of the voters
// is lost for good. The node's state becomes everything in its raft log,
// including entries the old cluster may never have committed. Start the
// agent afterwards with its usual flags (its --peers is ignored: the data
// dir has raft state) and it leads the new configuration.
//
// The state machine keeps its own applied index (DESIGN.md, invariant
// "Nothing applied twice on restart"), and RecoverCluster assumes a state
// machine that starts empty, so the FSM it is given is adapted: a snapshot
// is restored only if the state is behind it (the state never goes back),
// replayed entries at or below the applied index are skipped by the FSM,
// and before RecoverCluster snapshots the state it is moved to the
// snapshot's index (RecoverCluster applies only command entries), so the
// agent's start does not restore the recovery snapshot again. Persisting
// that snapshot syncs the state store before RecoverCluster deletes the log.
func Recover(cfg Config, servers []cluster.Peer) (RecoverResult, error) {
	var res RecoverResult
	n, err := offlineNode(cfg, true)
	if err != nil {
		return res, err
	}
	defer n.closeAll()
	snaps := &recordingSnaps{SnapshotStore: n.cfg.SnapshotStore}
	_, trans := raft.NewInmemTransport("")
	rf := &recoverFSM{n: n, a: &raftFSM{f: n.fsm}, snaps: snaps}
	if res.Before, err = n.info(rf, snaps, trans); err != nil {
		return res, err
	}
	if res.Before.LastIndex == 0 {
		return res, fmt.Errorf("the data dir %s holds no raft log or snapshot: nothing to recover", cfg.DataDir)
	}
	var was *cluster.PeerStatus
	for i, s := range res.Before.Servers {
		if s.ID == cfg.NodeID {
			was = &res.Before.Servers[i]
		}
	}
	if was == nil {
		// A wrong --node-id (or another node's data dir): the agent would
		// start as a member it is not.
		return res, fmt.Errorf("%s is not in the data dir's raft configuration %v: give the id this data dir's agent runs with", cfg.NodeID, res.Before.Servers)
	}
	if len(servers) == 0 {
		servers = []cluster.Peer{{ID: was.ID, Address: was.Address}}
	}
	conf := raft.Configuration{}
	self := false
	for _, p := range servers {
		self = self || p.ID == cfg.NodeID
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Address), Suffrage: raft.Voter})
	}
	if !self {
		return res, fmt.Errorf("the new configuration must include this node (%s): it is the one that will lead it", cfg.NodeID)
	}
	res.Servers = servers
	rf.target = res.Before.LastIndex
	if err := raft.RecoverCluster(n.offlineRaftConfig(), rf, n.cfg.LogStore, n.cfg.StableStore, snaps, trans, conf); err != nil {
		if f := n.Failure(); f != nil {
			return res, f
		}
		return res, fmt.Errorf("recover: %w", err)
	}
	if f := n.Failure(); f != nil {
		return res, f
	}
	res.Replayed = rf.replayed
	res.AppliedIndex = n.fsm.AppliedIndex()
	n.log.Warn("raft configuration recovered", "servers", servers, "applied", res.AppliedIndex, "replayed", res.Replayed)
	return res, nil
}

// recordingSnaps remembers the snapshot RecoverCluster opened last (the one
// it restores).
type recordingSnaps struct {
	raft.SnapshotStore
	opened *raft.SnapshotMeta
}

func (s *recordingSnaps) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err == nil {
		s.opened = meta
	}
	return meta, rc, err
}

// recoverFSM is the FSM RecoverCluster drives (see Recover).
type recoverFSM struct {
	n        *Node
	a        *raftFSM
	snaps    *recordingSnaps
	target   uint64 // the index RecoverCluster's snapshot will carry
	replayed int
}

func (r *recoverFSM) Apply(l *raft.Log) any {
	if err := r.n.Failure(); err != nil {
		return err
	}
	if l.Index > r.a.f.AppliedIndex() {
		r.replayed++
	}
	return r.a.ApplyBatch([]*raft.Log{l})[0]
}

func (r *recoverFSM) Restore(rc io.ReadCloser) error {
	if o := r.snaps.opened; o != nil && r.a.f.AppliedIndex() >= o.Index {
		r.n.log.Info("state is at or past the snapshot; not restoring it", "applied", r.a.f.AppliedIndex(), "snapshot", o.Index)
		return rc.Close()
	}
	return r.a.Restore(rc)
}

func (r *recoverFSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := r.n.Failure(); err != nil {
		return nil, err
	}
	target := r.target
	if o := r.snaps.opened; o != nil && o.Index > target {
		target = o.Index
	}
	if r.a.f.AppliedIndex() < target {
		// The entries after the last command were configuration changes,
		// barriers or no-ops; the adapter applies them as no-ops (adapter.go).
		r.a.f.ApplyBatch([]fsm.Entry{{Index: target, Data: noopEntry}})
	}
	if err := r.n.Failure(); err != nil {
		return nil, err
	}
	return r.a.Snapshot()
}
