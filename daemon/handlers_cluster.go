package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Cluster, operator and snapshot methods.

func (a *Agent) peers() []rpc.Peer {
	leader, _ := a.prop.Leader()
	var out []rpc.Peer
	for _, s := range a.prop.Servers() {
		st := "follower"
		if s.ID == leader {
			st = "leader"
		}
		out = append(out, rpc.Peer{ID: s.ID, Address: s.Address, Suffrage: strings.ToLower(s.Suffrage), State: st})
	}
	return out
}

func (a *Agent) clusterStatus(context.Context, struct{}) (rpc.ClusterStatus, error) {
	s := a.node.Status()
	return rpc.ClusterStatus{NodeID: s.NodeID, LeaderID: s.LeaderID, State: strings.ToLower(s.State), Term: s.Term,
		CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, LastContact: s.LastContact,
		Peers: a.peers(), Version: a.cfg.Version, PID: os.Getpid(), FSMVersion: a.fsmVersion()}, nil
}

func (a *Agent) clusterStats(context.Context, struct{}) (rpc.ClusterStats, error) {
	counts, err := a.state.CountRuns()
	if err != nil {
		return rpc.ClusterStats{}, err
	}
	qs, err := a.state.Queues()
	if err != nil {
		return rpc.ClusterStats{}, err
	}
	c, err := a.state.Counters()
	if err != nil {
		return rpc.ClusterStats{}, err
	}
	out := rpc.ClusterStats{Runs: countsOf(counts), Queues: map[string]int{}, TasksPerSecond: a.rate.perSecond(),
		LeaseExpiries: c.LeaseExpiries, TasksDone: c.TasksDone, AppliedIndex: a.state.AppliedIndex()}
	for _, q := range qs {
		out.Queues[q.Name] = q.Ready
		out.Running += q.Running
	}
	return out, nil
}

func (a *Agent) clusterDigest(context.Context, struct{}) (rpc.DigestResult, error) {
	d, idx, err := a.state.Digest()
	return rpc.DigestResult{Digest: d, AppliedIndex: idx}, err
}

// raftPeers lists the configuration with what each member reports of its
// release and state-machine versions (asked in parallel, a second at most).
func (a *Agent) raftPeers(ctx context.Context, _ struct{}) (rpc.PeersResult, error) {
	peers := a.peers()
	members := a.memberVersions(ctx)
	for i := range peers {
		for j := range members {
			if members[j].ID == peers[i].ID {
				peers[i].Member = &members[j]
			}
		}
	}
	return rpc.PeersResult{Peers: peers}, nil
}

func (a *Agent) raftAddPeer(ctx context.Context, p rpc.PeerParams) (rpc.OK, error) {
	if p.ID == "" || p.Address == "" {
		return rpc.OK{}, invalid("id and address are required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRaftAddPeer, p, func(context.Context) (rpc.OK, error) {
		return rpc.OK{OK: true}, a.node.AddVoter(p.ID, p.Address)
	})
}

func (a *Agent) raftRemovePeer(ctx context.Context, p rpc.PeerParams) (rpc.OK, error) {
	if p.ID == "" {
		return rpc.OK{}, invalid("id is required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRaftRemovePeer, p, func(context.Context) (rpc.OK, error) {
		return rpc.OK{OK: true}, a.node.RemoveServer(p.ID)
	})
}

func (a *Agent) raftTransfer(ctx context.Context, p rpc.PeerParams) (rpc.OK, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRaftTransfer, p, func(context.Context) (rpc.OK, error) {
		return rpc.OK{OK: true}, a.node.TransferLeadership(p.ID)
	})
}

// Snapshot files live only in the agent's --snapshot-dir (issue 11): a
// snapshot path is a plain file name in that directory, never a path, so
// an admin call cannot write or read anything else on the machine, and no
// answer depends on what exists outside it. save creates the file with
// O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600, the directory 0700), so it never
// replaces a file nor follows a link planted in the directory; restore
// opens it with O_NOFOLLOW and reads only a regular file.

// snapshotFile checks that name is a file name for --snapshot-dir and
// returns the directory and the file's path in it. verb is "writes" or
// "reads", for the message.
func (a *Agent) snapshotFile(method, verb, name string) (dir, path string, err error) {
	dir = a.cfg.SnapshotDir
	if dir == "" {
		return "", "", invalid("%s is disabled on %s: the agent has no --snapshot-dir; start it with --snapshot-dir DIR (or --data-dir)", method, a.cfg.NodeID)
	}
	hint := fmt.Sprintf("%s %s only inside --snapshot-dir %s on %s: pass a file name", method, verb, dir, a.cfg.NodeID)
	if name == "" {
		return "", "", invalid("path is required: %s, e.g. \"backup-1.snap\"", hint)
	}
	if filepath.IsAbs(name) || strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." || len(name) > 255 {
		ex := filepath.Base(strings.ReplaceAll(name, "\\", "/"))
		if ex == "." || ex == ".." || ex == "/" || strings.ContainsRune(ex, 0) || len(ex) > 255 {
			ex = "backup-1.snap"
		}
		return "", "", invalid("path %q is not a file name: %s (no directories, no \"..\"), e.g. %q", name, hint, ex)
	}
	return dir, filepath.Join(dir, name), nil
}

