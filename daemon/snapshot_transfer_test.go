package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A streamed save read in small chunks through a follower, out of order
// and twice over, is the leader's snapshot byte for byte (size and
// SHA-256); uploaded back through the other follower with a repeated
// chunk (a lost answer) it restores; the transfers leave no file behind.
func TestSnapshotTransferRoundTripThroughFollowers(t *testing.T) {
	agents := startAgents(t, 3)
	leader, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c1, c2 := client(t, fs[0]), client(t, fs[1])
	if _, err := c1.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"kept","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatal(err)
	}
	var res rpc.SnapshotResult
	if err := c1.Call(ctx, rpc.MethodSnapshotSave, rpc.SnapshotParams{Stream: true, Leader: true}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Node != leader.cfg.NodeID || res.Transfer == "" || res.Bytes == 0 || res.ChunkBytes == 0 {
		t.Fatalf("streamed save: %+v, want a transfer on %s", res, leader.cfg.NodeID)
	}
	tr := rpc.SnapshotTransfer{Transfer: res.Transfer, Node: res.Node}
	read := func(off int64, max int) rpc.SnapshotChunk {
		var ch rpc.SnapshotChunk
		if err := c1.Call(ctx, rpc.MethodSnapshotRead, rpc.SnapshotReadParams{SnapshotTransfer: tr, Offset: off, MaxBytes: max}, &ch); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	const step = 700
	got := make([]byte, res.Bytes)
	for off := (res.Bytes - 1) / step * step; off >= 0; off -= step { // backwards
		ch := read(off, step)
		copy(got[off:], ch.Data)
		if ch.EOF != (off+int64(len(ch.Data)) == res.Bytes) {
			t.Fatalf("chunk at %d: eof %v", off, ch.EOF)
		}
	}
	if again := read(0, step); !bytes.Equal(again.Data, got[:len(again.Data)]) {
		t.Fatal("a re-read differs")
	}
	if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != res.SHA256 {
		t.Fatalf("sha256 %x, the agent said %s", sum, res.SHA256)
	}
	var ok rpc.OK
	if err := c1.Call(ctx, rpc.MethodSnapshotClose, tr, &ok); err != nil || !ok.OK {
		t.Fatalf("close: %+v %v", ok, err)
	}
	if err := c1.Call(ctx, rpc.MethodSnapshotRead, rpc.SnapshotReadParams{SnapshotTransfer: tr}, nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("read after close: %v", err)
	}

	var up rpc.SnapshotUploadResult
	if err := c2.Call(ctx, rpc.MethodSnapshotUpload, rpc.SnapshotUploadParams{}, &up); err != nil || up.Node != leader.cfg.NodeID {
		t.Fatalf("upload: %+v %v", up, err)
	}
	write := func(off int64, data []byte) error {
		return c2.Call(ctx, rpc.MethodSnapshotWrite, rpc.SnapshotWriteParams{SnapshotTransfer: up.SnapshotTransfer, Offset: off, Data: data}, nil)
	}
	half := int64(len(got) / 2)
	for _, w := range []struct {
		off  int64
		data []byte
	}{{0, got[:half]}, {0, got[:half]}, {half, got[half:]}} { // the first chunk twice
		if err := write(w.off, w.data); err != nil {
			t.Fatalf("write at %d: %v", w.off, err)
		}
	}
	var rr rpc.SnapshotResult
	err := c2.Call(ctx, rpc.MethodSnapshotRestore, rpc.SnapshotParams{Transfer: up.Transfer, Node: up.Node, Bytes: res.Bytes, SHA256: res.SHA256}, &rr)
	if err != nil || rr.Bytes != res.Bytes || rr.Node != leader.cfg.NodeID {
		t.Fatalf("restore of the upload: %+v %v", rr, err)
	}
	if err := write(res.Bytes, []byte("x")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a write after the restore: %v", err)
	}
	leader.snaps.mu.Lock()
	n := len(leader.snaps.m)
	leader.snaps.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d transfers left open on the leader", n)
	}
}

// An upload lives on the leader that opened it: when leadership moves
// before the restore, the restore is refused (not found, naming both
// agents), nothing is restored, and the upload can still be closed on the
// old leader (else it expires there).
func TestSnapshotUploadRefusedAfterLeaderChange(t *testing.T) {
	agents := startAgents(t, 3)
	leader, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client(t, fs[0])
	var res rpc.SnapshotResult
	if err := c.Call(ctx, rpc.MethodSnapshotSave, rpc.SnapshotParams{Path: "s1", Leader: true}, &res); err != nil {
		t.Fatal(err)
	}
	later, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"later","tasks":[{"key":"a","type":"echo"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	var up rpc.SnapshotUploadResult
	if err := c.Call(ctx, rpc.MethodSnapshotUpload, rpc.SnapshotUploadParams{}, &up); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, rpc.MethodSnapshotWrite, rpc.SnapshotWriteParams{SnapshotTransfer: up.SnapshotTransfer, Data: data}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, rpc.MethodRaftTransfer, rpc.PeerParams{ID: fs[1].cfg.NodeID}, nil); err != nil {
		t.Fatal(err)
	}
	for !fs[1].node.IsLeader() {
		if ctx.Err() != nil {
			t.Fatal("leadership did not move")
		}
		fs[1].node.WaitLeaderChange(ctx, 100*time.Millisecond)
	}
	err = c.Call(ctx, rpc.MethodSnapshotRestore, rpc.SnapshotParams{Transfer: up.Transfer, Node: up.Node, Bytes: res.Bytes, SHA256: res.SHA256}, nil)
	if !errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "the upload went to "+leader.cfg.NodeID) {
		t.Fatalf("restore after the leader changed: %v", err)
	}
	if _, err := c.RunGet(ctx, later.ID); err != nil {
		t.Fatalf("something was restored: %v", err)
	}
	var ok rpc.OK
	if err := c.Call(ctx, rpc.MethodSnapshotClose, up.SnapshotTransfer, &ok); err != nil || !ok.OK {
		t.Fatalf("closing the upload on %s: %+v %v", up.Node, ok, err)
	}
}
