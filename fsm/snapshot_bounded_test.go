package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/store"
)

// craftedSnapshot is the attack of issue 11: a valid header, then a record
// whose key declares 1 GiB, then only a few bytes (26 bytes in all).
func craftedSnapshot() []byte {
	b := append([]byte{}, snapMagic...)
	b = append(b, recKV)
	b = binary.AppendUvarint(b, 1<<30)
	return append(b, "0123456789"...)
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// A declared length is never trusted: restoring the crafted file allocates
// about what it contains (plus fixed buffers), not 1 GiB, and fails saying
// the record is truncated.
func TestSnapshotDeclaredLengthNotTrusted(t *testing.T) {
	file := craftedSnapshot()
	if len(file) != 26 {
		t.Fatalf("crafted file is %d bytes, want 26", len(file))
	}
	f, err := New(store.NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"ReadSnapshot": func() error { return ReadSnapshot(bytes.NewReader(file), func(k, v []byte) error { return nil }) },
		"FSM.Restore":  func() error { return f.Restore(bytes.NewReader(file)) },
	} {
		runtime.GC()
		before := totalAlloc()
		err := read()
		alloc := totalAlloc() - before
		if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "truncated record") {
			t.Fatalf("%s: err = %v, want a truncated-record ErrBadSnapshot", name, err)
		}
		// bufio's 256 KiB buffer and one 64 KiB step; 1 GiB before.
		if alloc > 4<<20 {
			t.Fatalf("%s of a 26-byte file declaring 1 GiB allocated %d bytes", name, alloc)
		}
		t.Logf("%s: %d bytes allocated, %v", name, alloc, err)
	}
}

// Over the per-record limit is refused before reading anything more.
func TestSnapshotRecordOverLimit(t *testing.T) {
	b := append([]byte{}, snapMagic...)
	b = append(b, recKV)
	b = binary.AppendUvarint(b, maxRecordPart+1)
	err := ReadSnapshot(bytes.NewReader(b), func(k, v []byte) error { return nil })
	if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("err = %v", err)
	}
}

// Records bigger than one read step still round-trip, byte for byte.
func TestSnapshotLargeRecordRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (3*readStep+123)/16)
	b := append([]byte{}, snapMagic...)
	b = append(b, recKV)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "key"...)
	b = binary.AppendUvarint(b, uint64(len(big)))
	b = append(b, big...)
	b = append(b, recTrailer)
	b = binary.AppendUvarint(b, 1)
	var got []byte
	if err := ReadSnapshot(bytes.NewReader(b), func(k, v []byte) error { got = v; return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("value differs: %d bytes, want %d", len(got), len(big))
	}
	// Truncated inside the big value.
	err := ReadSnapshot(bytes.NewReader(b[:len(b)-readStep]), func(k, v []byte) error { return nil })
	if !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("truncated: %v", err)
	}
}