// snapshotSave writes this node's state, as of its applied index, to a new
// file in --snapshot-dir on the agent's machine.
func (a *Agent) snapshotSave(_ context.Context, p rpc.SnapshotParams) (rpc.SnapshotResult, error) {
	dir, path, err := a.snapshotFile(rpc.MethodSnapshotSave, "writes", p.Path)
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return rpc.SnapshotResult{}, fmt.Errorf("snapshot directory %s: %w (check --snapshot-dir)", dir, err)
	}
	snap, err := a.state.Snapshot()
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	defer snap.Release()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return rpc.SnapshotResult{}, invalid("%q already exists in --snapshot-dir %s on %s: snapshot.save never replaces a file; pass a new file name (or remove the old file)", p.Path, dir, a.cfg.NodeID)
		}
		return rpc.SnapshotResult{}, fmt.Errorf("create %s: %w (check --snapshot-dir)", path, err)
	}
	n, err := snap.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(path) // ours: created above with O_EXCL
		return rpc.SnapshotResult{}, fmt.Errorf("write snapshot %s: %w", path, err)
	}
	return rpc.SnapshotResult{Path: path, Bytes: n, AppliedIndex: snap.Index}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// openSnapshot opens a snapshot file of --snapshot-dir for reading: not
// through a symbolic link, and only a regular file (O_NONBLOCK: a FIFO
// planted there does not hang the open).
func (a *Agent) openSnapshot(name string) (*os.File, string, error) {
	dir, path, err := a.snapshotFile(rpc.MethodSnapshotRest, "reads", name)
	if err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, "", invalid("%q in --snapshot-dir %s on %s is a symbolic link: snapshot.restore reads only regular files there; copy the snapshot into the directory", name, dir, a.cfg.NodeID)
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", invalid("no snapshot %q in --snapshot-dir %s on %s (the leader, which reads it): copy the file there first", name, dir, a.cfg.NodeID)
	case err != nil:
		return nil, "", invalid("open %q in --snapshot-dir %s on %s: %v", name, dir, a.cfg.NodeID, errors.Unwrap(err))
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = invalid("%q in --snapshot-dir %s on %s is not a regular file: snapshot.restore reads only files written by snapshot.save (or copied there)", name, dir, a.cfg.NodeID)
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, path, nil
}

// snapshotRestore installs a snapshot file as the whole cluster's state
// (raft user restore). It runs on the leader and reads the file from the
// leader's --snapshot-dir; everything applied since is replaced.
func (a *Agent) snapshotRestore(ctx context.Context, p rpc.SnapshotParams) (rpc.SnapshotResult, error) {
	ctx, cancel := withTimeout(ctx, time.Minute)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodSnapshotRest, p, func(context.Context) (rpc.SnapshotResult, error) {
		f, path, err := a.openSnapshot(p.Path)
		if err != nil {
			return rpc.SnapshotResult{}, err
		}
		defer f.Close()
		// Validate before touching the cluster.
		if err := fsm.ReadSnapshot(f, func(k, v []byte) error { return nil }); err != nil {
			return rpc.SnapshotResult{}, invalid("%s: %v (is it a file written by snapshot.save?)", path, err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			return rpc.SnapshotResult{}, err
		}
		st, err := f.Stat()
		if err != nil {
			return rpc.SnapshotResult{}, err
		}
		if !a.node.IsLeader() {
			return rpc.SnapshotResult{}, a.node.Barrier(ctx) // returns NotLeaderError
		}
		meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: st.Size()}
		if err := a.node.Raft().Restore(meta, f, time.Minute); err != nil {
			return rpc.SnapshotResult{}, fmt.Errorf("restore: %w", err)
		}
		// The restore is itself a log position: a barrier makes the FSM
		// report the cluster's index, not the snapshot file's.
		if err := a.node.Barrier(ctx); err != nil {
			return rpc.SnapshotResult{}, err
		}
		return rpc.SnapshotResult{Path: path, Bytes: st.Size(), AppliedIndex: a.state.AppliedIndex()}, nil
	})
}
