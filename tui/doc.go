// Package tui is `flowd tui`: a live terminal view of a flowd cluster,
// built with bubbletea, bubbles and lipgloss (v1), talking to the agents
// only through the rpc package.
//
// Run starts it. Everything on screen is pushed by the events.subscribe
// stream (rows update in place, redraws are batched to at most ten a
// second); the only periodic read is cluster.status of every endpoint
// every two seconds, for the header's health line. When the connected
// agent dies the last data stays on screen, greyed, with a countdown, and
// the TUI moves to the next endpoint of --addr, resuming the stream where
// it stopped.
//
// Layout: app.go is the root model (routing only); common.go the shared
// Common struct and messages; client.go the narrow Client interface and
// the Live connection manager; one file per screen (runs.go,
// rundetail.go, taskdetail.go, queues.go, workers.go, cluster.go,
// events.go, schedules.go); dag.go the layered ASCII task graph; jsonview.go the folding
// JSON viewer; dialog.go, help.go, command.go, header.go the chrome.
// DESIGN.md records the decisions.
package tui
