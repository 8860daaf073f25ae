package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"
)

// DefaultMaxLine is the default cap on one line (one request or batch) in
// bytes, newline excluded.
const DefaultMaxLine = 4 << 20

// lineReader reads '\n'-terminated lines with a length cap. An over-long line
// is consumed to its newline without being kept. A line that fits the
// 64 KiB read buffer is copied once; a longer one is kept as the chunks
// actually received (never pre-sized, so memory follows the bytes the peer
// really sent), each reserved from the server's partial-line budget, and
// joined when its newline arrives.
type lineReader struct {
	r       *bufio.Reader
	max     int
	budget  *byteBudget     // nil: unbounded (tests)
	dl      *deadlineReader // nil: no deadlines
	pending error           // an error to report on the next call (after a final partial line)
	head    []byte          // the first bytes of the last over-long line

	// The line in progress, kept across calls so that a read deadline that
	// only re-arms (an idle connection with a call in flight) resumes it.
	chunks [][]byte
	size   int
	held   int64 // bytes of chunks reserved from budget
	over   bool  // the line is being discarded
	busy   bool  // ... because the budget was exhausted (not because it is too long)
}

const lineBufSize = 64 << 10

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, lineBufSize), max: max}
}

// reset drops the line in progress and gives its budget back.
func (lr *lineReader) reset() {
	lr.budget.give(lr.held)
	lr.chunks, lr.size, lr.held, lr.over = nil, 0, 0, false
}

// partial reports whether a line has begun and not ended.
func (lr *lineReader) partial() bool {
	return lr.size > 0 || lr.over || lr.r.Buffered() > 0 || (lr.dl != nil && lr.dl.inLine())
}

func (lr *lineReader) discard(busy bool) {
	if len(lr.chunks) > 0 {
		lr.head = append(lr.head[:0], lr.chunks[0][:min(len(lr.chunks[0]), 64)]...)
	}
	lr.budget.give(lr.held)
	lr.chunks, lr.held, lr.over, lr.busy = nil, 0, true, busy
}

