package fsm

import (
	"strings"
	"testing"
)

func TestACLTokens(t *testing.T) {
	h := newHarness(t)
	hash := strings.Repeat("ab", 32)
	res := h.ok(&ACLTokenCreate{ID: "t1", Name: "ci", Role: "worker", Hash: hash}).(*ACLTokenResult)
	if !res.Created || res.Token.Role != "worker" || res.Token.CreateIndex != h.index {
		t.Fatalf("create: %+v", res)
	}
	// A retry (same id and hash) answers the token; another hash under the
	// id, or the hash under another id, is refused.
	if again := h.ok(&ACLTokenCreate{ID: "t1", Name: "ci", Role: "worker", Hash: hash}).(*ACLTokenResult); again.Created {
		t.Fatal("a retried create made a second token")
	}
	wantErr(t, h.apply(&ACLTokenCreate{ID: "t1", Role: "worker", Hash: strings.Repeat("cd", 32)}), ErrInvalidArgument)
	wantErr(t, h.apply(&ACLTokenCreate{ID: "t2", Role: "read", Hash: hash}), ErrInvalidArgument)
	wantErr(t, h.apply(&ACLTokenCreate{ID: "t3", Role: "root", Hash: strings.Repeat("ef", 32)}), ErrInvalidArgument)
	wantErr(t, h.apply(&ACLTokenCreate{ID: "t4", Role: "read", Hash: "not-hex"}), ErrInvalidArgument)

	if tok, err := h.f.ACLTokenByHash(hash); err != nil || tok == nil || tok.ID != "t1" {
		t.Fatalf("by hash: %+v, %v", tok, err)
	}
	if ts, _ := h.f.ACLTokens(); len(ts) != 1 {
		t.Fatalf("list: %+v", ts)
	}
	if !h.ok(&ACLTokenDelete{ID: "t1"}).(*ChangedResult).Changed || h.ok(&ACLTokenDelete{ID: "t1"}).(*ChangedResult).Changed {
		t.Fatal("delete: want changed once")
	}
	if tok, _ := h.f.ACLTokenByHash(hash); tok != nil {
		t.Fatal("a deleted token is still found by its hash")
	}
	if ok, _ := h.f.ACLTokenExists("t1"); ok {
		t.Fatal("a deleted token still exists")
	}
	checkReplay(t, h, 3, 1)
}
