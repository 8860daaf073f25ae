// Package expr compiles and evaluates the expressions of workflow tasks —
// when conditions (domain.TaskSpec.When), for_each lists and the input
// expressions of child-run tasks (domain.InputExpr) — over a run's input,
// its labels and the states and results of a task's dependencies, decided
// inside the replicated state machine.
//
// The language is CEL (github.com/google/cel-go), chosen over expr-lang:
//
//   - it is type-checked when compiled, so a condition that names an
//     undeclared variable or compares a string with a number is refused
//     at submit (a -32003 with its path and the checker's message), not
//     found when the run reaches the task;
//   - it has a cost model: evaluation counts its steps and stops at a limit
//     (CostLimit), so a condition over a large input cannot stall Apply on
//     every replica; the parser bounds the source's size and nesting;
//   - it has no clock, no randomness and no I/O in its standard
//     environment (nothing like expr-lang's now() to disable), and it is
//     what Kubernetes evaluates inside its API server for the same job
//     (validation rules, admission policies).
//
// Determinism: every replica must reach the same decision. JSON objects
// are handed to CEL as maps that iterate their keys in sorted order (a Go
// map's order would make map() and filter() over an object differ between
// replicas); JSON numbers without a fraction or exponent that fit an
// int64 are CEL ints, the others doubles; the cost is counted, not timed.
// The package is outside fsm/domain, which imports the standard library
// only.
package expr