// next returns the next line without its newline. If the line is longer than
// the cap, line is nil, size is the number of bytes seen (> max) and lr.head
// holds the line's first 64 bytes; if the partial-line budget ran out, line
// is nil too and lr.busy is set. A final line without newline before EOF is
// returned with a nil error and EOF comes on the following call. On a read
// deadline the line in progress is kept (see reset); on any other read error
// it is dropped.
func (lr *lineReader) next() (line []byte, size int, err error) {
	if lr.pending != nil {
		return nil, 0, lr.pending
	}
	for {
		chunk, err := lr.r.ReadSlice('\n')
		content := chunk
		if err == nil {
			content = chunk[:len(chunk)-1]
		}
		lr.size += len(content)
		if !lr.over && lr.size > lr.max {
			if len(lr.chunks) == 0 {
				lr.head = append(lr.head[:0], content[:min(len(content), 64)]...)
			}
			lr.discard(false)
			lr.busy = false
		}
		complete := err == nil || (err == io.EOF && lr.size > 0)
		if !lr.over {
			switch {
			case complete && len(lr.chunks) == 0:
				line = append(make([]byte, 0, len(content)), content...)
			case len(content) > 0:
				if !lr.budget.take(len(content)) {
					lr.discard(true)
					break
				}
				lr.held += int64(len(content))
				lr.chunks = append(lr.chunks, append(make([]byte, 0, len(content)), content...))
				if complete {
					line = make([]byte, 0, lr.size)
					for _, c := range lr.chunks {
						line = append(line, c...)
					}
				}
			case complete:
				line = make([]byte, 0, lr.size)
				for _, c := range lr.chunks {
					line = append(line, c...)
				}
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil:
		case err == io.EOF && lr.size > 0:
			lr.pending = io.EOF
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, 0, err // the line in progress is kept
		default:
			lr.reset()
			return nil, 0, err
		}
		size = lr.size
		over := lr.over
		lr.budget.give(lr.held)
		lr.chunks, lr.size, lr.held, lr.over = nil, 0, 0, false
		if lr.dl != nil {
			lr.dl.lineDone(lr.r.Buffered() > 0)
		}
		if over {
			return nil, size, nil
		}
		if line == nil {
			line = []byte{}
		}
		return line, size, nil
	}
}

// testHookDrain, if set, is called when a server channel sees the end of its
// input and starts waiting for outstanding replies (tests use it as a barrier).
var testHookDrain atomic.Pointer[func()]

// serverChannel is the jrpc2 channel.Channel of one server connection. It
// fixes two jrpc2 traps (see doc.go):
//   - lines are capped: an over-long line is discarded and answered with a
//     CodeTooLarge error written directly, and the connection stays usable;
//   - half-close: at the end of the input, Recv does not report io.EOF (which
//     makes jrpc2 cancel everything in flight) until every request received
//     so far has been answered.
//
// Lines that are not JSON are answered here too (CodeParseError, with advice
// on compact JSON), and blank lines are skipped.
//
// jrpc2 calls Recv from one goroutine and Send under its own lock; direct
// error writes from Recv are serialized with Send by wmu.
type serverChannel struct {
	conn         net.Conn
	lr           *lineReader
	log          *slog.Logger
	writeTimeout time.Duration

	// Writes are coalesced: a sender appends its message to wbuf and, if
	// no write is in progress, becomes the writer and writes everything
	// queued (its own message and those appended meanwhile) in one syscall
	// per round. wmu guards wbuf, wreplies, writing and werr.
	wmu       sync.Mutex
	wbuf      []byte // messages waiting for the writer, each ending in '\n'
	wspare    []byte // the writer's previous buffer, reused
	wreplies  int64  // responses in wbuf
	writing   bool
	coalesce  bool      // yield once before writing (see write)
	werr      error     // the first write error; later sends fail with it
	wdeadline time.Time // the write deadline armed (the writer's; armWrite)

	mu       sync.Mutex
	expected int64 // replies owed for the lines handed to jrpc2
	sent     int64 // replies written
	done     bool  // closed, or a write failed: stop waiting for replies
	wake     chan struct{}

	stopping atomic.Bool // Shutdown: a read deadline means "end of input"

	// inputCtx ends when the peer's input ends (EOF): InputClosed is its
	// Done, and a handler can register a callback on it (context.AfterFunc,
	// InputClosedContext) instead of a goroutine waiting.
	inputCtx    context.Context
	inputCancel context.CancelFunc

	// direct serves a well-formed call without jrpc2 (direct.go); it
	// reports false to leave the line to jrpc2. Set before the first Recv.
	direct func(id json.RawMessage, method []byte, params json.RawMessage) bool
	// onClose runs when the channel is closed (the server ends the
	// connection's context: calls on the direct path stop at once, and a
	// Recv waiting for a concurrency slot gives up). Set before the first
	// Recv.
	onClose func()

	lim     chanLimits
	dl      *deadlineReader // nil without line/idle timeouts
	spawned atomic.Int64    // goroutines started by Spawn still running
}

// chanLimits are the read-side limits of one server connection.
type chanLimits struct {
	budget      *byteBudget   // partial-line bytes, server-wide (nil: unbounded)
	lineTimeout time.Duration // a started line must end within this (0: none)
	idleTimeout time.Duration // nothing received, nothing in flight (0: none)
}

func newServerChannel(conn net.Conn, maxLine int, writeTimeout time.Duration, log *slog.Logger, lim chanLimits) *serverChannel {
	c := &serverChannel{
		conn:         conn,
		log:          log,
		writeTimeout: writeTimeout,
		wake:         make(chan struct{}, 1),
		coalesce:     true,
		lim:          lim,
	}
	c.inputCtx, c.inputCancel = context.WithCancel(context.Background())
	var r io.Reader = conn
	if lim.lineTimeout > 0 || lim.idleTimeout > 0 {
		c.dl = &deadlineReader{conn: conn, line: lim.lineTimeout, idle: lim.idleTimeout, stopping: &c.stopping}
		r = c.dl
	}
	c.lr = newLineReader(r, maxLine)
	c.lr.budget, c.lr.dl = lim.budget, c.dl
	return c
}

// busy reports whether the connection has a reason to be quiet: a reply it
// still owes (a long poll) or a stream it pushes (Spawn).
func (c *serverChannel) busy() bool {
	c.mu.Lock()
	owed := c.sent < c.expected
	c.mu.Unlock()
	return owed || c.spawned.Load() > 0
}

// Recv implements channel.Channel.
func (c *serverChannel) Recv() ([]byte, error) {
	for {
		line, size, err := c.lr.next()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !c.stopping.Load() {
				if !c.lr.partial() {
					if c.busy() {
						c.dl.rearm() // idle but waiting on its own call or stream: fine
						continue
					}
					c.log.Debug("rpc: idle connection closed", "remote", c.conn.RemoteAddr(), "idle_timeout", c.lim.idleTimeout)
				} else {
					c.log.Warn("rpc: partial request line not completed in time; connection closed",
						"remote", c.conn.RemoteAddr(), "bytes", c.lr.size, "line_timeout", c.lim.lineTimeout)
					c.writeError(CodeInvalidRequest, fmt.Sprintf(
						"request line not completed within %s (%d bytes received); the connection is closed",
						c.lim.lineTimeout, c.lr.size), map[string]int64{"line_timeout_ms": c.lim.lineTimeout.Milliseconds()})
				}
				c.lr.reset()
			}
			c.inputCancel()
			if err == io.EOF || (c.stopping.Load() && errors.Is(err, os.ErrDeadlineExceeded)) {
				c.lr.reset()
				return nil, c.drain()
			}
			return nil, err
		}
		if line == nil && c.lr.busy {
			c.lr.busy = false
			c.log.Warn("rpc: request line dropped: the partial-line budget is exhausted", "remote", c.conn.RemoteAddr(), "bytes", size)
			c.writeError(CodeUnavailable, fmt.Sprintf(
				"request line of %d bytes dropped: the agent is holding its limit of partially received request bytes "+
					"for all connections; retry shortly", size), map[string]int64{"retry_after_ms": 1000})
			continue
		}
		if line == nil {
			c.log.Warn("rpc: request line over the limit discarded", "bytes", size, "limit", c.lr.max)
			c.writeError(CodeTooLarge, fmt.Sprintf(
				"request line of %d bytes exceeds the limit of %d bytes and was discarded; "+
					"send smaller requests (split large specs or inputs, or pass large payloads by reference)",
				size, c.lr.max), map[string]int{"limit_bytes": c.lr.max})
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] == '{' {
			// The common shape of a call is read without a map (scancall.go);
			// otherwise one decode serves the direct path (direct.go) and,
			// for a line left to jrpc2, the count of the replies it is owed.
			scanned := false
			if c.direct != nil {
				if id, method, params, ok := scanCall(line); ok {
					if c.direct(id, method, params) {
						continue
					}
					scanned = true // not served directly: the map says the same
				}
			}
			var obj map[string]json.RawMessage
			if gojson.Unmarshal(line, &obj) == nil && obj != nil {
				if c.direct != nil && !scanned {
					if id, method, params, ok := directCall(obj); ok && c.direct(id, method, params) {
						continue
					}
				}
				if answeredObj(obj) {
					c.owe(1)
				}
				return line, nil
			}
		}
		n, perr := expectedReplies(line)
		if perr != nil {
			c.writeError(CodeParseError, fmt.Sprintf(
				"parse error: the line is not valid JSON (%v); send one compact JSON request per line "+
					"(pretty-printed JSON spans lines: compact it, e.g. with jq -c)", perr), nil)
			continue
		}
		c.mu.Lock()
		c.expected += int64(n)
		c.mu.Unlock()
		return line, nil
	}
}

