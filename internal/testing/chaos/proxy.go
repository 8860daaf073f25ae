package chaos

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LinkFault is what the proxy does to one direction of one node pair.
//
//   - Delay (+ uniform Jitter) holds every chunk read from the sender before
//     it is written on; chunks of one connection keep their order (a chunk
//     is never written before the previous one), so jitter does not reorder
//     bytes inside a TCP stream, which TCP itself forbids; it does reorder
//     messages across connections (raft's pipeline, heartbeat and pooled
//     connections, and every forwarded call, are separate connections).
//   - Loss is the probability that a chunk is "lost": TCP would retransmit
//     it, so the stream stalls for a retransmission timeout (200-800 ms)
//     and then goes on. Reset is the probability that the connection is
//     torn down instead (both sides see a reset/EOF).
type LinkFault struct {
	Delay, Jitter time.Duration
	Loss, Reset   float64
}

func (f LinkFault) zero() bool { return f == LinkFault{} }

// Faults holds the current LinkFault of every directed pair (src, dst).
type Faults struct {
	mu    sync.Mutex
	links map[[2]int]LinkFault
}

// NewFaults returns an empty (healthy) fault table.
func NewFaults() *Faults { return &Faults{links: map[[2]int]LinkFault{}} }

// Set sets the fault of both directions between a and b.
func (f *Faults) Set(a, b int, lf LinkFault) {
	f.mu.Lock()
	f.links[[2]int{a, b}], f.links[[2]int{b, a}] = lf, lf
	f.mu.Unlock()
}

// Clear heals every link.
func (f *Faults) Clear() {
	f.mu.Lock()
	f.links = map[[2]int]LinkFault{}
	f.mu.Unlock()
}

func (f *Faults) get(src, dst int) LinkFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.links[[2]int{src, dst}]
}

// Proxy forwards TCP connections from any node to one node's listener
// (its raft or its forwarding port). It listens on the host end of the
// bridge; the sender is identified by its source address (10.77.0.X is
// node X), so faults and partitions apply per pair.
type Proxy struct {
	dst    int
	target string
	ln     net.Listener
	faults *Faults
	log    *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on hostIP:0 and forwards to target, node dst's address.
func NewProxy(log *slog.Logger, dst int, target string, faults *Faults) (*Proxy, error) {
	ln, err := net.Listen("tcp", hostIP+":0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{dst: dst, target: target, ln: ln, faults: faults, log: log, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address nodes dial to reach dst through the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the listening port (used by the partition rules).
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Close stops accepting and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// srcNode maps a peer address 10.77.0.X:port to X (0 if not a node).
func srcNode(addr net.Addr) int {
	host, _, _ := net.SplitHostPort(addr.String())
	if !strings.HasPrefix(host, subnet+".") {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(host, subnet+"."))
	return n
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer p.untrack(in)
	src := srcNode(in.RemoteAddr())
	out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { p.pump(in, out, src, p.dst); done <- struct{}{} }()
	go func() { p.pump(out, in, p.dst, src); done <- struct{}{} }()
	<-done // one direction ended: tear the connection down, as TCP would
	in.Close()
	out.Close()
	<-done
}

type chunk struct {
	b   []byte
	due time.Time
}

// pump copies from -> to, applying the (src, dst) fault to every chunk.
func (p *Proxy) pump(from, to net.Conn, src, dst int) {
	q := make(chan chunk, 256)
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				timer.Reset(d)
				<-timer.C
			}
			if _, err := to.Write(c.b); err != nil {
				from.Close()
				for range q { // drain
				}
				return
			}
		}
		if tc, ok := to.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			lf := p.faults.get(src, dst)
			due := time.Now()
			if !lf.zero() {
				if lf.Reset > 0 && rand.Float64() < lf.Reset {
					from.Close()
					to.Close()
					break
				}
				due = due.Add(lf.Delay)
				if lf.Jitter > 0 {
					due = due.Add(rand.N(lf.Jitter))
				}
				if lf.Loss > 0 && rand.Float64() < lf.Loss {
					due = due.Add(200*time.Millisecond + rand.N(600*time.Millisecond))
				}
			}
			if due.Before(last) {
				due = last // keep the stream's order
			}
			last = due
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			if err != io.EOF {
				to.Close()
			}
			break
		}
	}
	close(q)
	<-wdone
}
