package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// snapshotReader takes a consistent view of the state for snapshot.save.
type snapshotReader interface {
	Snapshot() (*fsm.Snapshot, error)
}

// Snapshots stream over the connection or stay inside a configured
// directory.
//
// Snapshot files live only in the agent's --snapshot-dir (issue 11): a
// snapshot path is a plain file name in that directory, never a path, so
// an admin call cannot write or read anything else on the machine, and no
// answer depends on what exists outside it. save writes a temporary file
// there (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, the directory 0700) and
// links it to its name, so it never replaces a file nor follows a link
// planted in the directory, and a name never holds a partial snapshot;
// restore opens the name with O_NOFOLLOW and reads only a regular file.
//
// A snapshot that crosses the connection (snapshot_transfer.go) is staged
// in the same directory, under a temporary name of this agent's, and
// removed when the transfer ends. Scheduled snapshots (snapshot_schedule.go)
// are written there too.

// tmpPrefix starts the names of this agent's temporary files in
// --snapshot-dir (saves in progress, transfers); they are removed at
// start (removeStaleTemps) and never match a name a caller can restore.
func (a *Agent) tmpPrefix() string { return ".flowd-tmp-" + a.cfg.NodeID + "-" }

// snapshotFile checks that name is a file name for --snapshot-dir and
// returns the directory and the file's path in it. verb is "writes" or
// "reads", for the message.
func (a *Agent) snapshotFile(method, verb, name string) (dir, path string, err error) {
	dir, err = a.snapshotDir(method)
	if err != nil {
		return "", "", err
	}
	hint := fmt.Sprintf("%s %s only inside --snapshot-dir %s on %s: pass a file name", method, verb, dir, a.cfg.NodeID)
	if name == "" {
		return "", "", invalid("path is required: %s, e.g. \"backup-1.snap\" (or stream the snapshot: flowd snapshot save --out FILE)", hint)
	}
	if filepath.IsAbs(name) || strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." || len(name) > 255 {
		ex := filepath.Base(strings.ReplaceAll(name, "\\", "/"))
		if ex == "." || ex == ".." || ex == "/" || strings.ContainsRune(ex, 0) || len(ex) > 255 {
			ex = "backup-1.snap"
		}
		return "", "", invalid("path %q is not a file name: %s (no directories, no \"..\"), e.g. %q", name, hint, ex)
	}
	if strings.HasPrefix(name, ".flowd-tmp-") {
		return "", "", invalid("path %q is a name flowd uses for its temporary files: %s not starting with \".flowd-tmp-\"", name, hint)
	}
	return dir, filepath.Join(dir, name), nil
}

func (a *Agent) snapshotDir(method string) (string, error) {
	if a.cfg.SnapshotDir == "" {
		return "", invalid("%s is disabled on %s: the agent has no --snapshot-dir; start it with --snapshot-dir DIR (or --data-dir)", method, a.cfg.NodeID)
	}
	return a.cfg.SnapshotDir, nil
}

// newTransferID names a transfer or a temporary file: 64 random bits.
func newTransferID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// snapshotWritten describes a snapshot file this agent wrote.
type snapshotWritten struct {
	path   string
	bytes  int64
	sha256 string
	index  uint64
}

// dumpSnapshot writes this node's state, as of its applied index, to a new
// temporary file in dir, fsynced, and returns it open (at its end) with
// what it holds. On error nothing is left behind.
func (a *Agent) dumpSnapshot(dir string) (*os.File, snapshotWritten, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, snapshotWritten{}, fmt.Errorf("snapshot directory %s: %w (check --snapshot-dir)", dir, err)
	}
	snap, err := a.state.Snapshot()
	if err != nil {
		return nil, snapshotWritten{}, err
	}
	defer snap.Release()
	path := filepath.Join(dir, a.tmpPrefix()+newTransferID())
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, snapshotWritten{}, fmt.Errorf("create %s: %w (check --snapshot-dir)", path, err)
	}
	h := sha256.New()
	n, err := snap.WriteTo(io.MultiWriter(f, h))
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		_ = os.Remove(path) // ours: created above with O_EXCL
		return nil, snapshotWritten{}, fmt.Errorf("write snapshot %s: %w", path, err)
	}
	return f, snapshotWritten{path: path, bytes: n, sha256: hex.EncodeToString(h.Sum(nil)), index: snap.Index}, nil
}

// writeSnapshotFile writes a snapshot to path (a name in dir): through a
// temporary file linked to its name, so the name never holds a partial
// snapshot and an existing name (or link) is never replaced.
func (a *Agent) writeSnapshotFile(method, dir, path string) (snapshotWritten, error) {
	if _, err := os.Lstat(path); err == nil {
		return snapshotWritten{}, a.snapshotExists(method, dir, path)
	}
	f, w, err := a.dumpSnapshot(dir)
	if err != nil {
		return w, err
	}
	f.Close()
	defer os.Remove(w.path) // the temporary name; the file stays under path
	if err := os.Link(w.path, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return snapshotWritten{}, a.snapshotExists(method, dir, path)
		}
		return snapshotWritten{}, fmt.Errorf("write snapshot %s: %w (check --snapshot-dir)", path, err)
	}
	if err := syncDir(dir); err != nil {
		return snapshotWritten{}, fmt.Errorf("write snapshot %s: %w", path, err)
	}
	w.path = path
	return w, nil
}

func (a *Agent) snapshotExists(method, dir, path string) error {
	return invalid("%q already exists in --snapshot-dir %s on %s: %s never replaces a file; pass a new file name (or remove the old file)",
		filepath.Base(path), dir, a.cfg.NodeID, method)
}

