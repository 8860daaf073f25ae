package rpc

// Snapshot transfers: a snapshot streams over the connection in chunks
// (docs/rpc.md, "Snapshot transfers"). A download is snapshot.save with
// stream: true, then snapshot.read at increasing offsets, then
// snapshot.close; an upload is snapshot.upload, snapshot.write at
// increasing offsets, then snapshot.restore with the transfer, the size and
// the SHA-256. Chunks are base64 in JSON, at most SnapshotChunkBytes raw
// bytes each, so a call stays well under the 4 MiB line limit. (The method
// names are in methodtable.go.)

// SnapshotChunkBytes is the largest chunk of a snapshot transfer (raw
// bytes; 1 MiB is about 1.4 MB of base64).
const SnapshotChunkBytes = 1 << 20

// SnapshotTransfer names a transfer and the agent that holds it.
type SnapshotTransfer struct {
	// Transfer is the id the agent picked (snapshot.save with stream,
	// snapshot.upload).
	Transfer string `json:"transfer"`
	// Node is the agent that holds it; the connected agent forwards the
	// call there.
	Node string `json:"node"`
}

// SnapshotReadParams of snapshot.read.
type SnapshotReadParams struct {
	SnapshotTransfer
	Offset int64 `json:"offset"`
	// MaxBytes caps the chunk (default and most: SnapshotChunkBytes).
	MaxBytes int `json:"max_bytes,omitempty"`
}

// SnapshotChunk is snapshot.read's result.
type SnapshotChunk struct {
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"` // base64 in JSON
	// EOF: the chunk ends the file.
	EOF bool `json:"eof"`
}

// SnapshotWriteParams of snapshot.write.
type SnapshotWriteParams struct {
	SnapshotTransfer
	// Offset must be the bytes received so far (a repeat of the last
	// chunk, after a lost answer, is answered again and not written twice).
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// SnapshotWriteResult of snapshot.write.
type SnapshotWriteResult struct {
	Received int64 `json:"received"`
}

// SnapshotUploadResult of snapshot.upload.
type SnapshotUploadResult struct {
	SnapshotTransfer
	// ChunkBytes is the largest chunk the agent takes.
	ChunkBytes int `json:"chunk_bytes"`
}

// SnapshotUploadParams of snapshot.upload (none yet).
type SnapshotUploadParams struct{}
