package fsm

import (
	"errors"
	"slices"
	"testing"

	"github.com/flowd/flowd/fsm/store"
)

// The registry gives each number and name out once, never a skipped one,
// and every row decodes to a command of its own type.
func TestRegistryGivesEachNumberAndNameOnce(t *testing.T) {
	nums, names := map[MsgType]bool{}, map[string]bool{}
	for _, c := range commands {
		if c.Type&IgnoreUnknown != 0 || c.Type == 0 {
			t.Errorf("%s: type %d out of range 1-127", c.Name, c.Type)
		}
		if nums[c.Type] || names[c.Name] {
			t.Errorf("type %d (%s) given out twice", c.Type, c.Name)
		}
		nums[c.Type], names[c.Name] = true, true
		if slices.Contains(skippedTypes, c.Type) {
			t.Errorf("%s uses the skipped number %d", c.Name, c.Type)
		}
		if c.Since < MinVersion || c.Since > MaxVersion {
			t.Errorf("%s: since %d outside this binary's %d-%d", c.Name, c.Since, MinVersion, MaxVersion)
		}
		if c.New == nil {
			continue
		}
		cmd := c.New()
		if cmd.Type()&^IgnoreUnknown != c.Type {
			t.Errorf("%s: New returns a %s", c.Name, cmd.Type())
		}
		buf, err := Encode(cmd)
		if err != nil {
			t.Errorf("%s: encode: %v", c.Name, err)
			continue
		}
		back, err := Decode(buf)
		if err != nil || back.Type() != cmd.Type() {
			t.Errorf("%s: decode gave %v, %v", c.Name, back, err)
		}
	}
	for i, r := range Rules {
		if r.Since <= V1 || r.Since > MaxVersion || i > 0 && r.Since < Rules[i-1].Since {
			t.Errorf("rule %s: since %d (rules are newer than V1, at most %d, oldest first)", r.Name, r.Since, MaxVersion)
		}
	}
}

// A command newer than the active version is rejected on every replica
// alike, changing nothing.
func TestCommandNewerThanTheActiveVersionIsRejected(t *testing.T) {
	h := newHarness(t)
	row := lookup(MsgQueueSet)
	saved := row.Since
	row.Since = MaxVersion + 1
	defer func() { row.Since = saved }()
	res := h.apply(&QueueSet{Name: "q", Concurrency: 3})
	if !errors.Is(res.(error), ErrNeedsVersion) || !errors.Is(res.(error), ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrNeedsVersion", res)
	}
	if qs, err := h.f.Queues(); err != nil || len(qs) != 0 {
		t.Fatalf("a rejected command changed the state: queues %v, %v", qs, err)
	}
}

// The active version never goes down, and a raise to the version in force
// changes nothing.
func TestSetVersionNeverLowers(t *testing.T) {
	h := newHarness(t)
	if got := h.ok(&SetVersion{Version: V1}).(*VersionResult); got.Changed || got.To != V1 {
		t.Fatalf("set to the active version: %+v", got)
	}
	if v := h.f.ActiveVersion(); v != V1 {
		t.Fatalf("fresh state at version %d, want %d", v, V1)
	}
	wantErr(t, h.apply(&SetVersion{Version: 0}), ErrInvalidArgument)
	if err := h.f.CheckVersion(); err != nil {
		t.Fatal(err)
	}
}

// A binary that cannot apply the version an entry raises the cluster to
// stops before that entry (OnFatal), keeping the entries before it, instead
// of computing a different state than the members that can.
func TestUnsupportedVersionStopsBeforeTheEntry(t *testing.T) {
	f, err := New(store.NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fatal error
	f.OnFatal = func(err error) { fatal = err }
	noop, _ := Encode(&Noop{})
	raise, _ := Encode(&SetVersion{Version: MaxVersion + 1})
	f.ApplyBatch([]Entry{{Index: 1, Data: noop}, {Index: 2, Data: raise}, {Index: 3, Data: noop}})
	var ve *VersionError
	if !errors.As(fatal, &ve) || ve.Index != 2 || ve.Active != MaxVersion+1 {
		t.Fatalf("OnFatal got %v, want the VersionError of entry 2", fatal)
	}
	if f.AppliedIndex() != 1 || f.ActiveVersion() != V1 {
		t.Fatalf("applied %d at version %d; want 1 at %d", f.AppliedIndex(), f.ActiveVersion(), V1)
	}
}

// An agent started on state whose active version it cannot apply refuses
// (CheckVersion), naming the versions.
func TestCheckVersionRefusesNewerState(t *testing.T) {
	ms := store.NewMemStore()
	if err := ms.Commit([][]store.Write{{{Key: keyVersion, Val: u64(uint64(MaxVersion + 1))}}}); err != nil {
		t.Fatal(err)
	}
	f, err := New(ms, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ve *VersionError
	if err := f.CheckVersion(); !errors.As(err, &ve) || ve.Active != MaxVersion+1 || ve.Max != MaxVersion {
		t.Fatalf("CheckVersion: %v", err)
	}
}

// SetVersion inside a Multi is refused: a node that cannot apply it must
// see it at the top level to stop before it.
func TestSetVersionInsideMultiIsRefused(t *testing.T) {
	h := newHarness(t)
	res := h.ok(&Multi{Cmds: [][]byte{h.encode(&SetVersion{Version: MaxVersion})}}).(*MultiResult)
	wantErr(t, res.Results[0], ErrBadCommand)
}
