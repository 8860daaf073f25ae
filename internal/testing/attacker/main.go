// Command attacker is the hostile process of the security end-to-end test
// (internal/testing/e2e/attacker_test.go, issue 11): each subcommand is one attack
// on a running agent, made the way an outsider would make it, from a
// process of its own (the test runs it as uid 65534 for the socket
// attacks). It reports what happened, one JSON object per line on stdout;
// the test decides whether the agent behaved.
//
//	attacker raft --target ADDR --target-id ID --leader-id ID --leader-addr ADDR --term T --index I --run-id UUID
//	         [--cert-file F --key-file K]   forged AppendEntries (term T+1, a real Submit) and TimeoutNow;
//	                                        without a file: a self-signed certificate for the leader's id
//	attacker forward --target ADDR --mode plaintext|nocert|selfsigned|otherca|files [--cert-file F --key-file K] --run-id UUID
//	attacker call --addr unix:///SOCK|tls://HOST:PORT [--token SECRET] METHOD PARAMS [METHOD PARAMS ...]
//	attacker partial --sock PATH --conns 50 --bytes 3900000   holds the lines until stdin closes
//	attacker snapshot --dir SNAPDIR --name NAME --sock PATH    a crafted file declaring a 1 GiB record, then snapshot.restore
//
// It is built only by the test; it is not part of the product. It uses the
// product's packages only where an attacker would copy the format anyway
// (fsm.Encode for a forged entry that would apply if accepted, pki to make
// a node certificate from a CA of its own).
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// report is one line of the attacker's output.
type report struct {
	Step    string          `json:"step"`
	Err     string          `json:"error,omitempty"` // transport-level failure (refused, closed, timeout)
	Code    int             `json:"code,omitempty"`  // JSON-RPC error code of an answer
	Message string          `json:"message,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"` // an answer's result: the attack got through
	N       int             `json:"n,omitempty"`
}

func emit(r report) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "attacker: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: attacker raft|forward|call|partial|snapshot [flags]")
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "raft":
		raftAttack(args)
	case "forward":
		forwardAttack(args)
	case "call":
		callAttack(args)
	case "partial":
		partialAttack(args)
	case "snapshot":
		snapshotAttack(args)
	default:
		fail("unknown attack %q", cmd)
	}
}

// selfSigned is a certificate that looks like member id's in every field
// (common name, node unit, SAN) but is signed by its own key.
func selfSigned(id string) tls.Certificate {
	c, err := testutil.SelfSignedNodeCert(id)
	if err != nil {
		fail("self-signed certificate: %v", err)
	}
	return c
}

// otherCA is a proper node certificate for id, signed by a CA the attacker
// made itself (same tool, another CA).
func otherCA(id string) tls.Certificate {
	dir, err := os.MkdirTemp("", "attacker-ca-")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(dir)
	if _, _, err := pki.CreateCA(dir, 0); err != nil {
		fail("CA: %v", err)
	}
	cert, key, err := pki.CreateNodeCert(dir, id, dir, pki.NodeCertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		fail("node certificate: %v", err)
	}
	return loadPair(cert, key)
}

func loadPair(cert, key string) tls.Certificate {
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		fail("load %s: %v", cert, err)
	}
	return kp
}

// outsider is a raft stream layer that presents cert and trusts anyone.
type outsider struct {
	net.Listener
	cert tls.Certificate
}

func (o *outsider) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr),
		&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{o.cert}})
}

// forgedSubmit is a real Submit command: applied, it would create run id.
func forgedSubmit(id string) []byte {
	b, err := fsm.Encode(&fsm.Submit{Stamped: fsm.Stamped{At: time.Now().UnixMilli()}, ID: id,
		Spec: domain.Spec{Name: "forged", Tasks: []domain.TaskSpec{{Key: "a", Type: "echo"}}}})
	if err != nil {
		fail("encode: %v", err)
	}
	return b
}

