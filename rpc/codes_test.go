package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

func TestToErrorTable(t *testing.T) {
	cases := []struct {
		err  error
		code int
	}{
		{fmt.Errorf("run x: %w", domain.ErrNotFound), CodeNotFound},
		{fmt.Errorf("edge: %w", domain.ErrIllegalTransition), CodeIllegalTransition},
		{&domain.SpecError{Problems: []domain.Problem{{Code: "cycle", Path: "tasks[0].deps", Message: "a -> a"}}}, CodeInvalidSpec},
		{fmt.Errorf("wrapped: %w", &domain.UnavailableError{Reason: "no leader"}), CodeUnavailable},
		{domain.ErrUnavailable, CodeUnavailable},
		{fmt.Errorf("cap: %w", domain.ErrTooManyRuns), CodeTooManyRuns},
		{fmt.Errorf("spec: %w", domain.ErrTooLarge), CodeTooLarge},
		{fmt.Errorf("limit: %w", domain.ErrInvalidArgument), CodeInvalidParams},
		{context.DeadlineExceeded, CodeUnavailable},
		{fmt.Errorf("wait: %w", context.Canceled), CodeUnavailable},
		{errors.New("disk on fire"), CodeInternal},
		{fmt.Errorf("forwarded: %w", &Error{Code: CodeNotFound, Message: "run y not found"}), CodeNotFound},
	}
	for _, c := range cases {
		e := ToError(c.err)
		if e.Code != c.code {
			t.Errorf("ToError(%v).Code = %d (%s), want %d", c.err, e.Code, CodeName(e.Code), c.code)
		}
		if e.Message == "" {
			t.Errorf("ToError(%v) has no message", c.err)
		}
	}
	if ToError(nil) != nil {
		t.Error("ToError(nil) != nil")
	}
	if e := ToError(errors.New("disk on fire")); e.Message != "disk on fire" {
		t.Errorf("internal message = %q", e.Message)
	}
}

func TestErrorDataAndRoundTrip(t *testing.T) {
	// -32003: problems in data, errors.As on the client side.
	se := &domain.SpecError{Problems: []domain.Problem{{Code: "cycle", Path: "tasks[1].deps", Message: "a -> b -> a"}}}
	e := ToError(fmt.Errorf("submit: %w", se))
	var d struct {
		Problems []domain.Problem `json:"problems"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || len(d.Problems) != 1 || d.Problems[0].Code != "cycle" {
		t.Fatalf("spec data = %s (%v)", e.Data, err)
	}
	back := FromWire(e.Code, e.Message, e.Data)
	var got *domain.SpecError
	if !errors.As(back, &got) || len(got.Problems) != 1 || got.Problems[0].Path != "tasks[1].deps" {
		t.Fatalf("errors.As SpecError: %v %+v", back, got)
	}
	if !errors.Is(back, domain.ErrInvalidSpec) {
		t.Error("errors.Is(ErrInvalidSpec) failed")
	}

	// A bare ErrInvalidSpec still lists one problem.
	e = ToError(fmt.Errorf("%w: no tasks", domain.ErrInvalidSpec))
	if !strings.Contains(string(e.Data), `"problems":[{`) {
		t.Errorf("bare invalid spec data = %s", e.Data)
	}

	// -32004: retry_after_ms, default 500.
	e = ToError(&domain.UnavailableError{Reason: "no leader", RetryAfter: 1200 * time.Millisecond})
	if string(e.Data) != `{"retry_after_ms":1200}` {
		t.Errorf("unavailable data = %s", e.Data)
	}
	if e = ToError(domain.ErrUnavailable); string(e.Data) != `{"retry_after_ms":500}` {
		t.Errorf("default unavailable data = %s", e.Data)
	}
	back = FromWire(CodeUnavailable, "no leader", json.RawMessage(`{"retry_after_ms":1200}`))
	var ue *domain.UnavailableError
	if !errors.As(back, &ue) || ue.RetryAfter != 1200*time.Millisecond || !errors.Is(back, domain.ErrUnavailable) {
		t.Errorf("errors.As UnavailableError: %v %+v", back, ue)
	}

	// Every table code unwraps to its first sentinel; others to nothing.
	for _, r := range table {
		err := FromWire(r.code, "m", nil)
		if len(r.sentinels) > 0 && !errors.Is(err, r.sentinels[0]) {
			t.Errorf("FromWire(%d) is not %v", r.code, r.sentinels[0])
		}
		if CodeName(r.code) != r.name {
			t.Errorf("CodeName(%d) = %q", r.code, CodeName(r.code))
		}
	}
	if errors.Is(FromWire(CodeNotFound, "m", nil), domain.ErrTooLarge) {
		t.Error("not_found is too_large")
	}
	var se2 *domain.SpecError
	if errors.As(FromWire(CodeNotFound, "m", nil), &se2) {
		t.Error("not_found As SpecError")
	}
	if CodeName(-1) != "error_-1" {
		t.Errorf("CodeName(-1) = %q", CodeName(-1))
	}
	if msg := FromWire(CodeNotFound, "run r not found", nil).Error(); msg != "run r not found (not_found -32001)" {
		t.Errorf("Error() = %q", msg)
	}
}

func TestParseEndpoint(t *testing.T) {
	cases := []struct{ in, network, addr string }{
		{"unix:///run/flowd/n1.sock", "unix", "/run/flowd/n1.sock"},
		{"/run/flowd/n1.sock", "unix", "/run/flowd/n1.sock"},
		{"n1.sock", "unix", "n1.sock"},
		{"tcp://127.0.0.1:7100", "tcp", "127.0.0.1:7100"},
	}
	for _, c := range cases {
		n, a, err := ParseEndpoint(c.in)
		if err != nil || n != c.network || a != c.addr {
			t.Errorf("ParseEndpoint(%q) = %q %q %v", c.in, n, a, err)
		}
	}
	for _, bad := range []string{"", "unix://", "tcp://nohost", "http://x:1"} {
		if _, _, err := ParseEndpoint(bad); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", bad)
		}
	}
}

func TestExpectedReplies(t *testing.T) {
	cases := []struct {
		line string
		n    int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"x"}`, 1},
		{`{"jsonrpc":"2.0","method":"x"}`, 0},
		{`{"jsonrpc":"2.0","id":null,"method":"x","params":{}}`, 0},
		{`{"jsonrpc":"1.0","method":"x"}`, 1},
		{`{"jsonrpc":"2.0","method":"x","params":3}`, 1},
		{`{"jsonrpc":"2.0","method":"x","extra":1}`, 1},
		{`{"jsonrpc":"2.0","result":1}`, 1},
		{`{"jsonrpc":"2.0","method":""}`, 1},
		{`"hello"`, 1},
		{`null`, 1},
		{`[]`, 1},
		{`[1,2]`, 2},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"},{"jsonrpc":"2.0","method":"y"},{"jsonrpc":"2.0","id":"a","method":"z"}]`, 2},
	}
	for _, c := range cases {
		n, err := expectedReplies([]byte(c.line))
		if err != nil || n != c.n {
			t.Errorf("expectedReplies(%s) = %d, %v; want %d", c.line, n, err, c.n)
		}
	}
	if _, err := expectedReplies([]byte(`{"jsonrpc":`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}
