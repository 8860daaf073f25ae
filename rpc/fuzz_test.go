package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// Fuzz targets of the line reader and the server channel (issue 10). The
// seed corpora are in testdata/fuzz/<target>/ and also run as plain tests;
// run a target with
//
//	go test -run '^$' -fuzz FuzzLineReader -fuzztime 2m -parallel 1 ./rpc/

// errFuzzReset is the non-deadline read error the fuzz reader injects.
var errFuzzReset = errors.New("fuzz: connection reset")

// fuzzReader delivers data in pieces steered by ctl, one control byte per
// Read while they last (then the rest in reads of up to 16 bytes):
//
//	c>>4 0..11: c&15+1 bytes
//	c>>4 12,13: c&15+1 bytes together with a read deadline error
//	c>>4 14:    a read deadline error, no bytes
//	c>>4 15:    c&15+1 bytes together with errFuzzReset
//
// It records the stream positions of the resets, and at every Read checks
// what the line reader holds (check), so the invariants are seen in the
// middle of next as well as between calls.
type fuzzReader struct {
	data, ctl []byte
	pos       int
	resets    []int
	check     func()
}

func (r *fuzzReader) Read(p []byte) (int, error) {
	if r.check != nil {
		r.check()
	}
	if r.pos >= len(r.data) {
		return 0, io.EOF
	}
	c := byte(15)
	if len(r.ctl) > 0 {
		c, r.ctl = r.ctl[0], r.ctl[1:]
	}
	kind, n := c>>4, int(c&15)+1
	if kind == 14 {
		return 0, os.ErrDeadlineExceeded
	}
	n = min(n, len(p), len(r.data)-r.pos)
	copy(p, r.data[r.pos:r.pos+n])
	r.pos += n
	switch kind {
	case 12, 13:
		return n, os.ErrDeadlineExceeded
	case 15:
		r.resets = append(r.resets, r.pos)
		return n, errFuzzReset
	}
	return n, nil
}

// lineEvent is one observable result of lineReader.next (deadline errors,
// which keep the line in progress, are not events).
type lineEvent struct {
	kind string // "line", "drop", "reset", "eof"
	data []byte // the line (line), the dropped line (drop, expected side)
	size int    // drop: the size reported
	busy bool   // drop: lr.busy (the budget, not the cap, dropped it)
}

func (e lineEvent) String() string {
	switch e.kind {
	case "line":
		return fmt.Sprintf("line %q", e.data)
	case "drop":
		return fmt.Sprintf("drop size=%d busy=%v", e.size, e.busy)
	}
	return e.kind
}

// expectedLines is the model: the input cut at its newlines, and at every
// reset (the part of the line read before it is lost), a final line without
// newline before EOF, then EOF.
func expectedLines(data []byte, resets []int) []lineEvent {
	var out []lineEvent
	s, ri := 0, 0
	for p := 0; p <= len(data); p++ {
		for ri < len(resets) && resets[ri] == p {
			out = append(out, lineEvent{kind: "reset"})
			s = p
			ri++
		}
		if p < len(data) && data[p] == '\n' {
			out = append(out, lineEvent{kind: "line", data: data[s:p]})
			s = p + 1
		}
	}
	if s < len(data) {
		out = append(out, lineEvent{kind: "line", data: data[s:]})
	}
	return append(out, lineEvent{kind: "eof"})
}

func heldBytes(lr *lineReader) int {
	n := 0
	for _, c := range lr.chunks {
		n += len(c)
	}
	return n
}

