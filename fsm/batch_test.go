package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// A Multi is written in the binary framing and read back unchanged; the
// JSON form older logs hold still decodes to the same commands.
func TestBatchFramingRoundTripsAndReadsLegacyJSON(t *testing.T) {
	sub := func(c Command) []byte {
		c.Stamp(42)
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	m := &Multi{Cmds: [][]byte{sub(&Heartbeat{TaskID: "r/a", Token: 7}), sub(&Noop{}), {}}}
	m.Stamp(1_700_000_000_123)
	buf, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if MsgType(buf[0]) != MsgBatch {
		t.Fatalf("type byte %d, want MsgBatch", buf[0])
	}
	legacyBody, err := marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	legacy := append([]byte{byte(MsgMulti)}, legacyBody...)
	for name, enc := range map[string][]byte{"binary": buf, "legacy json": legacy} {
		c, err := Decode(enc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := c.(*Multi)
		if got.At != m.At || len(got.Cmds) != len(m.Cmds) {
			t.Fatalf("%s: at %d cmds %d", name, got.At, len(got.Cmds))
		}
		for i := range m.Cmds {
			if !bytes.Equal(got.Cmds[i], m.Cmds[i]) {
				t.Fatalf("%s: cmd %d = %q, want %q", name, i, got.Cmds[i], m.Cmds[i])
			}
		}
	}
}

// Every truncation of a batch, and framing that claims more than the entry
// holds, is a bad command: an error, never a panic or a huge allocation.
func TestBatchFramingRejectsGarbage(t *testing.T) {
	m := &Multi{Cmds: [][]byte{[]byte("\x12{}"), []byte("\x12{}")}}
	buf, _ := Encode(m)
	for n := 1; n < len(buf); n++ {
		if _, err := Decode(buf[:n]); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("truncated to %d bytes: err %v", n, err)
		}
	}
	for _, bad := range [][]byte{
		{byte(MsgBatch), 0, 0xff, 0xff, 0xff, 0xff, 0x0f},                                  // count far beyond the entry
		{byte(MsgBatch), 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x'},                          // length beyond the entry
		append(append([]byte{}, buf...), 0),                                                // trailing bytes
		{byte(MsgBatch), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, // varint overflow
	} {
		if _, err := Decode(bad); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("%x: err %v", bad, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	m := &Multi{Cmds: [][]byte{[]byte("\x12{}")}}
	buf, _ := Encode(m)
	f.Add(buf)
	f.Add([]byte("\x01{\"id\":\"x\"}"))
	for _, c := range []Command{ // the binary commands (command_msgp.go)
		&Submit{ID: "x", Spec: domain.Spec{Tasks: []domain.TaskSpec{{Key: "a", Type: "t", Deps: []string{"b"}}}}, Labels: map[string]string{"k": "v"}},
		&Complete{TaskID: "x/a", Token: 3, Claim: &Waiter{WorkerID: "w", Max: 2}, Log: &LogChunk{Lines: []LogLine{{Line: "l"}}}},
		&Claim{Waiters: []Waiter{{WorkerID: "w", Types: []string{"t"}, Max: 1}}},
	} {
		b, _ := Encode(c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err == nil && c == nil {
			t.Fatal("nil command without error")
		}
		// Applying whatever decodes must not panic either.
		h := newHarness(t)
		h.index++
		_ = h.f.Apply(Entry{Index: h.index, Data: data})
	})
}
