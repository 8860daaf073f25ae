package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Snapshot format: a header, then records of (type byte, payload), then a
// trailer carrying the record count so truncation is detected.
//
//	"FLOWDSNAP" 0x01
//	0x01 uvarint(len k) k uvarint(len v) v     one key/value pair, key order
//	0xFF uvarint(count)                        trailer
//
// One reader, ReadSnapshot, serves Restore and offline tooling
// (flowd snapshot inspect).

var snapMagic = []byte("FLOWDSNAP\x01")

const (
	recKV      = 0x01
	recTrailer = 0xFF
)

// ErrBadSnapshot: the stream is not a complete flowd snapshot.
var ErrBadSnapshot = errors.New("bad snapshot")

// Snapshot is a pinned point-in-time view of the state.
type Snapshot struct {
	r       Reader
	release func()
	// Index is the applied index the view describes.
	Index uint64
}

// Snapshot pins the current state. It is cheap; the IO happens in WriteTo,
// which may run concurrently with Apply. Always call Release.
func (f *FSM) Snapshot() (*Snapshot, error) {
	r, release, err := f.store.View()
	if err != nil {
		return nil, err
	}
	v, _, err := r.Get(keyApplied)
	if err != nil {
		release()
		return nil, err
	}
	return &Snapshot{r: r, release: release, Index: getU64(v)}, nil
}

// WriteTo streams the pinned state.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	cw := &countWriter{w: bw}
	cw.Write(snapMagic)
	var n uint64
	var buf []byte
	err := s.r.Scan(nil, nil, false, func(k, v []byte) bool {
		if isQueryOnly(k) { // rebuilt from the records (labelindex.go)
			return true
		}
		buf = buf[:0]
		buf = append(buf, recKV)
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
		cw.Write(buf)
		n++
		return cw.err == nil
	})
	if err == nil {
		err = cw.err
	}
	if err != nil {
		return cw.n, err
	}
	cw.Write(binary.AppendUvarint([]byte{recTrailer}, n))
	if cw.err != nil {
		return cw.n, cw.err
	}
	return cw.n, bw.Flush()
}

// Release drops the pinned view.
func (s *Snapshot) Release() { s.release() }

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

// ReadSnapshot decodes a snapshot stream, calling fn for every pair.
func ReadSnapshot(rd io.Reader, fn func(k, v []byte) error) error {
	br := bufio.NewReaderSize(rd, 256<<10)
	head := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, snapMagic) {
		return fmt.Errorf("%w: missing header (not a flowd snapshot?)", ErrBadSnapshot)
	}
	var n uint64
	for {
		typ, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: truncated after %d records", ErrBadSnapshot, n)
		}
		switch typ {
		case recKV:
			k, err := readChunk(br)
			if err != nil {
				return err
			}
			v, err := readChunk(br)
			if err != nil {
				return err
			}
			if err := fn(k, v); err != nil {
				return err
			}
			n++
		case recTrailer:
			want, err := binary.ReadUvarint(br)
			if err != nil || want != n {
				return fmt.Errorf("%w: trailer says %d records, read %d", ErrBadSnapshot, want, n)
			}
			return nil
		default:
			return fmt.Errorf("%w: unknown record type %#x", ErrBadSnapshot, typ)
		}
	}
}

// maxRecordPart bounds one key or value of a snapshot record (badger's own
// limits are far below it).
const maxRecordPart = 1 << 30

// readStep is how much of a record readChunk allocates ahead of the bytes
// it has actually read.
const readStep = 64 << 10

// readChunk reads one length-prefixed key or value. The declared length is
// never trusted for allocation: a part is read in readStep pieces, the
// buffer growing only with the bytes the stream really delivers, so a
// crafted file declaring a 1 GiB record allocates about what the file
// contains and fails as truncated.
func readChunk(br *bufio.Reader) ([]byte, error) {
	l, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: bad record length", ErrBadSnapshot)
	}
	if l > maxRecordPart {
		return nil, fmt.Errorf("%w: a record declares %d bytes, over the %d-byte limit", ErrBadSnapshot, l, maxRecordPart)
	}
	if l <= readStep {
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("%w: truncated record (declared %d bytes)", ErrBadSnapshot, l)
		}
		return b, nil
	}
	b := make([]byte, 0, readStep)
	for uint64(len(b)) < l {
		n := int(min(l-uint64(len(b)), readStep))
		b = slices.Grow(b, n)
		got, err := io.ReadFull(br, b[len(b):len(b)+n])
		b = b[:len(b)+got]
		if err != nil {
			return nil, fmt.Errorf("%w: truncated record (declared %d bytes, the stream ends after %d)", ErrBadSnapshot, l, len(b))
		}
	}
	return b, nil
}

// Restore replaces the whole state with a snapshot stream. Called by raft
// (never concurrently with Apply) and at start-up when the local store is
// behind the newest snapshot.
func (f *FSM) Restore(rd io.Reader) error {
	var applied uint64
	err := f.store.Replace(func(put func(k, v []byte) error) error {
		if _, ok := f.store.(rebuilder); !ok {
			put = restoreDerivedPut(put)
		}
		return ReadSnapshot(rd, func(k, v []byte) error {
			if bytes.Equal(k, keyApplied) {
				applied = getU64(v)
			}
			return put(k, v)
		})
	})
	if err != nil {
		return err
	}
	if err := f.loadNow(); err != nil {
		return err
	}
	f.applied.Store(applied)
	f.publishAll(nil, true)
	return nil
}

// CheckSnapshot reads a whole snapshot stream, checking its format, and
// returns the applied index it records (0 if none). A restore through raft
// must pass that index on (raft.SnapshotMeta.Index): raft then puts the
// restored state at a log index past it, so the entries after the restore
// are above the state's applied index and are applied, not skipped as
// replays (a snapshot from a cluster whose log is ahead of this one's).
func CheckSnapshot(rd io.Reader) (uint64, error) {
	var idx uint64
	err := ReadSnapshot(rd, func(k, v []byte) error {
		if bytes.Equal(k, keyApplied) {
			idx = getU64(v)
		}
		return nil
	})
	return idx, err
}
