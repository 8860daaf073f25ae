package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

// Snapshots over the connection (docs/rpc.md, "Snapshot transfers"): save
// --out reads a streamed save chunk by chunk into a local file (or stdout),
// restore --in uploads a local file (or stdin) chunk by chunk and restores
// it; both check the size and the SHA-256 end to end.

// chunkCall makes one transfer call with the command's --timeout, again
// after a lost connection or a -32004: every chunk call is safe to repeat
// (a read is a read; a write repeated at its offset is answered again, not
// written twice; closing twice is closing).
func chunkCall(cCtx *cli.Context, ctx context.Context, c *rpc.Client, method string, params, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout(cCtx))
	defer cancel()
	return c.CallIdempotent(ctx, method, params, out)
}

// downloadSnapshot opens a streamed save on node (the leader if "") and
// copies it to w, checking its size and SHA-256.
func downloadSnapshot(cCtx *cli.Context, ctx context.Context, c *rpc.Client, node string, w io.Writer) (rpc.SnapshotResult, error) {
	var res rpc.SnapshotResult
	ctx2, cancel := context.WithTimeout(ctx, max(callTimeout(cCtx), time.Minute))
	err := c.Call(ctx2, rpc.MethodSnapshotSave, rpc.SnapshotParams{Stream: true, Leader: node == "", Node: node}, &res)
	cancel()
	if err != nil {
		return res, err
	}
	tr := rpc.SnapshotTransfer{Transfer: res.Transfer, Node: res.Node}
	defer func() { // the agent's temporary copy goes now, not when it expires
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Call(cctx, rpc.MethodSnapshotClose, tr, nil)
	}()
	h := sha256.New()
	var off int64
	for off < res.Bytes {
		var ch rpc.SnapshotChunk
		if err := chunkCall(cCtx, ctx, c, rpc.MethodSnapshotRead, rpc.SnapshotReadParams{SnapshotTransfer: tr, Offset: off}, &ch); err != nil {
			return res, fmt.Errorf("reading the snapshot at byte %d of %d: %w", off, res.Bytes, err)
		}
		if ch.Offset != off || len(ch.Data) == 0 {
			return res, fmt.Errorf("the agent answered %d bytes at offset %d for offset %d: start over", len(ch.Data), ch.Offset, off)
		}
		if _, err := w.Write(ch.Data); err != nil {
			return res, err
		}
		h.Write(ch.Data)
		off += int64(len(ch.Data))
	}
	if sum := hex.EncodeToString(h.Sum(nil)); off != res.Bytes || sum != res.SHA256 {
		return res, fmt.Errorf("the snapshot arrived damaged: %d bytes with SHA-256 %s, the agent sent %d bytes with %s", off, sum, res.Bytes, res.SHA256)
	}
	return res, nil
}

// saveToFile streams a snapshot into a new local file: written beside it
// under a temporary name, checked, fsynced, then renamed, so path holds
// only a complete, verified snapshot.
func saveToFile(cCtx *cli.Context, ctx context.Context, c *rpc.Client, node, path string) (rpc.SnapshotResult, error) {
	if _, err := os.Lstat(path); err == nil {
		return rpc.SnapshotResult{}, failf("pass a new file name, or remove the old file", "%s already exists: snapshot save never replaces a file", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	res, err := downloadSnapshot(cCtx, ctx, c, node, f)
	if err != nil {
		return res, err
	}
	if err := f.Sync(); err != nil {
		return res, err
	}
	if err := f.Close(); err != nil {
		return res, err
	}
	// Link, not rename: a file created at path meanwhile is not replaced.
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return res, failf("pass a new file name", "%s appeared while the snapshot was read: not replaced", path)
		}
		return res, err
	}
	done = true
	os.Remove(f.Name())
	abs, _ := filepath.Abs(path)
	res.Path = abs
	return res, nil
}

// uploadSnapshot uploads r to the leader and restores it: the size and
// SHA-256 of what was sent go with the restore, which the leader refuses
// unless they match what it received.
func uploadSnapshot(cCtx *cli.Context, ctx context.Context, c *rpc.Client, r io.Reader) (rpc.SnapshotResult, error) {
	var up rpc.SnapshotUploadResult
	uctx, cancel := context.WithTimeout(ctx, callTimeout(cCtx))
	err := c.Call(uctx, rpc.MethodSnapshotUpload, rpc.SnapshotUploadParams{}, &up) // each call opens one
	cancel()
	if err != nil {
		return rpc.SnapshotResult{}, err
	}
	restored := false
	defer func() { // an upload that will not be restored goes now
		if !restored {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = c.Call(cctx, rpc.MethodSnapshotClose, up.SnapshotTransfer, nil)
		}
	}()
	n := min(max(up.ChunkBytes, 4<<10), rpc.SnapshotChunkBytes)
	buf := make([]byte, n)
	h := sha256.New()
	var off int64
	for {
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			var wr rpc.SnapshotWriteResult
			p := rpc.SnapshotWriteParams{SnapshotTransfer: up.SnapshotTransfer, Offset: off, Data: buf[:k]}
			if err := chunkCall(cCtx, ctx, c, rpc.MethodSnapshotWrite, p, &wr); err != nil {
				return rpc.SnapshotResult{}, fmt.Errorf("uploading at byte %d: %w (nothing was restored)", off, err)
			}
			h.Write(buf[:k])
			off += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rpc.SnapshotResult{}, fmt.Errorf("reading the snapshot: %w (nothing was restored)", rerr)
		}
	}
	if off == 0 {
		return rpc.SnapshotResult{}, failf("pass a file written by `flowd snapshot save --out`", "the snapshot is empty (nothing was restored)")
	}
	var res rpc.SnapshotResult
	rctx, cancel := context.WithTimeout(ctx, max(callTimeout(cCtx), 2*time.Minute))
	defer cancel()
	restored = true // the leader discards the upload whatever the answer
	err = c.Call(rctx, rpc.MethodSnapshotRestore, rpc.SnapshotParams{Transfer: up.Transfer, Node: up.Node,
		Bytes: off, SHA256: hex.EncodeToString(h.Sum(nil))}, &res)
	return res, err
}
