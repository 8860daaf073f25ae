// Package domain holds flowd's pure rules: the run and task state machines as
// data, run-state derivation, workflow spec types and validation, and retry
// backoff. It imports only the standard library (a test enforces this), reads
// no clock and draws no randomness, so the replicated state machine can call
// it from Apply and every replica reaches the same decision.
//
// Decisions and trade-offs:
//
//   - Tables are data (Machine), validated at package init. A broken table
//     panics at init, never while applying a log entry.
//   - Two strengths of terminal: Final (nothing leaves) and Settled (only
//     retry and compensation edges leave). This lets a succeeded or failed
//     task still be reverted by a saga without pretending it is unfinished.
//   - Run state is derived from task states by one function; verbs change it
//     explicitly and derivation never leaves a final, settled or interrupted
//     state.
//   - Spec validation reports every problem at once with a stable code and a
//     JSON path; unknown fields are found by decoding objects as maps, since
//     encoding/json stops at the first unknown field.
//   - Backoff jitter is a hash of (task id, attempt): deterministic for log
//     replay, still spread across tasks.
//   - Label selectors (selector.go, run.list's selector) are parsed here, in
//     one place: the grammar (k=v, k==v, k!=v, k, !k, comma-separated) and
//     its limits (the label key and value limits, which run.submit applies
//     too, and 64 terms) are domain rules. A value cannot hold '=', '!' or
//     ',', so a term always has one reading; labels (an object) match any
//     value exactly.
package domain