// FuzzLineReader feeds arbitrary bytes, split into arbitrary reads with
// deadline and reset errors between them, to a lineReader with a small cap
// (and a small read buffer, so the chunked path of long lines is reached
// with small inputs; bufSel 0 is the real 64 KiB reader) and an optional
// small partial-line budget. It must never panic, never return a line over
// the cap, never hold more than the cap (or the budget) of a line, give the
// budget back after every line, and its lines, drops (with their sizes) and
// errors must be exactly the model's cut of the input.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\":2}\nlast"), []byte{}, uint16(16), uint8(0), uint16(0))
	f.Add([]byte("short\na line over the cap of ten\nok\n"), []byte{0x03, 0xc2, 0xe0, 0x05}, uint16(10), uint8(1), uint16(0))
	f.Add([]byte("0123456789abcdefghij0123456789\nxy\n"), []byte{0x0f, 0xcf, 0x0f}, uint16(40), uint8(2), uint16(8))
	f.Add([]byte("reset in the middle\nof a line\n"), []byte{0x04, 0xf3, 0x01, 0xe0}, uint16(64), uint8(3), uint16(100))
	f.Add([]byte("0123456789\n0123456789a\n"), []byte{}, uint16(10), uint8(0), uint16(0))
	f.Add([]byte("no newline at all, longer than the cap"), []byte{0xd1, 0xe0, 0xd1}, uint16(5), uint8(0), uint16(3))
	f.Fuzz(func(t *testing.T, data, ctl []byte, maxSel uint16, bufSel uint8, budgetSel uint16) {
		max := int(maxSel % 300)
		r := &fuzzReader{data: data, ctl: ctl}
		var lr *lineReader
		if bufSel == 0 {
			lr = newLineReader(r, max)
		} else {
			// bufio's minimum is 16 bytes.
			lr = &lineReader{r: bufio.NewReaderSize(r, 16+int(bufSel%64)), max: max}
		}
		if budgetSel != 0 {
			lr.budget = &byteBudget{max: int64(budgetSel % 512)}
		}
		held := func(where string) {
			n := heldBytes(lr)
			if n > max || int64(n) != lr.held {
				t.Fatalf("%s: holds %d bytes in chunks, held=%d, cap %d", where, n, lr.held, max)
			}
			if lr.over && n != 0 {
				t.Fatalf("%s: discarding a line but holds %d bytes of it", where, n)
			}
			if b := lr.budget; b != nil && (b.used.Load() != lr.held || b.used.Load() > b.max) {
				t.Fatalf("%s: budget used %d, held %d, budget %d", where, b.used.Load(), lr.held, b.max)
			}
		}
		r.check = func() { held("during a read") }

		var got []lineEvent
		for calls := 0; ; calls++ {
			if calls > 2*(len(data)+len(ctl))+10 {
				t.Fatalf("no end after %d calls; got %v", calls, got)
			}
			line, size, err := lr.next()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				held("after a deadline")
				continue
			}
			if lr.held != 0 || len(lr.chunks) != 0 || lr.size != 0 || lr.over {
				t.Fatalf("after a result (%v, %d, %v) the reader still holds a line: held=%d chunks=%d size=%d over=%v",
					line, size, err, lr.held, len(lr.chunks), lr.size, lr.over)
			}
			held("after a result")
			if err == io.EOF {
				got = append(got, lineEvent{kind: "eof"})
				if _, _, err := lr.next(); err != io.EOF {
					t.Fatalf("after EOF: %v", err)
				}
				break
			}
			if err != nil {
				if !errors.Is(err, errFuzzReset) {
					t.Fatalf("unexpected error %v", err)
				}
				got = append(got, lineEvent{kind: "reset"})
				continue
			}
			if line == nil {
				got = append(got, lineEvent{kind: "drop", size: size, busy: lr.busy})
				continue
			}
			if len(line) > max || size != len(line) {
				t.Fatalf("line of %d bytes (size %d) over the cap %d", len(line), size, max)
			}
			got = append(got, lineEvent{kind: "line", data: line})
		}

		want := expectedLines(data, r.resets)
		if len(got) != len(want) {
			t.Fatalf("got %d events, want %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
		}
		for i, w := range want {
			g := got[i]
			switch {
			case w.kind != "line":
				if g.kind != w.kind {
					t.Fatalf("event %d: got %v, want %v", i, g, w)
				}
			case len(w.data) > max:
				if g.kind != "drop" || g.size != len(w.data) || (g.busy && lr.budget == nil) {
					t.Fatalf("event %d: got %v, want a drop of %d bytes (cap %d)", i, g, len(w.data), max)
				}
			case g.kind == "drop":
				if !g.busy || lr.budget == nil || g.size != len(w.data) {
					t.Fatalf("event %d: got %v, want %v (cap %d)", i, g, w, max)
				}
			default:
				if g.kind != "line" || !bytes.Equal(g.data, w.data) {
					t.Fatalf("event %d: got %v, want %v", i, g, w)
				}
			}
		}
	})
}

// TestLineReaderHeadIsPrefix: the head kept for an over-long line (shown
// by the client's error) is a non-empty prefix of it, at most 64 bytes.
func TestLineReaderHeadIsPrefix(t *testing.T) {
	line := strings.Repeat("abcdefghij", 20)
	for _, ctl := range [][]byte{nil, {0xc2, 0xc2, 0xc2}, {0x01, 0xe0, 0x0f}} {
		r := &fuzzReader{data: []byte(line + "\n"), ctl: ctl}
		lr := &lineReader{r: bufio.NewReaderSize(r, 16), max: 50}
		for {
			l, size, err := lr.next()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != nil || l != nil || size != len(line) {
				t.Fatalf("ctl %x: %q %d %v", ctl, l, size, err)
			}
			break
		}
		if len(lr.head) == 0 || len(lr.head) > 64 || !strings.HasPrefix(line, string(lr.head)) {
			t.Fatalf("ctl %x: head %q", ctl, lr.head)
		}
	}
}

