package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// tlsCluster is three real nodes on loopback TCP with mutual TLS.
type tlsCluster struct {
	nodes []*Node
	addrs []string
	ca    string // the CA dir (also holds every node's files)
}

func newCA(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := pki.CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

func nodeStore(t testing.TB, caDir, id string) *pki.Store {
	t.Helper()
	cert, key := pki.NodeFiles(caDir, id)
	if _, _, err := pki.CreateNodeCert(caDir, id, caDir, pki.NodeCertOptions{}); err != nil && !errors.Is(err, pki.ErrExists) {
		t.Fatal(err)
	}
	ca, _ := pki.CAFiles(caDir)
	s, err := pki.Load(pki.Files{CA: ca, Cert: cert, Key: key}, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startTLSCluster(t *testing.T, n int) *tlsCluster {
	t.Helper()
	c := &tlsCluster{ca: newCA(t)}
	var peers []cluster.Peer
	for i := 1; i <= n; i++ {
		addr := "127.0.0.1:" + strconv.Itoa(testutil.Port(t))
		c.addrs = append(c.addrs, addr)
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("n%d", i), Address: addr})
	}
	base := t.TempDir()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		node, err := New(Config{Config: cluster.Config{
			NodeID: id, DataDir: filepath.Join(base, id), RaftBind: c.addrs[i-1], Peers: peers,
			TLS:              nodeStore(t, c.ca, id),
			HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		}, DisableLoops: true})
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		c.nodes = append(c.nodes, node)
		t.Cleanup(func() { _ = node.Shutdown() })
	}
	return c
}

func (c *tlsCluster) leader(t *testing.T) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if _, err := n.WaitForLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for ctx.Err() == nil {
		for _, n := range c.nodes {
			if n.IsLeader() {
				return n
			}
		}
		c.nodes[0].WaitLeaderChange(ctx, 100*time.Millisecond)
	}
	t.Fatal("no leader")
	return nil
}

// follower returns a follower once every node applied what the leader
// committed on taking office (so nothing moves while the test measures).
func (c *tlsCluster) follower(t *testing.T) (*Node, string) {
	l := c.leader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, idx, err := l.Propose(ctx, &fsm.Noop{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if err := n.WaitForApplied(ctx, idx); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range c.nodes {
		if n != l {
			return n, c.addrs[i]
		}
	}
	t.Fatal("no follower")
	return nil, ""
}

func loadPair(t testing.TB, caDir, id string) tls.Certificate {
	t.Helper()
	cert, key := pki.NodeFiles(caDir, id)
	if _, _, err := pki.CreateNodeCert(caDir, id, caDir, pki.NodeCertOptions{}); err != nil && !errors.Is(err, pki.ErrExists) {
		t.Fatal(err)
	}
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// attackerStream is a raft stream layer of an outsider: it presents cert
// and trusts any server.
type attackerStream struct {
	net.Listener
	cert tls.Certificate
}

func (a *attackerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(addr), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{a.cert}})
}

func attackerTransport(t *testing.T, cert tls.Certificate) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: &attackerStream{Listener: ln, cert: cert}, MaxPool: 1, Timeout: 2 * time.Second})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// forgedAppend is what the attacker sent: AppendEntries at term+1
// carrying a forged run, claiming to come from member n2.
func forgedAppend(t *testing.T, target *Node) *raft.AppendEntriesRequest {
	t.Helper()
	term, _ := strconv.ParseUint(target.Raft().Stats()["term"], 10, 64)
	last := target.Raft().LastIndex()
	buf, err := fsm.Encode(&fsm.Submit{ID: "forged-run", Spec: mustSpec(t, diamond)})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: []byte("n2")}, Term: term + 1,
		PrevLogEntry: last, PrevLogTerm: term,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 1, Type: raft.LogCommand, Data: buf}},
		LeaderCommitIndex: last + 1,
	}
}

func termOf(n *Node) uint64 {
	v, _ := strconv.ParseUint(n.Raft().Stats()["term"], 10, 64)
	return v
}