// drain blocks until every reply owed has been sent (or the channel is
// closed or broken), then reports io.EOF.
func (c *serverChannel) drain() error {
	if h := testHookDrain.Load(); h != nil {
		(*h)()
	}
	for {
		c.mu.Lock()
		ok := c.done || c.sent >= c.expected
		c.mu.Unlock()
		if ok {
			return io.EOF
		}
		<-c.wake
	}
}

func (c *serverChannel) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Send implements channel.Channel. msg is one compact JSON value.
func (c *serverChannel) Send(msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 { // never from jrpc2's compact output; be safe
		var b bytes.Buffer
		if err := json.Compact(&b, msg); err != nil {
			return err
		}
		msg = b.Bytes()
	}
	return c.write(msg, repliesIn(msg))
}

// maxSpareWrite bounds the write buffer a connection keeps between writes.
const maxSpareWrite = 64 << 10

// write queues msg (holding replies responses) and writes the queue unless
// another sender is already writing it. Replies count as sent once they
// are on the connection.
func (c *serverChannel) write(msg []byte, replies int) error {
	return c.queue(replies, msg)
}

// queue is write for a message given in parts (concatenated, then '\n'):
// a direct reply is appended to the queue around its encoded result, with
// no message assembled first.
func (c *serverChannel) queue(replies int, parts ...[]byte) error {
	c.wmu.Lock()
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	for _, p := range parts {
		c.wbuf = append(c.wbuf, p...)
	}
	c.wbuf = append(c.wbuf, '\n')
	c.wreplies += int64(replies)
	if c.writing {
		c.wmu.Unlock()
		return nil
	}
	c.writing = true
	if c.coalesce && c.moreOwed() {
		// Let the other handlers that the same commit woke append their
		// replies first: one write (and one TLS record) for all of them.
		// Only when another reply is owed: a connection with one call in
		// flight (a worker, a producer) has nothing to wait for, and the
		// yield is a pass through the scheduler per reply.
		c.wmu.Unlock()
		runtime.Gosched()
		c.wmu.Lock()
	}
	var err error
	for len(c.wbuf) > 0 && err == nil {
		buf, n := c.wbuf, c.wreplies
		c.wbuf, c.wreplies = c.wspare[:0], 0
		c.wmu.Unlock()
		c.armWrite()
		_, err = c.conn.Write(buf)
		c.mu.Lock()
		if err != nil {
			c.done = true
		} else {
			c.sent += n
		}
		c.mu.Unlock()
		c.poke()
		c.wmu.Lock()
		if cap(buf) <= maxSpareWrite {
			c.wspare = buf
		} else {
			c.wspare = nil
		}
	}
	c.writing = false
	if err != nil {
		c.werr = err
		c.wbuf, c.wspare = nil, nil
	}
	c.wmu.Unlock()
	if err != nil {
		// A failed (possibly partial) write breaks the framing: end the
		// connection so that jrpc2 stops too (it ignores Send errors).
		c.log.Debug("rpc: write failed; closing the connection", "remote", c.conn.RemoteAddr(), "err", err)
		c.conn.Close()
	}
	return err
}

