// Package testutil holds helpers shared by tests: free ports, certificates
// (certs.go), polling until a deadline (eventually.go), the process's CPU time
// for benchmarks (cputime_unix.go), and the layout rules
// of the module's folders (layout_test.go).
package testutil