func raftAttack(args []string) {
	fs := flag.NewFlagSet("raft", flag.ExitOnError)
	target := fs.String("target", "", "raft address of the node attacked")
	targetID := fs.String("target-id", "", "its node id")
	leaderID := fs.String("leader-id", "", "node id the attacker claims to be")
	leaderAddr := fs.String("leader-addr", "", "address it claims")
	term := fs.Uint64("term", 0, "the target's current term (the forgery uses term+1)")
	index := fs.Uint64("index", 0, "the target's commit index")
	runID := fs.String("run-id", "", "id of the forged run")
	certFile, keyFile := fs.String("cert-file", "", "certificate to present (default: self-signed for --leader-id)"), fs.String("key-file", "", "its key")
	_ = fs.Parse(args)
	cert := selfSigned(*leaderID)
	if *certFile != "" {
		cert = loadPair(*certFile, *keyFile)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen: %v", err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: &outsider{Listener: ln, cert: cert},
		MaxPool: 1, Timeout: 2 * time.Second, Logger: nil})
	defer tr.Close()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(*leaderID), Addr: []byte(*leaderAddr)}
	var ar raft.AppendEntriesResponse
	err = tr.AppendEntries(raft.ServerID(*targetID), raft.ServerAddress(*target), &raft.AppendEntriesRequest{
		RPCHeader: hdr, Term: *term + 1, PrevLogEntry: *index, PrevLogTerm: *term,
		Entries:           []*raft.Log{{Index: *index + 1, Term: *term + 1, Type: raft.LogCommand, Data: forgedSubmit(*runID)}},
		LeaderCommitIndex: *index + 1,
	}, &ar)
	r := report{Step: "append_entries"}
	if err != nil {
		r.Err = err.Error()
	} else {
		r.Result, _ = json.Marshal(ar)
	}
	emit(r)
	var tn raft.TimeoutNowResponse
	err = tr.TimeoutNow(raft.ServerID(*targetID), raft.ServerAddress(*target), &raft.TimeoutNowRequest{RPCHeader: hdr}, &tn)
	r = report{Step: "timeout_now"}
	if err != nil {
		r.Err = err.Error()
	} else {
		r.Result, _ = json.Marshal(tn)
	}
	emit(r)
}