// snapshotSave writes a snapshot: to a new file in --snapshot-dir, or (with
// stream) to a transfer the caller reads with snapshot.read. It runs on
// the connected agent, on the leader with leader: true, or on the agent
// node names (forwarded there).
func (a *Agent) snapshotSave(ctx context.Context, p rpc.SnapshotParams) (rpc.SnapshotResult, error) {
	if p.Transfer != "" || p.Bytes != 0 || p.SHA256 != "" {
		return rpc.SnapshotResult{}, invalid("transfer, bytes and sha256 are snapshot.restore's params; snapshot.save takes path or stream, and leader or node")
	}
	if p.Stream && p.Path != "" {
		return rpc.SnapshotResult{}, invalid("pass either path (a file name in --snapshot-dir) or stream: true (read the snapshot over the connection with snapshot.read), not both")
	}
	if p.Leader && p.Node != "" {
		return rpc.SnapshotResult{}, invalid("pass leader: true or node, not both")
	}
	local := func(context.Context) (rpc.SnapshotResult, error) {
		if p.Stream {
			return a.openDownload()
		}
		dir, path, err := a.snapshotFile(rpc.MethodSnapshotSave, "writes", p.Path)
		if err != nil {
			return rpc.SnapshotResult{}, err
		}
		w, err := a.writeSnapshotFile(rpc.MethodSnapshotSave, dir, path)
		if err != nil {
			return rpc.SnapshotResult{}, err
		}
		return rpc.SnapshotResult{Path: w.path, Bytes: w.bytes, AppliedIndex: w.index, Node: a.cfg.NodeID, SHA256: w.sha256}, nil
	}
	ctx, cancel := withTimeout(ctx, time.Minute)
	defer cancel()
	if p.Leader {
		return onLeader(ctx, a.proxy, rpc.MethodSnapshotSave, p, local)
	}
	return onNode(ctx, a.proxy, p.Node, rpc.MethodSnapshotSave, p, local)
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
	dir, path, err := a.snapshotFile(rpc.MethodSnapshotRestore, "reads", name)
	if err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, "", invalid("%q in --snapshot-dir %s on %s is a symbolic link: snapshot.restore reads only regular files there; copy the snapshot into the directory", name, dir, a.cfg.NodeID)
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", invalid("no snapshot %q in --snapshot-dir %s on %s (the leader, which reads it): copy the file there first, or upload it (flowd snapshot restore --in FILE)", name, dir, a.cfg.NodeID)
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

// snapshotRestore installs a snapshot as the whole cluster's state (raft
// user restore). It runs on the leader and reads a file from the leader's
// --snapshot-dir, or an upload the leader holds (snapshot.upload) whose
// size and SHA-256 match; everything applied since is replaced.
func (a *Agent) snapshotRestore(ctx context.Context, p rpc.SnapshotParams) (rpc.SnapshotResult, error) {
	if p.Stream || p.Leader || (p.Node != "" && p.Transfer == "") {
		return rpc.SnapshotResult{}, invalid("snapshot.restore always runs on the leader and takes path, or transfer with bytes and sha256 (stream, leader and node are snapshot.save's)")
	}
	if p.Path != "" && p.Transfer != "" {
		return rpc.SnapshotResult{}, invalid("pass either path (a file name in the leader's --snapshot-dir) or transfer (an upload: snapshot.upload), not both")
	}
	ctx, cancel := withTimeout(ctx, 2*time.Minute)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodSnapshotRestore, p, func(context.Context) (rpc.SnapshotResult, error) {
		var f *os.File
		var path, sum string
		if p.Transfer != "" {
			t, err := a.finishUpload(p)
			if err != nil {
				return rpc.SnapshotResult{}, err
			}
			defer t.discard()
			f, path, sum = t.f, "", t.sum
		} else {
			var err error
			if f, path, err = a.openSnapshot(p.Path); err != nil {
				return rpc.SnapshotResult{}, err
			}
			defer f.Close()
		}
		what := path
		if what == "" {
			what = "the upload"
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return rpc.SnapshotResult{}, err
		}
		// Validate before touching the cluster.
		snapIndex, err := fsm.CheckSnapshot(f)
		if err != nil {
			return rpc.SnapshotResult{}, invalid("%s: %v (is it a file written by snapshot.save?); nothing was restored", what, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return rpc.SnapshotResult{}, err
		}
		st, err := f.Stat()
		if err != nil {
			return rpc.SnapshotResult{}, err
		}
		if !a.node.IsLeader() {
			return rpc.SnapshotResult{}, a.node.Barrier(ctx) // returns NotLeaderError
		}
		start := time.Now()
		// Index: raft puts the restore past the snapshot's own index (a
		// snapshot from a cluster whose log is ahead of this one's).
		if err := a.node.RestoreSnapshot(f, st.Size(), snapIndex, time.Minute); err != nil {
			return rpc.SnapshotResult{}, fmt.Errorf("restore: %w", err)
		}
		// The restore is itself a log position: a barrier makes the FSM
		// report the cluster's index, not the snapshot file's.
		if err := a.node.Barrier(ctx); err != nil {
			return rpc.SnapshotResult{}, err
		}
		// The snapshot holds the addresses of the cluster it came from.
		if err := a.publishSelf(ctx); err != nil {
			a.log.Warn("publishing this agent's addresses after the restore failed; retrying", "err", err)
		}
		a.log.Info("snapshot restored", "from", what, "bytes", st.Size(), "applied_index", a.state.AppliedIndex(), "ms", time.Since(start).Milliseconds())
		return rpc.SnapshotResult{Path: path, Bytes: st.Size(), AppliedIndex: a.state.AppliedIndex(), Node: a.cfg.NodeID, SHA256: sum}, nil
	})
}
