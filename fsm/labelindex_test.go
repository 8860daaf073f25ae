package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// labelPopulation fills h with n one-task runs with random labels (some
// keys and values hold '/', NUL or nothing), workflows and ids (mostly
// UUIDv7-shaped and increasing, some client-chosen), left running,
// succeeded, failed or cancelled, with retention deleting the older
// finished ones part of the way through.
func labelPopulation(h *harness, rng *rand.Rand, n int) {
	replays, replayErrs := 0, 0
	defer func() {
		if replayErrs == replays {
			h.t.Fatalf("all %d replays failed", replays)
		}
	}()
	h.ok(&SettingsSet{RetentionMS: ptr(int64(60_000))})
	for i := range n {
		h.now += int64(rng.IntN(300))
		id := fmt.Sprintf("0193%08x-0000-7000-8000-%012x", i, rng.Uint64N(1<<40))
		if rng.IntN(8) == 0 {
			id = fmt.Sprintf("job-%d", rng.IntN(1000)) // may repeat: then not created
		}
		labels := map[string]string{}
		for _, k := range labelVocab {
			if rng.IntN(3) > 0 {
				labels[k] = labelValues[rng.IntN(len(labelValues))]
			}
		}
		if len(labels) == 0 {
			labels = nil
		}
		typ := fmt.Sprintf("T%d", i)
		spec, err := domain.ParseSpec([]byte(fmt.Sprintf(`{"name":%q,"tasks":[{"key":"a","type":%q}]}`,
			[]string{"etl", "report"}[rng.IntN(2)], typ)), domain.DefaultLimits)
		if err != nil {
			h.t.Fatal(err)
		}
		if !h.ok(&Submit{ID: id, Spec: spec, Labels: labels}).(*SubmitResult).Created {
			continue
		}
		switch rng.IntN(4) {
		case 1:
			h.complete(h.claim("w", 1, typ)[0], `1`)
		case 2:
			h.fail(h.claim("w", 1, typ)[0], "x", false)
		case 3:
			h.verb(MsgCancelRun, id)
		}
		if i%97 == 96 {
			h.ok(&GC{Limit: 1000})
		}
		if i%41 == 40 { // a replay carries its parent's labels
			replays++
			if _, failed := h.apply(&Replay{ParentID: id, NewID: fmt.Sprintf("0193%08x-0000-7000-8000-ffffffffffff", i)}).(error); failed {
				replayErrs++
			}
		}
	}
}

var (
	labelVocab  = []string{"env", "team", "a/b", "x\x00y", "empty"}
	labelValues = []string{"prod", "dev", "", "c/7", "v\x00"}
)

// randomFilter draws a filter with 1-3 label terms (some never matching),
// half the time a selector of 1-3 terms of every kind (then sometimes
// without the label terms), maybe a workflow and a creation bound, and
// maybe a state.
func randomFilter(rng *rand.Rand, h *harness) (domain.RunState, RunFilter) {
	q := RunFilter{Labels: map[string]string{}}
	randomKey := func() string {
		if rng.IntN(10) == 0 {
			return "nosuch"
		}
		return labelVocab[rng.IntN(len(labelVocab))]
	}
	for range 1 + rng.IntN(3) {
		q.Labels[randomKey()] = labelValues[rng.IntN(len(labelValues))]
	}
	if rng.IntN(2) == 0 {
		ops := []domain.SelectorOp{domain.SelEquals, domain.SelNotEquals, domain.SelExists, domain.SelNotExists}
		for range 1 + rng.IntN(3) {
			t := domain.SelectorTerm{Op: ops[rng.IntN(len(ops))], Key: randomKey()}
			if t.Op == domain.SelEquals || t.Op == domain.SelNotEquals {
				t.Value = labelValues[rng.IntN(len(labelValues))]
			}
			q.Selector = append(q.Selector, t)
		}
		if rng.IntN(2) == 0 {
			q.Labels = nil
		}
	}
	if rng.IntN(4) == 0 {
		q.Workflow = []string{"etl", "report"}[rng.IntN(2)]
	}
	if rng.IntN(4) == 0 {
		q.CreatedAfter = h.now - int64(rng.IntN(60_000))
	}
	if rng.IntN(6) == 0 {
		q.CreatedBefore = h.now - int64(rng.IntN(30_000))
	}
	states := []domain.RunState{"", "", domain.RunRunning, domain.RunSucceeded, domain.RunFailed, domain.RunCancelled}
	return states[rng.IntN(len(states))], q
}