// moreOwed reports whether more messages may join this write (wmu held):
// replies owed beyond those queued (calls still running), or a stream
// pushing notifications (Spawn).
func (c *serverChannel) moreOwed() bool {
	if c.spawned.Load() > 0 {
		return true
	}
	c.mu.Lock()
	owed := c.expected - c.sent
	c.mu.Unlock()
	return owed > c.wreplies
}

// armWrite arms the write deadline before a write (the writer only). The
// deadline is moved only when less than writeRearm of the timeout is left
// (the timer is not touched on every write), so a write that blocks ends
// after between 15/16 of the timeout and the whole of it.
func (c *serverChannel) armWrite() {
	if c.writeTimeout <= 0 {
		return
	}
	now := time.Now()
	if !c.wdeadline.IsZero() && c.wdeadline.Sub(now) >= c.writeTimeout-c.writeTimeout/writeRearm {
		return
	}
	c.wdeadline = now.Add(c.writeTimeout)
	_ = c.conn.SetWriteDeadline(c.wdeadline)
}

// writeRearm: the write deadline moves once 1/writeRearm of it has passed.
const writeRearm = 16

// writeError writes an error response with id null directly on the
// connection (for lines that never reach jrpc2).
func (c *serverChannel) writeError(code int, msg string, data any) {
	e := &Error{Code: code, Message: msg}
	if data != nil {
		e.Data = mustJSON(data)
	}
	b, _ := json.Marshal(struct {
		V  string          `json:"jsonrpc"`
		ID json.RawMessage `json:"id"`
		E  *Error          `json:"error"`
	}{"2.0", json.RawMessage("null"), e})
	if err := c.write(b, 0); err != nil {
		c.log.Debug("rpc: writing error response", "err", err)
	}
}