func forwardAttack(args []string) {
	fs := flag.NewFlagSet("forward", flag.ExitOnError)
	target := fs.String("target", "", "forwarding address of the node attacked")
	mode := fs.String("mode", "nocert", "plaintext, nocert, selfsigned, otherca or files")
	as := fs.String("as", "n1", "node id the certificate claims (selfsigned, otherca)")
	runID := fs.String("run-id", "", "id of the run the attacker submits")
	certFile, keyFile := fs.String("cert-file", "", "certificate (mode files)"), fs.String("key-file", "", "its key")
	_ = fs.Parse(args)
	var conn net.Conn
	var err error
	d := &net.Dialer{Timeout: 3 * time.Second}
	cfg := &tls.Config{InsecureSkipVerify: true}
	switch *mode {
	case "plaintext":
		conn, err = d.Dial("tcp", *target)
	case "nocert":
	case "selfsigned":
		cfg.Certificates = []tls.Certificate{selfSigned(*as)}
	case "otherca":
		cfg.Certificates = []tls.Certificate{otherCA(*as)}
	case "files":
		cfg.Certificates = []tls.Certificate{loadPair(*certFile, *keyFile)}
	default:
		fail("unknown mode %q", *mode)
	}
	if *mode != "plaintext" {
		conn, err = tls.DialWithDialer(d, "tcp", *target, cfg)
	}
	if err != nil {
		emit(report{Step: "connect", Err: err.Error()})
		return
	}
	defer conn.Close()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"run.submit","params":{"id":%q,"workflow":{"name":"forged","tasks":[{"key":"a","type":"echo"}]}}}`+"\n", *runID)
	emit(exchange(conn, bufio.NewReader(conn), "run.submit", line))
}

// exchange writes one request line and reads its answer (skipping
// notifications).
func exchange(conn net.Conn, br *bufio.Reader, method, line string) report {
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, line); err != nil {
		return report{Step: method, Err: err.Error()}
	}
	for {
		b, err := br.ReadBytes('\n')
		if err != nil {
			return report{Step: method, Err: "read: " + err.Error()}
		}
		var m struct {
			Method *string          `json:"method"`
			Result json.RawMessage  `json:"result"`
			Error  *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return report{Step: method, Err: "not JSON: " + string(b)}
		}
		if m.Method != nil {
			continue
		}
		r := report{Step: method, Result: m.Result}
		if m.Error != nil {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(*m.Error, &e)
			r.Code, r.Message, r.Result = e.Code, e.Message, nil
		}
		return r
	}
}

// dial connects to unix:///path or tls://host:port (trusting any server
// certificate: the attacker does not care who answers).
func dial(addr string) (net.Conn, error) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		return net.DialTimeout("unix", strings.TrimPrefix(addr, "unix://"), 3*time.Second)
	case strings.HasPrefix(addr, "tls://"):
		return tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", strings.TrimPrefix(addr, "tls://"), &tls.Config{InsecureSkipVerify: true})
	}
	return nil, fmt.Errorf("address %q: want unix:// or tls://", addr)
}

func callAttack(args []string) {
	fs := flag.NewFlagSet("call", flag.ExitOnError)
	addr := fs.String("addr", "", "unix:///SOCK or tls://HOST:PORT")
	token := fs.String("token", "", "ACL token secret sent first (agent.auth)")
	_ = fs.Parse(args)
	rest := fs.Args()
	if len(rest)%2 != 0 {
		fail("call: want METHOD PARAMS pairs, got %q", rest)
	}
	conn, err := dial(*addr)
	if err != nil {
		emit(report{Step: "connect", Err: err.Error()})
		return
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 1<<20)
	id := 0
	send := func(method, params string) {
		id++
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		emit(exchange(conn, br, method, line))
	}
	if *token != "" {
		p, _ := json.Marshal(map[string]string{"token": *token})
		send("agent.auth", string(p))
	}
	for i := 0; i < len(rest); i += 2 {
		send(rest[i], rest[i+1])
	}
}

// partialAttack opens conns connections and sends each the start of a
// request line of size bytes without its newline, then holds them until
// stdin closes (the test measures the agent meanwhile).
func partialAttack(args []string) {
	fs := flag.NewFlagSet("partial", flag.ExitOnError)
	sock := fs.String("sock", "", "the agent's Unix socket")
	conns := fs.Int("conns", 50, "connections")
	size := fs.Int("bytes", 3_900_000, "bytes of each unfinished line")
	_ = fs.Parse(args)
	chunk := []byte(strings.Repeat("x", 64<<10))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	var errs []string
	for range *conns {
		wg.Go(func() {
			c, err := net.Dial("unix", *sock)
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
			head := `{"jsonrpc":"2.0","id":1,"method":"run.submit","params":{"pad":"`
			_, err = io.WriteString(c, head)
			for sent := len(head); err == nil && sent < *size; sent += len(chunk) {
				_, err = c.Write(chunk[:min(len(chunk), *size-sent)])
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r := report{Step: "holding", N: len(held)}
	if len(errs) > 0 {
		r.Err = fmt.Sprintf("%d connections failed, first: %s", len(errs), errs[0])
	}
	emit(r)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range held {
		c.Close()
	}
}

// snapshotAttack writes the 26-byte crafted snapshot of issue 11 (a valid
// header, a record whose key declares 1 GiB, ten bytes of it) into the
// snapshot directory and asks the agent to restore it.
func snapshotAttack(args []string) {
	fs := flag.NewFlagSet("snapshot", flag.ExitOnError)
	dir := fs.String("dir", "", "the leader's --snapshot-dir")
	name := fs.String("name", "crafted.snap", "file name")
	sock := fs.String("sock", "", "the leader's Unix socket")
	_ = fs.Parse(args)
	b := []byte("FLOWDSNAP\x01\x01")
	b = binary.AppendUvarint(b, 1<<30)
	b = append(b, "0123456789"...)
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fail("%v", err)
	}
	f, err := os.OpenFile(filepath.Join(*dir, *name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		fail("%v", err)
	}
	if _, err := f.Write(b); err != nil {
		fail("%v", err)
	}
	if err := f.Close(); err != nil {
		fail("%v", err)
	}
	emit(report{Step: "crafted", N: len(b)})
	conn, err := dial("unix://" + *sock)
	if err != nil {
		emit(report{Step: "connect", Err: err.Error()})
		return
	}
	defer conn.Close()
	p, _ := json.Marshal(map[string]string{"path": *name})
	emit(exchange(conn, bufio.NewReader(conn), "snapshot.restore",
		fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"snapshot.restore","params":%s}`+"\n", p)))
}
