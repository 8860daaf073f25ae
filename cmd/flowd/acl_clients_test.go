package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/tui"
)

// flowd health and the TUI's client honour the global --token and
// --ca-cert on the agents' TLS client listeners, as the other commands do.
func TestCLIHealthAndTUIWithToken(t *testing.T) {
	ca, tweak := testagents.WithTLS(t, 3)
	ac := testagents.StartWith(t, 3, discardLogger, tweak)
	tc := &testCluster{agents: ac.Agents, stops: ac.Stops, eps: ac.Eps, addr: strings.Join(ac.Eps, ","), dir: ac.Dir}
	var tlsEPs []string
	for i := range ac.Agents {
		tlsEPs = append(tlsEPs, ac.ClientEndpoint(i))
	}
	r := tc.must(t, 0, "acl", "token", "create", "--role", "read", "--name", "health", "-o", "json")
	var made rpc.ACLTokenCreateResult
	if err := json.Unmarshal([]byte(r.out), &made); err != nil || made.Secret == "" {
		t.Fatalf("create: %v\n%s", err, r)
	}
	tc.sync(t)
	health := func(token string) result {
		t.Helper()
		var out, errb strings.Builder
		code := run(t.Context(), []string{"flowd", "--addr", strings.Join(tlsEPs, ","), "--token", token, "--ca-cert", ca, "health"}, nil, &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	if r = health(made.Secret); r.code != 0 || !strings.Contains(r.out, "healthy: leader") || !strings.Contains(r.out, "3/3 agents reachable") {
		t.Fatalf("flowd health over TLS with a read token:\n%s", r)
	}
	if r = health("flowd_not-a-token"); r.code == 0 || !strings.Contains(r.out, "unknown or deleted token") {
		t.Fatalf("flowd health with an unknown secret:\n%s", r)
	}

	// The TUI's client: calls and the event stream, over TLS with the token.
	tlsCfg, err := rpc.ClientTLSConfig(ca)
	if err != nil {
		t.Fatal(err)
	}
	live, err := tui.NewLive(tlsEPs, discardLogger, tui.Auth{Token: made.Secret, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := live.RunList(ctx, rpc.ListParams{}); err != nil {
		t.Fatalf("the TUI's client lists runs over TLS with the token: %v", err)
	}
	msgs := make(chan tea.Msg, 1024)
	go live.Run(ctx, func(m tea.Msg) {
		select {
		case msgs <- m:
		default:
		}
	})
	// A new stream starts from now: submit once it is live (its connMsg
	// with State connLive, sent after events.subscribe answered), or the
	// run's events may come before it.
	for live := false; !live; {
		select {
		case <-ctx.Done():
			t.Fatal("the TUI's stream did not go live over TLS with the token")
		case m := <-msgs:
			if v := reflect.ValueOf(m); fmt.Sprintf("%T", m) == "tui.connMsg" && v.FieldByName("State").Int() == 1 {
				live = true
			}
		}
	}
	id := tc.submitID(t, writeFile(t, "wf.json", `{"name":"tui-acl","tasks":[{"key":"a","type":"tui-acl"}]}`))
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("no event of run %s reached the TUI's stream over TLS with the token", id)
		case m := <-msgs:
			// The stream's batches are the TUI's own message type; one
			// naming the run proves the subscription was authenticated.
			if fmt.Sprintf("%T", m) == "tui.eventsMsg" && strings.Contains(fmt.Sprintf("%+v", m), id) {
				return
			}
		}
	}
}