// Close implements channel.Channel; it closes the connection and releases a
// Recv waiting for replies.
func (c *serverChannel) Close() error {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	c.poke()
	if c.onClose != nil {
		c.onClose()
	}
	return c.conn.Close()
}

// stopReading makes Recv treat the rest of the input as absent: requests
// already read are still answered, then Recv reports io.EOF (graceful
// shutdown).
func (c *serverChannel) stopReading() {
	c.stopping.Store(true)
	_ = c.conn.SetReadDeadline(time.Now())
}

// repliesIn counts the responses in an outbound message. jrpc2 writes server
// notifications as {"jsonrpc":"2.0","method":...} (no id: this package never
// makes server-to-client calls) and batches only of responses.
func repliesIn(msg []byte) int {
	if bytes.HasPrefix(msg, []byte(`{"jsonrpc":"2.0","method":`)) {
		return 0
	}
	if len(msg) > 0 && msg[0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(msg, &elems) != nil {
			return 0
		}
		return len(elems)
	}
	return 1
}

// expectedReplies reports how many responses jrpc2 will write for one
// inbound line (a valid JSON value), following its rules: an empty batch
// gets one error; every message gets a reply unless it is a well-formed
// notification (a valid request without id, which is never answered, even
// on error). A line that is not JSON is reported as an error.
func expectedReplies(line []byte) (int, error) {
	if line[0] != '[' {
		// One decode validates and classifies the common single message;
		// only a line that does not decode as an object is checked again.
		var obj map[string]json.RawMessage
		if gojson.Unmarshal(line, &obj) != nil || obj == nil {
			if !json.Valid(line) {
				return 0, jsonError(line)
			}
			return 1, nil // valid JSON but not an object: one error
		}
		if answeredObj(obj) {
			return 1, nil
		}
		return 0, nil
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(line, &msgs); err != nil {
		if !json.Valid(line) {
			return 0, jsonError(line)
		}
		return 1, nil // valid JSON but not an array of values: one error
	}
	if len(msgs) == 0 {
		return 1, nil
	}
	n := 0
	for _, m := range msgs {
		if answered(m) {
			n++
		}
	}
	return n, nil
}

func jsonError(line []byte) error {
	var v json.RawMessage
	err := json.Unmarshal(line, &v)
	if err == nil {
		err = errors.New("invalid JSON")
	}
	return err
}

// answered mirrors jrpc2's validation of one message (json.go parseJSON and
// server.go checkAndAssignLocked): anything but a well-formed notification
// gets a response.
func answered(m json.RawMessage) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(m, &obj) != nil || obj == nil {
		return true
	}
	return answeredObj(obj)
}

func answeredObj(obj map[string]json.RawMessage) bool {
	var v, method string
	for k, val := range obj {
		switch k {
		case "jsonrpc":
			if json.Unmarshal(val, &v) != nil {
				return true
			}
		case "id":
			if !isNullJSON(val) {
				return true // a call: answered whatever else is wrong
			}
		case "method":
			if json.Unmarshal(val, &method) != nil {
				return true
			}
		case "params":
			if !isNullJSON(val) && val[0] != '[' && val[0] != '{' {
				return true
			}
		case "error":
			if !isNullJSON(val) {
				return true
			}
		default: // "result" and unknown fields make it invalid
			return true
		}
	}
	return v != "2.0" || method == ""
}

func isNullJSON(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }
