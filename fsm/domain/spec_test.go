package domain

import "testing"

func TestValidKeyIsKeyPattern(t *testing.T) {
	cases := []string{"", "a", "A9", "9", "_a", "-a", ".a", ":a", "a_b.c:d-e", "a b", "a/b", "é", "aé", "a\x00", "a\n", "Z", "z-"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}))
	}
	for _, s := range cases {
		if got, want := ValidKey(s), keyPattern.MatchString(s); got != want {
			t.Errorf("ValidKey(%q) = %v, keyPattern says %v", s, got, want)
		}
	}
}
