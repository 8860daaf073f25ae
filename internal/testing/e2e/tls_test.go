package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// flowdRun runs the flowd binary and fails the test unless it succeeds.
func flowdRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(flowdBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("flowd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startTLSCluster is startCluster with certificates made by `flowd tls`
// (for n1..nN and an outsider, n9) and the agents' --tls-* flags.
func startTLSCluster(t testing.TB, n int) (*cluster, string) {
	t.Helper()
	base := t.TempDir()
	certs := filepath.Join(base, "tls")
	flowdRun(t, "tls", "ca", "create", "--dir", certs)
	c := &cluster{t: t}
	var peers []string
	for i := 1; i <= n; i++ {
		a := &agent{id: fmt.Sprintf("n%d", i), dir: filepath.Join(base, fmt.Sprintf("n%d", i)),
			sock: filepath.Join(base, fmt.Sprintf("n%d.sock", i)),
			raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		peers = append(peers, a.id+"="+a.raft)
		c.agents = append(c.agents, a)
	}
	flowdRun(t, "tls", "cert", "create", "--ca-dir", certs, "--node", "n9", "--dir", certs)
	for _, a := range c.agents {
		flowdRun(t, "tls", "cert", "create", "--ca-dir", certs, "--node", a.id, "--dir", certs, "--ip", "127.0.0.1")
		a.args = []string{"agent", "--node-id", a.id, "--data-dir", a.dir, "--raft-addr", a.raft, "--forward-addr", a.fwd,
			"--socket", a.sock, "--peers", strings.Join(peers, ","), "--raft-heartbeat-timeout", "300ms",
			"--raft-election-timeout", "300ms", "--log-level", "info",
			"--tls-ca", filepath.Join(certs, "ca.pem"), "--tls-cert", filepath.Join(certs, a.id+".pem"),
			"--tls-key", filepath.Join(certs, a.id+"-key.pem")}
		c.start(a)
	}
	t.Cleanup(c.stopAll)
	c.waitLeader()
	return c, certs
}

// outsider is a raft transport that presents cert and trusts anyone.
type outsider struct {
	net.Listener
	cert tls.Certificate
}

func (o *outsider) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{o.cert}})
}

func digests(t testing.TB, c *cluster) map[string]rpc.DigestResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]rpc.DigestResult{}
	for _, a := range c.agents {
		d, err := c.client(a).ClusterDigest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out[a.id] = *d
	}
	return out
}