func describe(q RunFilter) string {
	return fmt.Sprintf("labels %q selector %q workflow %q created (%d, %d)", q.Labels, q.Selector.String(), q.Workflow, q.CreatedAfter, q.CreatedBefore)
}

func ids(runs []*Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// samePages walks both paths page by page from cursor and fails on the
// first difference (runs, their records, or the next cursor).
func samePages(t *testing.T, f *FSM, state domain.RunState, q RunFilter, limit int, cursor string) int {
	t.Helper()
	total := 0
	for page := 0; ; page++ {
		want, wantNext, err := f.listRuns(state, q, limit, cursor, false)
		if err != nil {
			t.Fatal(err)
		}
		got, gotNext, err := f.listRuns(state, q, limit, cursor, true)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || gotNext != wantNext {
			t.Fatalf("state %q %s limit %d cursor %q page %d:\nindex %q next %q\nscan  %q next %q",
				state, describe(q), limit, cursor, page, ids(got), gotNext, ids(want), wantNext)
		}
		total += len(got)
		if wantNext == "" {
			return total
		}
		cursor = wantNext
	}
}

func indexedHarness(t *testing.T) (*harness, *store.MemStore) {
	inner := store.NewMemStore()
	f, _ := indexedFSM(t, inner)
	waitLabels(t, f)
	return &harness{t: t, f: f, now: 1_700_000_000_000}, inner
}

// waitLabels waits until f's store has built its label index, and checks
// that a view then answers lists from it.
func waitLabels(t testing.TB, f *FSM) {
	t.Helper()
	if s, ok := f.store.(*IndexedStore); ok {
		select {
		case <-s.labelsReady():
		case <-time.After(30 * time.Second):
			t.Fatal("the label index was not built within 30 s")
		}
	}
	_ = f.View(func(r Reader) error {
		if !labelIndexReady(r) {
			t.Fatal("the label index is built but a view does not use it")
		}
		return nil
	})
}

// The label index answers run.list exactly as the scan of every run does:
// same runs, same order, same next cursors, for random selectors, page
// sizes and cursors (existing, deleted and made-up ids) over a random
// population with deletions.
func TestLabelIndexListsWhatTheScanLists(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			h, _ := indexedHarness(t)
			labelPopulation(h, rng, 600)
			all := h.f.RunIDs()
			if len(all) < 200 || len(all) > 500 {
				t.Fatalf("%d runs retained: the population should have lost some to retention", len(all))
			}
			matched, kinds := 0, map[domain.SelectorOp]int{}
			defer func(n int) { maxExistsValues = n }(maxExistsValues)
			for i := range 300 {
				// Half the lists serve a k term from the index, half
				// check it per run (a key with more values than the
				// bound: the vocabulary has 5).
				maxExistsValues = []int{16, 2}[i%2]
				state, q := randomFilter(rng, h)
				for _, t := range q.Selector {
					kinds[t.Op]++
				}
				limit := []int{1, 2, 3, 7, 50, 0, 5000}[rng.IntN(7)]
				cursor := ""
				switch rng.IntN(4) {
				case 1:
					cursor = all[rng.IntN(len(all))]
				case 2:
					cursor = fmt.Sprintf("0193%08x", rng.IntN(600)) // between ids
				case 3:
					cursor = "job-5" // may be deleted or never created
				}
				matched += samePages(t, h.f, state, q, limit, cursor)
			}
			if matched < 600 {
				t.Fatalf("only %d runs matched over all selectors: the comparison proves little", matched)
			}
			if len(kinds) != 4 {
				t.Fatalf("selector term kinds drawn: %v, want all four", kinds)
			}
		})
	}
}

