package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Snapshot transfers: a snapshot crossing the client connection in chunks
// on the JSON-RPC line protocol (docs/rpc.md, "Snapshot transfers").
//
// A download (snapshot.save with stream: true) dumps the state to a
// temporary file in --snapshot-dir, hashing it on the way, and answers its
// size and SHA-256; the caller reads it with snapshot.read at offsets of
// its choosing and ends it with snapshot.close. An upload
// (snapshot.upload, on the leader) appends the chunks of snapshot.write,
// in order, to a temporary file there, hashing them; snapshot.restore
// with the transfer installs it only if the size and the SHA-256 the
// caller declares match what arrived and the file is a complete snapshot.
// Anything else (a missing chunk, a lost connection, a wrong checksum, a
// leader change) restores nothing, and the file is removed.
//
// Memory is bounded by one chunk per call (rpc.SnapshotChunkBytes, under
// the line limit), disk by maxTransfers files; a transfer nobody touched
// for transferIdle is dropped with its file (the janitor). A transfer
// lives on one agent (its node); the connected agent forwards each call
// there (onNode), so a download survives a change of leader, and an upload
// finds out at restore that the leader changed.

const (
	// maxTransfers bounds the transfers one agent holds at once.
	maxTransfers = 4
	// transferIdle drops a transfer untouched this long.
	transferIdle = 2 * time.Minute
)

type snapTransfer struct {
	id     string
	upload bool

	mu      sync.Mutex
	f       *os.File
	path    string
	size    int64     // download: the file's size; upload: bytes received
	sum     string    // download: the file's SHA-256
	index   uint64    // download: the snapshot's applied index
	hash    hash.Hash // upload: of the bytes received
	lastOff int64     // upload: the last chunk (a repeat is answered again)
	lastLen int
	touched time.Time
	closed  bool
	// finished: an upload handed to restore; no write changes it now.
	finished bool
}

// discard closes and removes the transfer's file.
func (t *snapTransfer) discard() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	t.f.Close()
	_ = os.Remove(t.path)
}

// transfers are an agent's open transfers.
type transfers struct {
	mu sync.Mutex
	m  map[string]*snapTransfer
}

func (ts *transfers) add(t *snapTransfer) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]*snapTransfer{}
	}
	if len(ts.m) >= maxTransfers {
		return &domain.UnavailableError{RetryAfter: 5 * time.Second,
			Reason: fmt.Sprintf("%d snapshot transfers are open on this agent (the most it holds); finish or close one (snapshot.close), or wait %s for idle ones to expire", len(ts.m), transferIdle)}
	}
	t.touched = time.Now()
	ts.m[t.id] = t
	return nil
}

// get returns the open transfer id, touched, or nil.
func (ts *transfers) get(id string) *snapTransfer {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t != nil {
		t.touched = time.Now()
	}
	return t
}

// take removes transfer id and returns it (nil if none).
func (ts *transfers) take(id string) *snapTransfer {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	delete(ts.m, id)
	return t
}

// expire drops the transfers idle since before cutoff.
func (ts *transfers) expire(cutoff time.Time) []*snapTransfer {
	ts.mu.Lock()
	var out []*snapTransfer
	for id, t := range ts.m {
		if t.touched.Before(cutoff) {
			out = append(out, t)
			delete(ts.m, id)
		}
	}
	ts.mu.Unlock()
	for _, t := range out {
		t.discard()
	}
	return out
}

func (ts *transfers) closeAll() {
	ts.mu.Lock()
	all := ts.m
	ts.m = nil
	ts.mu.Unlock()
	for _, t := range all {
		t.discard()
	}
}

// transferJanitor drops idle transfers until ctx ends, then all of them.
func (a *Agent) transferJanitor(ctx context.Context) {
	tick := time.NewTicker(transferIdle / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			a.snaps.closeAll()
			return
		case <-tick.C:
			for _, t := range a.snaps.expire(time.Now().Add(-transferIdle)) {
				a.log.Warn("snapshot transfer dropped: idle too long", "transfer", t.id, "upload", t.upload, "idle", transferIdle)
			}
		}
	}
}

// removeStaleTemps removes this agent's temporary files that a crash left
// in --snapshot-dir (only names this agent makes: tmpPrefix).
func (a *Agent) removeStaleTemps() {
	dir := a.cfg.SnapshotDir
	if dir == "" {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), a.tmpPrefix()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
				a.log.Info("removed a temporary snapshot file left by an earlier run", "file", e.Name())
			}
		}
	}
}