// fuzzMethods is the test table without the methods that wait for the
// test (block, subscribe), plus one that pushes a notification.
func fuzzMethods() map[string]Handler {
	m := newTestEnv().methods()
	delete(m, "block")
	delete(m, "subscribe")
	m["note"] = Func(func(ctx context.Context, p echoParams) (echoResult, error) {
		return echoResult{Msg: p.Msg}, Notify(ctx, "event", p)
	})
	return m
}

const fuzzSentinel = "fuzz-end-5f0c2a"

// FuzzServerChannel feeds arbitrary bytes to a Server over net.Pipe, then
// one valid request: every line the server writes must be one JSON-RPC 2.0
// message, the final request must be answered (the connection stays usable
// whatever came before it), and the server must end when the client
// closes. A panic anywhere fails the fuzz run.
func FuzzServerChannel(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"msg":"hi"}}`,
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{\"msg\":\"a\"}},{\"jsonrpc\":\"2.0\",\"method\":\"note\",\"params\":{\"msg\":\"b\"}}]\n[]\n",
		"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1\n}\n\n   \n",
		`{"jsonrpc":"2.0","id":2,"method":"panic"}` + "\n" + `{"jsonrpc":"2.0","id":3,"method":"badspec"}` + "\n" + `{"jsonrpc":"2.0","id":4,"method":"nope"}`,
		`{"jsonrpc":"2.0","id":5,"method":"echo","params":{"msg":"` + strings.Repeat("x", 300) + `"}}`,
		"\x00\xff{\"jsonrpc\":\"1.0\"}\n[1,2,3]\n\"str\"\n",
	} {
		f.Add([]byte(s), uint16(200))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxSel uint16) {
		maxLine := 128 + int(maxSel%1024) // the sentinel request fits
		s := NewServer(fuzzMethods(), Options{MaxLine: maxLine, Logger: quietLogger(),
			LineTimeout: -1, IdleTimeout: -1, WriteTimeout: 10 * time.Second})
		defer s.Close()
		a, b := net.Pipe()
		served := make(chan error, 1)
		go func() { served <- s.ServeConn(context.Background(), b) }()
		_ = a.SetDeadline(time.Now().Add(20 * time.Second))

		answered := make(chan error, 1)
		go func() {
			br := bufio.NewReaderSize(a, 1<<16)
			for {
				line, err := br.ReadBytes('\n')
				if err != nil {
					answered <- fmt.Errorf("connection ended before the final answer: %v", err)
					return
				}
				msgs := []json.RawMessage{line}
				if line[0] == '[' {
					if err := json.Unmarshal(line, &msgs); err != nil || len(msgs) == 0 {
						answered <- fmt.Errorf("server wrote %q: %v", line, err)
						return
					}
				}
				var m wireMsg
				for _, raw := range msgs {
					if m, err = checkWireMsg(raw); err != nil {
						answered <- err
						return
					}
				}
				if string(m.ID) == `"`+fuzzSentinel+`"` {
					if string(m.Result) != `{"msg":"end"}` {
						answered <- fmt.Errorf("final answer %q", line)
						return
					}
					answered <- nil
					// keep reading so that no server write blocks
					_, _ = io.Copy(io.Discard, br)
					return
				}
			}
		}()
		in := append(append([]byte{}, data...), "\n{\"jsonrpc\":\"2.0\",\"id\":\""+fuzzSentinel+"\",\"method\":\"echo\",\"params\":{\"msg\":\"end\"}}\n"...)
		if _, err := a.Write(in); err != nil {
			t.Fatalf("write: %v", err)
		}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		a.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("ServeConn did not return after the client closed")
		}
	})
}

type wireMsg struct {
	V      string          `json:"jsonrpc"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
	Method string          `json:"method"`
}

// checkWireMsg checks one message the server wrote: JSON-RPC 2.0, a
// notification or a response with exactly one of result and error.
func checkWireMsg(raw []byte) (wireMsg, error) {
	var m wireMsg
	if err := json.Unmarshal(raw, &m); err != nil || m.V != "2.0" {
		return m, fmt.Errorf("server wrote %q: %v", raw, err)
	}
	if m.Method == "" && (m.Error == nil) == (m.Result == nil) {
		return m, fmt.Errorf("a response with neither or both of result and error: %q", raw)
	}
	if m.Method == "" && len(m.ID) == 0 {
		return m, fmt.Errorf("a response without id: %q", raw)
	}
	return m, nil
}
