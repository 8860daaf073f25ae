package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// startACLAgents starts n TLS agents, each with a TCP client listener.
func startACLAgents(t *testing.T, n int) ([]*Agent, string) {
	t.Helper()
	var ids []string
	for i := 1; i <= n; i++ {
		ids = append(ids, fmt.Sprintf("n%d", i))
	}
	certs := makeCerts(t, ids...)
	dir := t.TempDir()
	var peers []string
	var cfgs []Config
	ca, _ := pki.CAFiles(certs)
	for _, id := range ids {
		raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers = append(peers, id+"="+raftAddr)
		cert, key := pki.NodeFiles(certs, id)
		cfgs = append(cfgs, Config{NodeID: id, DataDir: filepath.Join(dir, id), RaftAddr: raftAddr,
			ForwardAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), ClientAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
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

func tokenClient(t *testing.T, a *Agent, certs, token string) *rpc.Client {
	t.Helper()
	ca, _ := pki.CAFiles(certs)
	cfg, err := rpc.ClientTLSConfig(ca)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rpc.NewClient([]string{"tls://" + a.cfg.ClientAddr}, rpc.ClientOptions{Token: token, TLS: cfg, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantCode(t *testing.T, err error, code int, what string) {
	t.Helper()
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: got %v, want code %d", what, err, code)
	}
}

func TestACLTokensOnTheClientListener(t *testing.T) {
	agents, certs := startACLAgents(t, 3)
	leader, fs := followers(agents)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Bootstrap: a local admin (SO_PEERCRED) makes the tokens, through a
	// follower (forwarded to the leader).
	admin := client(t, fs[0])
	var worker, reader rpc.ACLTokenCreateResult
	if err := admin.Call(ctx, rpc.MethodACLTokenCreate, rpc.ACLTokenCreateParams{Role: "worker", Name: "w"}, &worker); err != nil || !strings.HasPrefix(worker.Secret, tokenPrefix) {
		t.Fatalf("create: %+v %v", worker, err)
	}
	if err := admin.Call(ctx, rpc.MethodACLTokenCreate, rpc.ACLTokenCreateParams{Role: "read"}, &reader); err != nil {
		t.Fatal(err)
	}
	var list rpc.ACLTokenListResult
	if err := admin.Call(ctx, rpc.MethodACLTokenList, struct{}{}, &list); err != nil || len(list.Tokens) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if b, _ := json.Marshal(list); bytes.Contains(b, []byte(worker.Secret)) {
		t.Fatal("acl.token.list shows a secret")
	}

	// An attacker on the TCP port: TLS without a token is refused -32007 for
	// a write, and nothing is applied; a wrong token ends the connection.
	raw, err := tls.Dial("tcp", fs[1].cfg.ClientAddr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := sendLine(raw, submitLine)
	if err != nil || !strings.Contains(reply, `"code":-32007`) {
		t.Fatalf("submit without a token: %q %v", reply, err)
	}
	raw.Close()
	if _, err := net.DialTimeout("tcp", fs[1].cfg.ClientAddr, time.Second); err != nil {
		t.Fatal(err)
	}
	raw, _ = tls.Dial("tcp", fs[1].cfg.ClientAddr, &tls.Config{InsecureSkipVerify: true})
	reply, _ = sendLine(raw, `{"jsonrpc":"2.0","id":1,"method":"agent.auth","params":{"token":"flowd_guess"}}`+"\n")
	if !strings.Contains(reply, `"code":-32007`) {
		t.Fatalf("a wrong token: %q", reply)
	}
	if _, err := sendLine(raw, submitLine); err == nil {
		t.Fatal("the connection of a wrong token stayed open")
	}
	raw.Close()

	// A worker token may claim but not change settings.
	wc := tokenClient(t, fs[1], certs, worker.Secret)
	if _, err := wc.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w1", WaitMS: 10}); err != nil {
		t.Fatalf("claim with a worker token: %v", err)
	}
	var s rpc.Settings
	wantCode(t, wc.Call(ctx, rpc.MethodSettingsSet, map[string]any{"max_running_runs": 1}, &s), rpc.CodePermissionDenied, "settings.set with a worker token")
	rc := tokenClient(t, leader, certs, reader.Secret)
	if err := rc.Call(ctx, rpc.MethodSettingsGet, struct{}{}, &s); err != nil {
		t.Fatalf("settings.get with a read token: %v", err)
	}

	// The state holds hashes, never secrets.
	snap, err := leader.state.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	snap.Release()
	if err != nil || bytes.Contains(buf.Bytes(), []byte(worker.Secret)) || bytes.Contains(buf.Bytes(), []byte(worker.Secret[len(tokenPrefix):])) ||
		!bytes.Contains(buf.Bytes(), []byte(hashSecret(worker.Secret))) {
		t.Fatalf("snapshot: err %v; it must hold the hash and not the secret", err)
	}

	// Tokens are replicated: with the leader gone, a follower still knows them.
	_ = leader.Shutdown()
	wc2 := tokenClient(t, fs[0], certs, worker.Secret)
	if _, err := wc2.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "w2", WaitMS: 10}); err != nil {
		t.Fatalf("claim after the leader stopped: %v", err)
	}

	// Deleting the token closes its open connections and refuses new ones.
	var ch rpc.ChangedResult
	if err := client(t, fs[0]).Call(ctx, rpc.MethodACLTokenDelete, rpc.ACLTokenDeleteParams{ID: worker.ID}, &ch); err != nil || !ch.Changed {
		t.Fatalf("delete: %+v %v", ch, err)
	}
	// The open connection is closed (the client may then fail to redial
	// with the deleted token); either way the call fails.
	testutil.EventuallyTrue(t, 5*time.Second, 0, "the deleted token's connection to be refused (it is still served)", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		_, err := wc.TaskClaim(cctx, rpc.ClaimParams{WorkerID: "w1", WaitMS: 10})
		ccancel()
		return err != nil
	})
	wc3 := tokenClient(t, fs[1], certs, worker.Secret)
	wantCode(t, wc3.Call(ctx, rpc.MethodClusterStatus, struct{}{}, nil), rpc.CodePermissionDenied, "a new connection with a deleted token")
}

// A member twice in params is refused -32602 on the socket and on the
// forwarding port (inside the forwarded call's params).
func TestDuplicateMembersRefused(t *testing.T) {
	agents, certs := startTLSAgents(t, 1)
	a := agents[0]
	dup := `{"jsonrpc":"2.0","id":1,"method":"run.get","params":{"id":"x","id":"0190a0a0-0000-7000-8000-000000000001"}}` + "\n"
	sock, err := net.Dial("unix", a.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if reply, err := sendLine(sock, dup); err != nil || !strings.Contains(reply, `"code":-32602`) || !strings.Contains(reply, `\"id\" appears twice`) {
		t.Fatalf("socket: %q %v", reply, err)
	}
	cert, key := pki.NodeFiles(certs, "n1")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := tls.Dial("tcp", a.cfg.ForwardAddr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	env := `{"jsonrpc":"2.0","id":2,"method":"agent.forward","params":{"method":"run.cancel","params":{"id":"a","id":"b"}}}` + "\n"
	if reply, err := sendLine(fwd, env); err != nil || !strings.Contains(reply, `"code":-32602`) || !strings.Contains(reply, "appears twice") {
		t.Fatalf("forward port: %q %v", reply, err)
	}
	env = `{"jsonrpc":"2.0","id":3,"method":"agent.forward","params":{"method":"run.cancel","method":"run.get","params":{"id":"a"}}}` + "\n"
	if reply, err := sendLine(fwd, env); err != nil || !strings.Contains(reply, `"code":-32602`) {
		t.Fatalf("forward port envelope: %q %v", reply, err)
	}
}
