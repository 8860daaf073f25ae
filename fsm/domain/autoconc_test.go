package domain

import "testing"

func TestNextCapAIMD(t *testing.T) {
	a := AutoConcurrency{Min: 2, Max: 10, TargetLatencyMS: 100}
	cases := []struct {
		name string
		cur  int
		o    AutoObservation
		want int
	}{
		{"no samples holds", 6, AutoObservation{Running: 6, Ready: 9}, 6},
		{"no samples clamps a cap below the floor", 0, AutoObservation{}, 2},
		{"no samples clamps a cap above the ceiling", 50, AutoObservation{}, 10},
		{"above target halves", 8, AutoObservation{Samples: 5, LatencyMS: 101, Running: 8}, 4},
		{"above target rounds down", 7, AutoObservation{Samples: 5, LatencyMS: 500}, 3},
		{"above target stops at the floor", 3, AutoObservation{Samples: 1, LatencyMS: 500}, 2},
		{"at the floor stays", 2, AutoObservation{Samples: 1, LatencyMS: 500}, 2},
		{"at target with the cap full and work waiting grows by one", 4, AutoObservation{Samples: 3, LatencyMS: 100, Running: 4, Ready: 1}, 5},
		{"under target with the cap full and nothing waiting holds", 4, AutoObservation{Samples: 3, LatencyMS: 10, Running: 4}, 4},
		{"under target with work waiting for workers holds", 4, AutoObservation{Samples: 3, LatencyMS: 10, Running: 1, Ready: 3}, 4},
		{"under target not limited by the cap holds", 4, AutoObservation{Samples: 3, LatencyMS: 10, Running: 2}, 4},
		{"under target at the ceiling stays", 10, AutoObservation{Samples: 3, LatencyMS: 10, Running: 10, Ready: 1}, 10},
	}
	for _, c := range cases {
		if got := NextCap(c.cur, a, c.o); got != c.want {
			t.Errorf("%s: NextCap(%d, %+v) = %d, want %d", c.name, c.cur, c.o, got, c.want)
		}
	}
}

func TestNextCapFloorOfOne(t *testing.T) {
	a := AutoConcurrency{Min: 1, Max: 4, TargetLatencyMS: 50}
	cur := 4
	var seen []int
	for range 3 {
		cur = NextCap(cur, a, AutoObservation{Samples: 1, LatencyMS: 51, Running: cur})
		seen = append(seen, cur)
	}
	for range 4 {
		cur = NextCap(cur, a, AutoObservation{Samples: 1, LatencyMS: 1, Running: cur, Ready: 1})
		seen = append(seen, cur)
	}
	want := []int{2, 1, 1, 2, 3, 4, 4}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("caps %v, want %v", seen, want)
		}
	}
}

func TestAutoConcurrencyValidate(t *testing.T) {
	cases := []struct {
		a  AutoConcurrency
		ok bool
	}{
		{AutoConcurrency{Min: 1, Max: 1, TargetLatencyMS: 1}, true},
		{AutoConcurrency{Min: 0, Max: 4, TargetLatencyMS: 100}, false},
		{AutoConcurrency{Min: 5, Max: 4, TargetLatencyMS: 100}, false},
		{AutoConcurrency{Min: 1, Max: MaxAutoConcurrency + 1, TargetLatencyMS: 100}, false},
		{AutoConcurrency{Min: 1, Max: 4, TargetLatencyMS: 0}, false},
		{AutoConcurrency{Min: 1, Max: 4, TargetLatencyMS: MaxTargetLatencyMS + 1}, false},
	}
	for _, c := range cases {
		if err := c.a.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", c.a, err, c.ok)
		}
	}
}