// Past the scan's bound the index still answers the scan's runs in the
// scan's order (walked to the end), in no more pages for one pair (with
// several terms or a state the bound counts every seek of the
// intersection), and fills a page the scan cuts short.
func TestLabelIndexPagesPastTheScanBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	h, _ := indexedHarness(t)
	labelPopulation(h, rng, 300)
	defer func(n int) { maxListScan = n }(maxListScan)
	maxListScan = 5
	walk := func(state domain.RunState, q RunFilter, byLabels bool) (all []string, pages int) {
		for cursor := ""; ; pages++ {
			runs, next, err := h.f.listRuns(state, q, 4, cursor, byLabels)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) > 4 {
				t.Fatalf("page of %d runs, limit 4", len(runs))
			}
			all = append(all, ids(runs)...)
			if next == "" {
				return all, pages + 1
			}
			cursor = next
		}
	}
	for range 100 {
		state, q := randomFilter(rng, h)
		want, scanPages := walk(state, q, false)
		got, indexPages := walk(state, q, true)
		if !slices.Equal(got, want) {
			t.Fatalf("state %q %s walked:\nindex %q\nscan  %q", state, describe(q), got, want)
		}
		if len(q.Labels) == 1 && len(q.Selector) == 0 && state == "" && indexPages > scanPages {
			t.Fatalf("state %q %s: %d pages by the index, %d by the scan", state, describe(q), indexPages, scanPages)
		}
	}
	// A rare pair: the scan's first page stops at the bound, the index's
	// is full.
	q := RunFilter{Labels: map[string]string{"rare": "yes"}}
	for i := range 8 {
		h.now += 10
		spec, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"rare"}]}`), domain.DefaultLimits)
		h.ok(&Submit{ID: fmt.Sprintf("0194%08x-0000-7000-8000-000000000000", 2*i), Spec: spec, Labels: q.Labels})
		h.ok(&Submit{ID: fmt.Sprintf("0194%08x-0000-7000-8000-000000000000", 2*i+1), Spec: spec})
		for range 3 {
			h.ok(&Submit{ID: fmt.Sprintf("0194%08x-0000-7000-8000-%012d", 2*i+1, rng.IntN(1e9)+1), Spec: spec})
		}
	}
	scan, _, _ := h.f.listRuns("", q, 4, "", false)
	index, next, _ := h.f.listRuns("", q, 4, "", true)
	if len(scan) >= 4 || len(index) != 4 || next != index[3].ID {
		t.Fatalf("first page: scan %d runs, index %q next %q", len(scan), ids(index), next)
	}
}

// labelKeysOf lists the label index keys a view holds.
func labelKeysOf(t *testing.T, f *FSM) []string {
	t.Helper()
	var out []string
	if err := f.View(func(r Reader) error {
		return r.Scan(pfxLabel, nil, false, func(k, _ []byte) bool { out = append(out, string(k)); return true })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The label index is rebuilt from the records when the store is reopened
// and when a snapshot is restored (into an indexed store and into a plain
// one): the same keys, and the same answers. It is left out of the digest
// and of snapshots, so neither changes with it.
func TestLabelIndexAfterReopenAndRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	h, inner := indexedHarness(t)
	labelPopulation(h, rng, 600)
	if n := len(h.f.RunIDs()); n > 500 {
		t.Fatalf("%d runs retained: the population should have lost some to retention", n)
	}
	live := labelKeysOf(t, h.f)
	if len(live) < 500 {
		t.Fatalf("%d label keys: the population has too few labels", len(live))
	}
	var rebuilt []string
	r, release, _ := inner.View()
	_ = deriveIndexes(r, func(k []byte) {
		if bytes.HasPrefix(k, pfxLabel) {
			rebuilt = append(rebuilt, string(k))
		}
	})
	release()
	slices.Sort(rebuilt)
	if !slices.Equal(rebuilt, live) {
		t.Fatalf("the records derive %d label keys, the applier keeps %d", len(rebuilt), len(live))
	}

	reopened, err := NewIndexedStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := New(reopened, Options{})
	waitLabels(t, f2)

	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := ReadSnapshot(bytes.NewReader(buf.Bytes()), func(k, _ []byte) error {
		if isQueryOnly(k) {
			return fmt.Errorf("the snapshot holds label key %q", k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	idx3, _ := NewIndexedStore(store.NewMemStore())
	f3, _ := New(idx3, Options{})
	f4, _ := New(store.NewMemStore(), Options{})
	for _, f := range []*FSM{f3, f4} {
		if err := f.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		waitLabels(t, f)
	}
	want := h.digest()
	for name, f := range map[string]*FSM{"reopened": f2, "restored": f3, "restored into a plain store": f4} {
		if got := labelKeysOf(t, f); !slices.Equal(got, live) {
			t.Fatalf("%s: %d label keys, want %d", name, len(got), len(live))
		}
		if d, _, _ := f.Digest(); d != want {
			t.Fatalf("%s: digest %s, want %s", name, d, want)
		}
		for range 40 {
			state, q := randomFilter(rng, h)
			a, an, _ := h.f.ListRunsWhere(state, q, 5, "")
			b, bn, _ := f.ListRunsWhere(state, q, 5, "")
			if !reflect.DeepEqual(a, b) || an != bn {
				t.Fatalf("%s: state %q %s: %q next %q, want %q next %q", name, state, describe(q), ids(b), bn, ids(a), an)
			}
			samePages(t, f, state, q, 3, "")
		}
	}

	// The digest is the one a state without the index has.
	plain, _ := New(store.NewMemStore(), Options{})
	if err := plain.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	var drop []store.Write
	for _, k := range labelKeysOf(t, plain) {
		drop = append(drop, store.Write{Key: []byte(k)})
	}
	if err := plain.store.Commit([][]store.Write{drop}); err != nil {
		t.Fatal(err)
	}
	if n := len(labelKeysOf(t, plain)); n != 0 {
		t.Fatalf("%d label keys left", n)
	}
	if d, _, _ := plain.Digest(); d != want {
		t.Fatalf("digest without the label keys %s, with them %s", d, want)
	}
}

// While the label index is being built after a reopen, lists with labels
// scan (same answers) and the writes committed meanwhile (new runs,
// retention deleting old ones) reach the index once it is published.
func TestLabelIndexBuildsInTheBackground(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	h, inner := indexedHarness(t)
	labelPopulation(h, rng, 300)
	release := make(chan struct{})
	defer func() { labelBuildHook = nil }()
	labelBuildHook = func() { <-release }
	f, _ := indexedFSM(t, inner)
	h2 := &harness{t: t, f: f, index: h.index, now: h.now}
	labelPopulation(h2, rng, 300) // retention removes runs of the first population too
	_ = f.View(func(r Reader) error {
		if labelIndexReady(r) {
			t.Fatal("the index is published while its build waits")
		}
		return nil
	})
	for range 30 {
		state, q := randomFilter(rng, h2)
		samePages(t, f, state, q, 7, "")
	}
	close(release)
	waitLabels(t, f)
	var want []string
	r, done, _ := inner.View()
	_ = deriveIndexes(r, func(k []byte) {
		if isQueryOnly(k) {
			want = append(want, string(k))
		}
	})
	done()
	slices.Sort(want)
	if got := labelKeysOf(t, f); !slices.Equal(got, want) {
		t.Fatalf("after the build: %d label keys, the records derive %d", len(got), len(want))
	}
	for range 30 {
		state, q := randomFilter(rng, h2)
		samePages(t, f, state, q, 7, "")
	}
}
