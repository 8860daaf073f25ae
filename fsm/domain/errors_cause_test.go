package domain

import (
	"errors"
	"fmt"
	"testing"
)

// An UnavailableError matches ErrUnavailable and, when set, its cause (a
// lower layer's sentinel), through any wrapping.
func TestUnavailableErrorMatchesItsCause(t *testing.T) {
	cause := errors.New("leadership lost")
	err := fmt.Errorf("submit: %w", &UnavailableError{Reason: "x", Cause: cause})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("%v matches ErrUnavailable %v, its cause %v", err, errors.Is(err, ErrUnavailable), errors.Is(err, cause))
	}
	if errors.Is(&UnavailableError{Reason: "x"}, cause) {
		t.Fatal("an error without a cause matches one")
	}
}
