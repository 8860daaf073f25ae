// Package rpc is flowd's JSON-RPC 2.0 transport: newline-delimited JSON over
// stream sockets (Unix, optionally TCP), the one table that maps errors to
// protocol codes, a server for a method table and a client with endpoint
// failover. The method names and the param/result types live beside it; the
// client contract is kept outside this repository, and docs/rpc.md, the full
// reference, holds all of it.
//
// # Why jrpc2 is wrapped
//
// The server side uses github.com/creachadair/jrpc2 for request parsing,
// validation, batches, dispatch and server push. Three of its behaviours
// break the contract, and each is fixed here rather than patched upstream:
//
//  1. Half-close. When its channel's Recv reports io.EOF, jrpc2 stops the
//     server and cancels every call in flight, so a one-shot
//     `echo '{...}' | socat - UNIX-CONNECT:PATH` (which half-closes after
//     writing) never gets its answer. serverChannel (channel.go) counts, for
//     every line it hands to jrpc2, the replies jrpc2 will owe for it
//     (mirroring jrpc2's own rules: every message with an id, every invalid
//     message, one for an empty batch, none for a well-formed notification)
//     and counts the replies it sends. At end of input Recv blocks until
//     sent >= owed (or the channel is closed or a write failed) and only
//     then reports io.EOF. Trade-off: after the peer's EOF the calls already
//     received run to completion, bounded by their own timeouts, even if the
//     peer has gone entirely (we cannot tell a half-close from a close
//     without writing). A handler that holds a long poll on the peer's
//     behalf watches InputClosed and gives up: the daemon's task.claim does,
//     so it never leases tasks to a worker that went away (a one-shot
//     claim therefore does not wait). Notifications pushed
//     after the last reply are not delivered: half-close means "answer what I
//     asked, then goodbye". (socat itself gives up 0.5 s after its input
//     ends unless run with -t SECONDS, e.g. for run.wait.)
//  2. No line cap. jrpc2's channel.Line buffers a line of any length.
//     serverChannel reads through a capped lineReader (Options.MaxLine,
//     default 4 MiB): an over-long line is read to its newline without being
//     kept and answered with CodeTooLarge (-32006), id null, written directly
//     on the connection, which stays usable for the next line. Lines that are
//     not JSON are answered the same way with CodeParseError (-32700) and a
//     hint about compact JSON; blank lines are skipped.
//  3. Plain errors become -32098. Server.wrap returns only *jrpc2.Error
//     (which jrpc2 sends as is, data included): every handler error goes
//     through ToError and the table in codes.go; panics are recovered into
//     CodeInternal (-32603) and logged with their stack; results are
//     marshalled (and checked against MaxLine) by the wrapper, so a marshal
//     failure is -32603 too.
//
// # Framing and ordering
//
// One compact JSON value per line, '\n'-terminated, both ways. A
// pretty-printed request spans lines and each of its lines is invalid JSON
// (-32700): that is the contract (use `jq -c`).
//
// Requests of one connection run concurrently (Options.MaxConcurrent per
// connection), so responses to pipelined requests may come back in any
// order: clients match them by id. A batch is answered with one array once
// all of its calls have finished. Writes on a connection are serialized: a
// notification pushed by a handler (Notify) before it returns is written
// before that handler's response; notifications pushed from one goroutine
// arrive in the order they were pushed; there is no order between a
// notification and the responses of other requests. The client (Conn)
// delivers notifications to its OnNotify callback one at a time, in arrival
// order, on a goroutine of its own.
//
// # Client
//
// Conn is a small client written here rather than jrpc2.Client, because
// jrpc2's client delivers each received line on its own goroutine (so
// notification order is not preserved), reports a lost connection as a
// context cancellation, and has no line cap. Conn keeps one reader, one
// writer and one notification goroutine; a lost connection fails every
// pending call with a *ConnError wrapping domain.ErrUnavailable. Client adds
// failover over several endpoints with exponential backoff and full jitter,
// and leader routing: leader-bound methods (methodTable in methodtable.go, the
// one table) go straight to the leader's endpoint (route.go); see its doc
// for the retry policy.
//
// A Client dials the current endpoint and, when it fails or is slow, all the
// others at once (reach_dial.go). With ClientOptions.FailFast (the CLI) it
// also gives up early with a *ReachError when the cluster cannot serve a
// call: ErrNoAgent (nothing listens at any endpoint), ErrTLS (a handshake
// failed; *TLSError names the problem) or ErrNoQuorum (a Survey of every
// endpoint's cluster.status finds no leader and no reachable majority).
// Decisions: the survey is client-side because only the client knows which
// endpoints it cannot reach; it runs only on the slow or failing path, so a
// healthy call costs nothing more; and an in-flight write is abandoned
// rather than cancelled on the agent, which is safe because every write is
// idempotent by its id, nonce, request id or fencing token.
//
// # Methods
//
// Decision: every protocol fact about a method is one row of methodTable
// (methodtable.go): its name (a Method* constant), route class (local,
// read, leader), the roles besides admin that may call it, and the flags an
// agent serves it by (consistent read, node-addressed, health-exempt,
// unfenced). The lookups (LeaderBound, MethodRoles, AdminOnly, LookupMethod,
// the route classes) are computed from it, never registered by init
// functions, so a method cannot have a route but no role, or a role but no
// route; TestMethodTable checks the table against the package's Method*
// constants, and the daemon checks its handler map against the table. The
// flags live here, not in the daemon, because a client observes them
// (where its call runs, which calls an unhealthy agent answers, which reads
// see its own writes).
//
// # Errors
//
// ToError (server) and FromWire (client) are the two directions of the one
// table in codes.go. A client can test errors.Is(err, domain.ErrNotFound)
// and errors.As into *domain.SpecError or *domain.UnavailableError; the
// wire form is *Error.
package rpc