// Attackers against real agent processes with mutual TLS: on the raft
// port, a self-signed certificate claiming to be a member and a CA-signed
// certificate for a node outside the configuration send the forged
// AppendEntries (term+1, a forged run) and TimeoutNow; on the forwarding
// port, connections without a member certificate send run.submit. Every
// one is refused, the term does not move, nothing is applied, the replicas
// stay equal, and the agents log who they refused.
func TestTLSAttackersAreRefused(t *testing.T) {
	c, certs := startTLSCluster(t, 3)
	leader := c.waitLeader()
	target := c.followers(leader)[0]
	before := c.status(target)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	forgedID := "0190a0a0-0000-7000-8000-00000000beef"
	spec := `{"name":"forged","tasks":[{"key":"a","type":"echo"}]}`

	for name, cert := range map[string]tls.Certificate{"self-signed n2": testutil.SelfSignedNode(t, "n2"), "CA-signed n9": testutil.NodePair(t, certs, "n9")} {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: &outsider{Listener: ln, cert: cert}, MaxPool: 1, Timeout: 2 * time.Second})
		hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.id), Addr: []byte(leader.raft)}
		var ar raft.AppendEntriesResponse
		err := tr.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.raft), &raft.AppendEntriesRequest{
			RPCHeader: hdr, Term: before.Term + 1, PrevLogEntry: before.CommitIndex, PrevLogTerm: before.Term,
			Entries:           []*raft.Log{{Index: before.CommitIndex + 1, Term: before.Term + 1, Type: raft.LogCommand, Data: []byte(spec)}},
			LeaderCommitIndex: before.CommitIndex + 1,
		}, &ar)
		if err == nil {
			t.Fatalf("%s: forged AppendEntries answered: %+v", name, ar)
		}
		var tn raft.TimeoutNowResponse
		if err := tr.TimeoutNow(raft.ServerID(target.id), raft.ServerAddress(target.raft), &raft.TimeoutNowRequest{RPCHeader: hdr}, &tn); err == nil {
			t.Fatalf("%s: TimeoutNow answered", name)
		}
		tr.Close()
	}

	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"run.submit","params":{"id":%q,"workflow":%s}}`+"\n", forgedID, spec)
	for name, dial := range map[string]func() (net.Conn, error){
		"plaintext": func() (net.Conn, error) { return net.DialTimeout("tcp", leader.fwd, 5*time.Second) },
		"no certificate": func() (net.Conn, error) {
			return tls.Dial("tcp", leader.fwd, &tls.Config{InsecureSkipVerify: true})
		},
		"self-signed n2": func() (net.Conn, error) {
			return tls.Dial("tcp", leader.fwd, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{testutil.SelfSignedNode(t, "n2")}})
		},
		"CA-signed n9": func() (net.Conn, error) {
			return tls.Dial("tcp", leader.fwd, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{testutil.NodePair(t, certs, "n9")}})
		},
	} {
		conn, err := dial()
		if err != nil {
			continue // refused in the handshake
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write([]byte(line))
		if reply, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
			t.Fatalf("forward port, %s: answered %s", name, reply)
		}
		conn.Close()
	}

	// Still one cluster: same term, nothing forged, a real write through
	// the follower (forwarded over mTLS), replicas equal.
	cl := c.client(target)
	if _, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"real","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatalf("forwarded submit over mTLS: %v", err)
	}
	if _, err := cl.RunGet(ctx, forgedID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("forged run: %v", err)
	}
	if after := c.status(target); after.Term != before.Term {
		t.Fatalf("term moved %d -> %d", before.Term, after.Term)
	}
	var ds map[string]rpc.DigestResult
	// readiness polling of external processes
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, "the replicas to settle", func() error {
		ds = digests(t, c)
		if ds["n1"].AppliedIndex == ds["n2"].AppliedIndex && ds["n2"].AppliedIndex == ds["n3"].AppliedIndex {
			return nil
		}
		return fmt.Errorf("%+v", ds)
	})
	if ds["n1"].Digest != ds["n2"].Digest || ds["n2"].Digest != ds["n3"].Digest {
		t.Fatalf("replicas differ: %+v", ds)
	}
	b, _ := os.ReadFile(target.dir + ".log")
	if !strings.Contains(string(b), "raft connection refused") {
		t.Fatalf("the target did not log the refused raft connections:\n%s", tail(string(b), 20))
	}
}

func servedSerialOf(t testing.TB, addr string, me tls.Certificate) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{me}})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16), nil
}

// Rotation: new certificate files and SIGHUP; new raft and forwarding
// connections get the new certificate, the cluster keeps working.
func TestTLSRotationOnSIGHUP(t *testing.T) {
	c, certs := startTLSCluster(t, 3)
	leader := c.waitLeader()
	a := c.followers(leader)[0]
	me := testutil.NodePair(t, certs, leader.id)
	old, err := servedSerialOf(t, a.fwd, me)
	if err != nil {
		t.Fatal(err)
	}
	// Rotate: write the new pair beside the old one, then move it in place.
	next := filepath.Join(certs, "next")
	flowdRun(t, "tls", "cert", "create", "--ca-dir", certs, "--node", a.id, "--dir", next, "--ip", "127.0.0.1")
	for _, f := range []string{a.id + ".pem", a.id + "-key.pem"} {
		if err := os.Rename(filepath.Join(next, f), filepath.Join(certs, f)); err != nil {
			t.Fatal(err)
		}
	}
	want := testutil.NodePair(t, certs, a.id).Leaf.SerialNumber.Text(16)
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload is asynchronous to us: poll new connections until they
	// present the new certificate.
	var fwd, raftSerial string
	// polling another process for a visible effect
	_ = testutil.Poll(10*time.Second, 20*time.Millisecond, "the new certificate", func() error {
		fwd, _ = servedSerialOf(t, a.fwd, me)
		raftSerial, _ = servedSerialOf(t, a.raft, me)
		if fwd == want && raftSerial == want {
			return nil
		}
		return errors.New("the old one is served")
	})
	if fwd != want || raftSerial != want || want == old {
		t.Fatalf("after SIGHUP: forward serves %s, raft %s; want %s (old %s)", fwd, raftSerial, want, old)
	}
	b, _ := os.ReadFile(a.dir + ".log")
	if !strings.Contains(string(b), "certificates reloaded") {
		t.Fatalf("no reload in the log:\n%s", tail(string(b), 20))
	}
	// The rotated node still forwards and replicates: a write through it,
	// and leadership handed to it (the others dial it with the new cert).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.client(a).RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"after","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := c.client(leader).CallIdempotent(ctx, rpc.MethodRaftTransfer, rpc.PeerParams{ID: a.id}, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.waitLeader(); got != a {
		t.Fatalf("leader after transfer: %s", got.id)
	}
}

// Without TLS flags an agent whose raft address is not loopback refuses to
// start (exit 2, saying what to do); with --insecure-plaintext it starts
// and warns. The loopback agents of every other test run plaintext with
// the warning.
func TestPlaintextOffLoopbackNeedsTheInsecureFlag(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	args := []string{"agent", "--node-id", "n1", "--data-dir", filepath.Join(dir, "d"), "--socket", filepath.Join(dir, "s.sock"),
		"--raft-addr", fmt.Sprintf("0.0.0.0:%d", port), "--raft-advertise", fmt.Sprintf("127.0.0.1:%d", port),
		"--forward-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	out, err := exec.Command(flowdBin, args...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--insecure-plaintext") || !strings.Contains(string(out), "flowd tls ca create") {
		t.Fatalf("exposed plaintext agent: %v\n%s", err, out)
	}
	c := &cluster{t: t}
	a := &agent{id: "n1", dir: filepath.Join(dir, "d"), sock: filepath.Join(dir, "s.sock"), args: append(args, "--insecure-plaintext")}
	c.agents = []*agent{a}
	c.start(a)
	t.Cleanup(c.stopAll)
	c.waitLeader()
	b, _ := os.ReadFile(a.dir + ".log")
	if !strings.Contains(string(b), "plaintext and unauthenticated") {
		t.Fatalf("no warning:\n%s", b)
	}
}

// `flowd dev` makes its certificates and runs mutual TLS by default: it
// elects a leader, every agent logs its TLS identity, and a connection to a
// raft port without a member certificate is refused.
func TestFlowdDevUsesMTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	base := 0
	for i := 0; i < 50 && base == 0; i++ {
		p := 20000 + int(time.Now().UnixNano()%20000)
		if portsFree(p, p+1, p+2, p+1000, p+1001, p+1002) {
			base = p
		}
	}
	dev := exec.Command(flowdBin, "dev", "--dir", dir, "--base-port", fmt.Sprint(base), "--http-base-port", "0", "--concurrency", "0")
	stdout, _ := dev.StdoutPipe()
	dev.Stderr = os.Stderr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	defer func() { _ = dev.Process.Kill() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out []string
	timeout := time.After(60 * time.Second)
	for up := false; !up; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("flowd dev exited early:\n%s", strings.Join(out, "\n"))
			}
			out = append(out, l)
			up = strings.HasPrefix(l, "export FLOWD_ADDR=")
		case <-timeout:
			t.Fatal("flowd dev did not come up in 60s")
		}
	}
	all := strings.Join(out, "\n")
	if !strings.Contains(all, "(leader n") || !strings.Contains(all, "nodes talk mutual TLS") {
		t.Fatalf("dev output:\n%s", all)
	}
	for i := 1; i <= 3; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
		if !strings.Contains(string(b), "mutual TLS between nodes") || strings.Contains(string(b), "plaintext and unauthenticated") {
			t.Fatalf("n%d log:\n%s", i, tail(string(b), 10))
		}
	}
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", base), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write([]byte{0}) // an AppendEntries type byte
		if _, err = conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("raft port answered a connection without a certificate")
		}
		conn.Close()
	}
	_ = dev.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("flowd dev exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("flowd dev did not stop on SIGINT")
	}
}
