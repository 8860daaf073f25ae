package domain

import "testing"

func TestRateLimitNeverExceedsRateInAnyWindow(t *testing.T) {
	b, err := NewRateLimit(20_000, 0) // 20/s, burst 1
	if err != nil {
		t.Fatal(err)
	}
	var grants []int64
	for now := int64(1_000_000); now < 1_000_000+5_000; now += 7 { // a claim every 7 ms
		if n := b.Available(now); n > 0 {
			b.Take(now, 1)
			grants = append(grants, now)
		}
	}
	for i := range grants {
		in := 0
		for j := i; j < len(grants) && grants[j] < grants[i]+1000; j++ {
			in++
		}
		if in > 20 {
			t.Fatalf("%d grants in the second from %d", in, grants[i])
		}
	}
	if len(grants) < 80 || len(grants) > 101 { // burst 1 banks no lateness: a grant 6 ms late delays the next
		t.Fatalf("%d grants in 5 s at 20/s", len(grants))
	}
}

func TestRateLimitBurstAndRefill(t *testing.T) {
	b, _ := NewRateLimit(2_000, 5) // 2/s, burst 5
	if got := b.Available(0); got != 5 {
		t.Fatalf("full bucket holds %d, want 5", got)
	}
	b.Take(0, 5)
	if got := b.Available(0); got != 0 {
		t.Fatalf("after taking 5: %d", got)
	}
	if at := b.NextAt(0); at != 500 {
		t.Fatalf("next token at %d, want 500", at)
	}
	if got := b.Available(499); got != 0 {
		t.Fatalf("at 499 ms: %d", got)
	}
	if got := b.Available(500); got != 1 {
		t.Fatalf("at 500 ms: %d", got)
	}
	if got := b.Available(60_000); got != 5 {
		t.Fatalf("refill past burst: %d", got)
	}
	if r, _ := NewRateLimit(0, 0); r != nil {
		t.Fatal("rate 0 is no limit")
	}
	if _, err := NewRateLimit(-1, 1); err == nil {
		t.Fatal("negative rate accepted")
	}
	if _, err := NewRateLimit(1000, -1); err == nil {
		t.Fatal("negative burst accepted")
	}
	var none *RateLimit
	if none.Available(0) == 0 {
		t.Fatal("no limit must not throttle")
	}
}
