package daemon

import "errors"

var (
	// ErrSocketInUse: another live agent serves the socket path.
	ErrSocketInUse = errors.New("socket in use")
	// ErrUnexpectedResult: a command's result from the FSM is not of the
	// type its handler expects (a bug between daemon and fsm). Clients see
	// an internal error; the agent keeps serving.
	ErrUnexpectedResult = errors.New("unexpected result type from the state machine")
)
