package rpc

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the per-listener and per-connection limits (Options).
const (
	DefaultMaxConns        = 1024             // per listener
	DefaultMaxConnsPerUID  = 256              // per Unix socket peer uid, across listeners
	DefaultLineTimeout     = 30 * time.Second // a started line must end within this
	DefaultIdleTimeout     = 10 * time.Minute // no request, no call in flight, no stream
	DefaultMaxPartialBytes = 32 << 20         // partial lines held, server-wide
)

// byteBudget bounds the bytes of partial (unfinished) request lines a
// server holds across all its connections. A line longer than the reader's
// buffer is kept as chunks of what was actually received, each reserved
// here first; when the budget is exhausted the line is dropped (read to its
// newline without being kept) and answered with CodeUnavailable, so memory
// stays bounded however many connections send half lines.
type byteBudget struct {
	max  int64
	used atomic.Int64
}

func (b *byteBudget) take(n int) bool {
	if b == nil {
		return true
	}
	if b.used.Add(int64(n)) > b.max {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *byteBudget) give(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

// deadlineReader is the reader under a connection's line reader. It arms
// the connection's read deadline: between lines the idle timeout, and once
// the first byte of a line has arrived, the line timeout counted from that
// byte. Deadlines are re-armed only when they change (idle: when less than
// half of it is left), so the common path makes no extra calls.
type deadlineReader struct {
	conn     net.Conn
	line     time.Duration // 0: none
	idle     time.Duration // 0: none
	stopping *atomic.Bool  // Shutdown set a deadline of its own: keep it

	lineStart time.Time // zero: between lines
	set       time.Time // the deadline currently armed (zero: none)
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	d.arm()
	n, err := d.conn.Read(p)
	if n > 0 && d.lineStart.IsZero() {
		d.lineStart = time.Now()
	}
	return n, err
}

func (d *deadlineReader) arm() {
	if d.stopping.Load() {
		return
	}
	var target time.Time
	switch {
	case !d.lineStart.IsZero() && d.line > 0:
		target = d.lineStart.Add(d.line)
		if target.Equal(d.set) {
			return
		}
	case d.idle > 0:
		now := time.Now()
		if !d.set.IsZero() && d.set.Sub(now) > d.idle/2 && d.lineStart.IsZero() {
			return
		}
		target = now.Add(d.idle)
	default:
		if d.set.IsZero() {
			return
		}
	}
	d.set = target
	_ = d.conn.SetReadDeadline(target)
	if d.stopping.Load() { // Shutdown raced with us: restore its deadline
		_ = d.conn.SetReadDeadline(time.Now())
	}
}

// lineDone is called when a line was returned; buffered says whether the
// next line has already begun.
func (d *deadlineReader) lineDone(buffered bool) {
	if buffered {
		d.lineStart = time.Now()
	} else {
		d.lineStart = time.Time{}
	}
}

// inLine reports whether a line has started and not ended.
func (d *deadlineReader) inLine() bool { return !d.lineStart.IsZero() }

// rearm forces the next read to arm its deadline again.
func (d *deadlineReader) rearm() { d.set = time.Time{} }

// uidCounter counts a server's connections per peer uid.
type uidCounter struct {
	mu sync.Mutex
	n  map[int]int
}

func (u *uidCounter) acquire(uid, max int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n == nil {
		u.n = map[int]int{}
	}
	if max > 0 && u.n[uid] >= max {
		return false
	}
	u.n[uid]++
	return true
}

func (u *uidCounter) release(uid int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n[uid] <= 1 {
		delete(u.n, uid)
	} else {
		u.n[uid]--
	}
}

// refuse writes err (id null) on nc and closes it, without blocking the
// caller for more than a second.
func refuse(nc net.Conn, err *Error) {
	b := append(mustJSON(struct {
		V  string `json:"jsonrpc"`
		ID any    `json:"id"`
		E  *Error `json:"error"`
	}{"2.0", nil, err}), '\n')
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(b)
	nc.Close()
}