// chunkBytes is the largest chunk this agent gives or takes: 1 MiB, less
// with a --max-line that cannot carry it in base64.
func (a *Agent) chunkBytes() int {
	n := rpc.SnapshotChunkBytes
	if lim := a.cfg.MaxLine; lim > 0 {
		if fit := (lim - 64<<10) / 4 * 3; fit < n {
			n = max(fit, 4<<10)
		}
	}
	return n
}

// openDownload dumps the state to a transfer (snapshot.save, stream).
func (a *Agent) openDownload() (rpc.SnapshotResult, error) {
	dir, err := a.snapshotDir(rpc.MethodSnapshotSave)
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	f, w, err := a.dumpSnapshot(dir)
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	t := &snapTransfer{id: newTransferID(), f: f, path: w.path, size: w.bytes, sum: w.sha256, index: w.index}
	if err := a.snaps.add(t); err != nil {
		t.discard()
		return rpc.SnapshotResult{}, err
	}
	a.log.Info("snapshot download opened", "transfer", t.id, "bytes", w.bytes, "applied_index", w.index)
	return rpc.SnapshotResult{Bytes: w.bytes, AppliedIndex: w.index, Node: a.cfg.NodeID, SHA256: w.sha256,
		Transfer: t.id, ChunkBytes: a.chunkBytes()}, nil
}

func (a *Agent) transferOf(method, id string, upload bool) (*snapTransfer, error) {
	if id == "" {
		return nil, invalid("transfer is required (from snapshot.save with stream: true, or snapshot.upload)")
	}
	t := a.snaps.get(id)
	if t == nil || t.upload != upload {
		what := "download (snapshot.save with stream: true)"
		if upload {
			what = "upload (snapshot.upload)"
		}
		return nil, fmt.Errorf("%w: no open snapshot %s %q on %s for %s: it ended, expired after %s idle, or its agent restarted; start over",
			domain.ErrNotFound, what, id, a.cfg.NodeID, method, transferIdle)
	}
	return t, nil
}

// snapshotRead answers one chunk of a download.
func (a *Agent) snapshotRead(ctx context.Context, p rpc.SnapshotReadParams) (rpc.SnapshotChunk, error) {
	return onNode(ctx, a.proxy, p.Node, rpc.MethodSnapshotRead, p, func(context.Context) (rpc.SnapshotChunk, error) {
		t, err := a.transferOf(rpc.MethodSnapshotRead, p.Transfer, false)
		if err != nil {
			return rpc.SnapshotChunk{}, err
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			return rpc.SnapshotChunk{}, fmt.Errorf("%w: snapshot download %q was closed", domain.ErrNotFound, p.Transfer)
		}
		if p.Offset < 0 || p.Offset > t.size {
			return rpc.SnapshotChunk{}, invalid("offset %d is outside the snapshot (0 to %d bytes)", p.Offset, t.size)
		}
		n := a.chunkBytes()
		if p.MaxBytes > 0 && p.MaxBytes < n {
			n = p.MaxBytes
		}
		n = int(min(int64(n), t.size-p.Offset))
		buf := make([]byte, n)
		if _, err := t.f.ReadAt(buf, p.Offset); err != nil && err != io.EOF {
			return rpc.SnapshotChunk{}, fmt.Errorf("read snapshot transfer %s: %w", t.id, err)
		}
		return rpc.SnapshotChunk{Offset: p.Offset, Data: buf, EOF: p.Offset+int64(n) == t.size}, nil
	})
}

// snapshotClose ends a transfer (a download read to the end, or an upload
// abandoned) and removes its file.
func (a *Agent) snapshotClose(ctx context.Context, p rpc.SnapshotTransfer) (rpc.OK, error) {
	return onNode(ctx, a.proxy, p.Node, rpc.MethodSnapshotClose, p, func(context.Context) (rpc.OK, error) {
		t := a.snaps.take(p.Transfer)
		if t == nil {
			return rpc.OK{OK: false}, nil // already gone: closing is repeat-safe
		}
		t.discard()
		return rpc.OK{OK: true}, nil
	})
}

// snapshotUpload opens an upload on the leader.
func (a *Agent) snapshotUpload(ctx context.Context, _ rpc.SnapshotUploadParams) (rpc.SnapshotUploadResult, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodSnapshotUpload, struct{}{}, func(context.Context) (rpc.SnapshotUploadResult, error) {
		dir, err := a.snapshotDir(rpc.MethodSnapshotUpload)
		if err != nil {
			return rpc.SnapshotUploadResult{}, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return rpc.SnapshotUploadResult{}, fmt.Errorf("snapshot directory %s: %w (check --snapshot-dir)", dir, err)
		}
		t := &snapTransfer{id: newTransferID(), upload: true, hash: sha256.New()}
		t.path = filepath.Join(dir, a.tmpPrefix()+t.id)
		t.f, err = os.OpenFile(t.path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return rpc.SnapshotUploadResult{}, fmt.Errorf("create %s: %w (check --snapshot-dir)", t.path, err)
		}
		if err := a.snaps.add(t); err != nil {
			t.discard()
			return rpc.SnapshotUploadResult{}, err
		}
		a.log.Info("snapshot upload opened", "transfer", t.id)
		return rpc.SnapshotUploadResult{SnapshotTransfer: rpc.SnapshotTransfer{Transfer: t.id, Node: a.cfg.NodeID}, ChunkBytes: a.chunkBytes()}, nil
	})
}

// snapshotWrite appends one chunk to an upload.
func (a *Agent) snapshotWrite(ctx context.Context, p rpc.SnapshotWriteParams) (rpc.SnapshotWriteResult, error) {
	return onNode(ctx, a.proxy, p.Node, rpc.MethodSnapshotWrite, p, func(context.Context) (rpc.SnapshotWriteResult, error) {
		t, err := a.transferOf(rpc.MethodSnapshotWrite, p.Transfer, true)
		if err != nil {
			return rpc.SnapshotWriteResult{}, err
		}
		if len(p.Data) > a.chunkBytes() {
			return rpc.SnapshotWriteResult{}, fmt.Errorf("%w: a chunk of %d bytes; %s takes at most %d (chunk_bytes of snapshot.upload)",
				domain.ErrTooLarge, len(p.Data), a.cfg.NodeID, a.chunkBytes())
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		switch {
		case t.closed || t.finished:
			return rpc.SnapshotWriteResult{}, fmt.Errorf("%w: snapshot upload %q was closed or restored", domain.ErrNotFound, p.Transfer)
		case p.Offset == t.lastOff && len(p.Data) == t.lastLen && p.Offset+int64(len(p.Data)) == t.size:
			return rpc.SnapshotWriteResult{Received: t.size}, nil // a repeat of the last chunk
		case p.Offset != t.size:
			return rpc.SnapshotWriteResult{}, invalid("chunk at offset %d, but %d bytes were received so far: send the chunks in order, each at the offset the last answer's received gives", p.Offset, t.size)
		}
		if _, err := t.f.Write(p.Data); err != nil {
			return rpc.SnapshotWriteResult{}, fmt.Errorf("write snapshot upload %s: %w (check the space in --snapshot-dir)", t.path, err)
		}
		t.hash.Write(p.Data)
		t.lastOff, t.lastLen = t.size, len(p.Data)
		t.size += int64(len(p.Data))
		return rpc.SnapshotWriteResult{Received: t.size}, nil
	})
}

// finishUpload ends upload p.Transfer for restore: it is returned only if
// the size and SHA-256 p declares are what arrived (then the caller owns
// it and discards it); in every other case it is discarded here.
func (a *Agent) finishUpload(p rpc.SnapshotParams) (*snapTransfer, error) {
	if p.SHA256 == "" || p.Bytes <= 0 {
		return nil, invalid("restoring an upload takes its bytes and sha256 (hex), to check that all of it arrived intact")
	}
	t := a.snaps.take(p.Transfer)
	if t == nil || !t.upload {
		hint := ""
		if p.Node != "" && p.Node != a.cfg.NodeID {
			hint = fmt.Sprintf(" (the upload went to %s, and %s leads now)", p.Node, a.cfg.NodeID)
		}
		return nil, fmt.Errorf("%w: no open snapshot upload %q on the leader %s%s: it was closed, expired after %s idle, or the leader changed; nothing was restored: upload again",
			domain.ErrNotFound, p.Transfer, a.cfg.NodeID, hint, transferIdle)
	}
	t.mu.Lock()
	t.finished = true // a write still in flight is refused from now on
	size, sum := t.size, hex.EncodeToString(t.hash.Sum(nil))
	t.mu.Unlock()
	switch {
	case size != p.Bytes:
		t.discard()
		return nil, invalid("the upload is incomplete: %d of %d bytes arrived; nothing was restored: upload again", size, p.Bytes)
	case !strings.EqualFold(sum, p.SHA256):
		t.discard()
		return nil, invalid("the upload's SHA-256 is %s, not the %s declared: the bytes were damaged on the way; nothing was restored: upload again", sum, p.SHA256)
	}
	t.sum = sum
	return t, nil
}
