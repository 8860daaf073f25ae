package domain

import "testing"

func TestDecidePut(t *testing.T) {
	for _, c := range []struct {
		asked, latest int
		exists, same  bool
		want          PutOutcome
		version       int
	}{
		{0, 0, false, false, PutCreate, 1},
		{0, 2, true, true, PutSame, 2},    // a retried put of the latest spec
		{0, 2, true, false, PutCreate, 3}, // a new spec
		{2, 2, true, true, PutSame, 2},
		{1, 2, true, false, PutConflict, 1},
		{3, 2, false, false, PutCreate, 3},
		{5, 2, false, false, PutGap, 5},
		{2, 0, false, false, PutGap, 2},
	} {
		got, v := DecidePut(c.asked, c.latest, c.exists, c.same)
		if got != c.want || v != c.version {
			t.Errorf("DecidePut(%d, %d, %v, %v) = %d, %d; want %d, %d", c.asked, c.latest, c.exists, c.same, got, v, c.want, c.version)
		}
	}
}

func TestParseDefinitionRef(t *testing.T) {
	lim := DefaultLimits
	if n, v, err := ParseDefinitionRef("etl", lim); err != nil || n != "etl" || v != 0 {
		t.Fatalf("etl: %s %d %v", n, v, err)
	}
	if n, v, err := ParseDefinitionRef("etl@12", lim); err != nil || n != "etl" || v != 12 {
		t.Fatalf("etl@12: %s %d %v", n, v, err)
	}
	for _, bad := range []string{"", "@1", "etl@", "etl@0", "etl@x", "etl@-1", "a b", "etl@1@2"} {
		if _, _, err := ParseDefinitionRef(bad, lim); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
