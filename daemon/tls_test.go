package daemon

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flowd/flowd/internal/testing/testutil"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/rpc"
)

// makeCerts writes a CA and node certificates for ids into a new dir.
func makeCerts(t testing.TB, ids ...string) string {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := pki.CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, _, err := pki.CreateNodeCert(dir, id, dir, pki.NodeCertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startTLSAgents starts n in-process agents with mutual TLS between them.
func startTLSAgents(t testing.TB, n int) ([]*Agent, string) {
	t.Helper()
	var ids []string
	for i := 1; i <= n; i++ {
		ids = append(ids, fmt.Sprintf("n%d", i))
	}
	certs := makeCerts(t, append(ids, "n9")...)
	dir := t.TempDir()
	var peers []string
	var cfgs []Config
	for _, id := range ids {
		raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers = append(peers, id+"="+raftAddr)
		cert, key := pki.NodeFiles(certs, id)
		ca, _ := pki.CAFiles(certs)
		cfgs = append(cfgs, Config{NodeID: id, DataDir: filepath.Join(dir, id),
			RaftAddr: raftAddr, ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			Socket: filepath.Join(dir, id+".sock"), HeartbeatTimeout: 300 * time.Millisecond,
			ElectionTimeout: 300 * time.Millisecond, LogLevel: "error", TLSCA: ca, TLSCert: cert, TLSKey: key})
	}
	var agents []*Agent
	for _, c := range cfgs {
		c.Peers = strings.Join(peers, ",")
		a, err := New(withRaft(c), NewLogger("error", ""))
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		t.Cleanup(func() { _ = a.Shutdown() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range agents {
		if _, err := raftNode(a).WaitForLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return agents, certs
}

const submitLine = `{"jsonrpc":"2.0","id":1,"method":"run.submit","params":{"workflow":{"name":"evil","tasks":[{"key":"a","type":"echo"}]},"id":"0190a0a0-0000-7000-8000-000000000001"}}` + "\n"

// sendLine writes one request on c and returns the reply line, or the
// error that ended the connection.
func sendLine(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line)); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// The forwarding port of a TLS agent refuses every connection that does
// not carry a member's certificate — plaintext, TLS without a certificate,
// a self-signed one naming a member, a CA-signed one for a node outside
// the configuration — and the submit they send is never applied. A
// member's connection is served, but only the methods a follower
// forwards.
func TestForwardPortRefusesNonMembers(t *testing.T) {
	agents, certs := startTLSAgents(t, 3)
	leader, _ := followers(agents)
	addr := leader.cfg.ForwardAddr
	tlsDial := func(certs ...tls.Certificate) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{InsecureSkipVerify: true, Certificates: certs})
	}
	attempts := map[string]func() (net.Conn, error){
		"plaintext":      func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) },
		"no certificate": func() (net.Conn, error) { return tlsDial() },
		"self-signed n2": func() (net.Conn, error) { return tlsDial(testutil.SelfSignedNode(t, "n2")) },
		"CA-signed n9":   func() (net.Conn, error) { return tlsDial(testutil.NodePair(t, certs, "n9")) },
	}
	for name, dial := range attempts {
		t.Run(name, func(t *testing.T) {
			c, err := dial()
			if err != nil {
				return // refused in the handshake
			}
			defer c.Close()
			if reply, err := sendLine(c, submitLine); err == nil {
				t.Fatalf("answered: %s", reply)
			}
		})
	}
	if _, _, err := leader.state.GetRun("0190a0a0-0000-7000-8000-000000000001"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused submit was applied: %v", err)
	}

	// A member: forwarded methods are served, the rest are not there.
	nc, err := tlsDial(testutil.NodePair(t, certs, "n2"))
	if err != nil {
		t.Fatal(err)
	}
	conn := rpc.NewConn(nc, rpc.ConnOptions{})
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sub rpc.SubmitResult
	if err := conn.Call(ctx, rpc.MethodRunSubmit, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"ok","tasks":[{"key":"a","type":"echo"}]}`)}, &sub); err != nil || !sub.Created {
		t.Fatalf("member's forwarded submit: %+v %v", sub, err)
	}
	for _, m := range []string{rpc.MethodClusterStats, rpc.MethodClusterStatus, rpc.MethodSettingsGet, rpc.MethodEventsSubscribe, rpc.MethodRaftPeers} {
		var e *rpc.Error
		if err := conn.Call(ctx, m, map[string]any{"path": "/tmp/x"}, nil); !errors.As(err, &e) || e.Code != rpc.CodeMethodNotFound {
			t.Fatalf("%s on the forwarding port: %v", m, err)
		}
	}
}

// The forwarding port serves exactly the methods onLeader may send: every
// leader-bound method and the consistent reads.
func TestForwardableMethods(t *testing.T) {
	a := newAgent(Config{NodeID: "n1"}, NewLogger("error", ""))
	for name := range a.methodTable() {
		want := rpc.LeaderBound(name) || name == rpc.MethodRunGet || name == rpc.MethodRunList || nodeAddressed[name]
		if forwardable(name) != want {
			t.Errorf("%s: forwardable %v", name, !want)
		}
	}
	for _, m := range []string{rpc.MethodRunSubmit, rpc.MethodTaskClaim, rpc.MethodRaftAddPeer, rpc.MethodRunWait, rpc.MethodSnapshotSave, rpc.MethodSnapshotRead} {
		if !forwardable(m) {
			t.Errorf("%s is forwarded by followers but not served", m)
		}
	}
}

// Writes through followers work over mutual TLS (the leader proxy dials
// the leader's forwarding port with the node's certificate).
func TestTLSForwardingThroughFollowers(t *testing.T) {
	agents, _ := startTLSAgents(t, 3)
	_, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := client(t, fs[0])
	res, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"name":"one","tasks":[{"key":"a","type":"echo"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w", WaitMS: 5000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	if ack, err := c.TaskComplete(ctx, rpc.CompleteParams{TaskID: tasks[0].TaskID, FencingToken: tasks[0].FencingToken}); err != nil || !ack.Accepted {
		t.Fatalf("complete: %+v %v", ack, err)
	}
	if w, err := c.RunWait(ctx, res.ID, 5000); err != nil || w.Run.State != domain.RunSucceeded {
		t.Fatalf("wait: %+v %v", w, err)
	}
}

// servedSerial returns the serial of the certificate addr presents.
func servedSerial(t testing.TB, addr string, client tls.Certificate) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{client}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// ReloadTLS serves the new certificate to new connections; a reload that
// fails keeps the old one.
func TestReloadTLS(t *testing.T) {
	agents, certs := startTLSAgents(t, 1)
	a := agents[0]
	me := testutil.NodePair(t, certs, "n1")
	before := servedSerial(t, a.cfg.ForwardAddr, me)
	cert, key := pki.NodeFiles(certs, "n1")
	os.Remove(cert)
	os.Remove(key)
	if _, _, err := pki.CreateNodeCert(certs, "n1", certs, pki.NodeCertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	after := servedSerial(t, a.cfg.ForwardAddr, me)
	raftAfter := servedSerial(t, a.cfg.RaftAddr, me)
	if before == after || after != raftAfter || after != a.tls.Leaf().SerialNumber.Text(16) {
		t.Fatalf("serial before %s, forward after %s, raft after %s", before, after, raftAfter)
	}
	// A broken file: the reload fails and the current certificate stays.
	os.WriteFile(cert, []byte("not a certificate"), 0o644)
	if err := a.ReloadTLS(); err == nil {
		t.Fatal("a broken certificate was loaded")
	}
	if got := servedSerial(t, a.cfg.ForwardAddr, me); got != after {
		t.Fatalf("serial after a failed reload: %s, want %s", got, after)
	}
}

func TestTransportSecurityRules(t *testing.T) {
	base := func(raft string) Config {
		c := Config{NodeID: "n1", DataDir: "/d", RaftAddr: raft}
		if err := c.Normalize(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := base("127.0.0.1:7001"); c.CheckTransportSecurity() != nil {
		t.Fatal("loopback plaintext refused")
	}
	c := base("0.0.0.0:7001")
	err := c.CheckTransportSecurity()
	if err == nil || !strings.Contains(err.Error(), "--insecure-plaintext") || !strings.Contains(err.Error(), "flowd tls ca create") {
		t.Fatalf("exposed plaintext: %v", err)
	}
	c.InsecurePlaintext = true
	if err := c.CheckTransportSecurity(); err != nil {
		t.Fatal(err)
	}
	c = base("127.0.0.1:7001")
	c.RaftAdvertise = "10.0.0.5:7001"
	if c.CheckTransportSecurity() == nil {
		t.Fatal("a non-loopback advertise address ran plaintext")
	}
	c = base("10.0.0.5:7001")
	c.TLSCA, c.TLSCert = "ca.pem", "n1.pem"
	if err := c.CheckTransportSecurity(); err == nil || !strings.Contains(err.Error(), "--tls-key is missing") {
		t.Fatalf("partial TLS: %v", err)
	}
	c.TLSKey, c.InsecurePlaintext = "n1-key.pem", true
	if err := c.CheckTransportSecurity(); err == nil {
		t.Fatal("TLS and --insecure-plaintext together")
	}
}

// An agent refuses a certificate made for another node.
func TestAgentRefusesAnotherNodesCertificate(t *testing.T) {
	certs := makeCerts(t, "n2")
	dir := t.TempDir()
	cert, key := pki.NodeFiles(certs, "n2")
	ca, _ := pki.CAFiles(certs)
	_, err := New(withRaft(Config{NodeID: "n1", DataDir: dir, Socket: filepath.Join(dir, "s.sock"),
		RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		TLSCA: ca, TLSCert: cert, TLSKey: key}), NewLogger("error", ""))
	if err == nil || !strings.Contains(err.Error(), `is for node "n2"`) {
		t.Fatalf("got %v", err)
	}
}