func TestTLSClusterElectsAndReplicates(t *testing.T) {
	c := startTLSCluster(t, 3)
	l := c.leader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, idx, err := l.Propose(ctx, &fsm.Submit{ID: "run-1", Spec: mustSpec(t, diamond)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if err := n.WaitForApplied(ctx, idx); err != nil {
			t.Fatalf("%s: %v", n.ID(), err)
		}
		if _, _, err := n.FSM().GetRun("run-1"); err != nil {
			t.Fatalf("%s: %v", n.ID(), err)
		}
	}
}

// An outsider on the raft port — with a self-signed certificate that
// claims to be member n2, or with a CA-signed certificate for a node that
// is not in the configuration — is refused in the handshake: the forged
// AppendEntries and TimeoutNow it sends are never decoded, the term does
// not move and nothing is applied. The same transport with a member's
// certificate is answered (the attack would reach raft otherwise).
func TestTLSRaftRefusesNonMembers(t *testing.T) {
	c := startTLSCluster(t, 3)
	target, addr := c.follower(t)
	for name, cert := range map[string]tls.Certificate{
		"self-signed n2":     testutil.SelfSignedNode(t, "n2"),
		"CA-signed n9":       loadPair(t, c.ca, "n9"),
		"other CA's n2 cert": loadPair(t, newCA(t), "n2"),
	} {
		t.Run(name, func(t *testing.T) {
			term, last, applied := termOf(target), target.Raft().LastIndex(), target.FSM().AppliedIndex()
			tr := attackerTransport(t, cert)
			var resp raft.AppendEntriesResponse
			if err := tr.AppendEntries("n2", raft.ServerAddress(addr), forgedAppend(t, target), &resp); err == nil {
				t.Fatalf("forged AppendEntries was answered: %+v", resp)
			}
			var tn raft.TimeoutNowResponse
			if err := tr.TimeoutNow("n2", raft.ServerAddress(addr), &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2")}}, &tn); err == nil {
				t.Fatalf("TimeoutNow was answered: %+v", tn)
			}
			var vr raft.RequestVoteResponse
			if err := tr.RequestVote("n2", raft.ServerAddress(addr), &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: []byte("n2")}, Term: term + 5, LastLogIndex: last + 10, LastLogTerm: term + 5}, &vr); err == nil {
				t.Fatalf("RequestVote was answered: %+v", vr)
			}
			if got := termOf(target); got != term {
				t.Fatalf("term moved %d -> %d", term, got)
			}
			if got := target.Raft().LastIndex(); got != last {
				t.Fatalf("last index moved %d -> %d", last, got)
			}
			if got := target.FSM().AppliedIndex(); got != applied {
				t.Fatalf("applied index moved %d -> %d", applied, got)
			}
			if _, _, err := target.FSM().GetRun("forged-run"); err == nil {
				t.Fatal("the forged run was applied")
			}
		})
	}
	// Control: a member's certificate reaches raft (a stale heartbeat is
	// answered, and refused by raft itself).
	tr := attackerTransport(t, loadPair(t, c.ca, "n3"))
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries("n3", raft.ServerAddress(addr), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n3")}, Term: 0}, &resp); err != nil {
		t.Fatalf("a member's connection was refused: %v", err)
	}
	if resp.Success || resp.Term != termOf(target) {
		t.Fatalf("stale heartbeat: %+v", resp)
	}
}

// rogue is a TLS server that records whether any byte of raft traffic
// ever reached it.
func rogue(t *testing.T, cert tls.Certificate) (addr string, got chan int) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan int, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				n, _ := io.ReadFull(c, b)
				got <- n
			}()
		}
	}()
	return ln.Addr().String(), got
}

// A voter added at an address whose server has no CA-signed certificate
// for the id it was added with is sent nothing: no log, no snapshot.
func TestTLSAddPeerNeedsTheNodesCertificate(t *testing.T) {
	c := startTLSCluster(t, 3)
	l := c.leader(t)
	addr, got := rogue(t, loadPair(t, c.ca, "n9")) // CA-signed, but for n9
	if err := l.AddVoter("n4", addr); err != nil {
		t.Fatal(err)
	}
	// The leader dials n4 at once and retries with backoff; every attempt
	// is a connection the rogue accepts. Wait for a few of them.
	for i := 0; i < 3; i++ {
		select {
		case n := <-got:
			if n != 0 {
				t.Fatal("the rogue received raft traffic")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the leader never dialled the new voter")
		}
	}
}
