// Package defrpc is the client protocol of workflow definitions
// (docs/rpc.md, "Workflow definitions"): the params and results of the
// definition.* methods and typed calls over an rpc.Client. The method
// names and their routes and roles are in package rpc with the others.
package defrpc

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// PutParams of definition.put: store Workflow as version Version of
// definition Name. Name defaults to the workflow's name (if both are given
// they must agree); Version 0 stores the next version, unless the latest
// holds this very spec (then nothing changes: a retried put is safe). A
// version never changes: another spec under a stored version is refused.
type PutParams struct {
	Name     string          `json:"name,omitempty"`
	Version  int             `json:"version,omitempty"`
	Workflow json.RawMessage `json:"workflow"`
	Note     string          `json:"note,omitempty"`
}

// PutResult of definition.put; Created false: that version already held
// this spec.
type PutResult struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Created bool   `json:"created"`
	Index   uint64 `json:"index,omitempty"`
}

// WriteIndex is the raft index of the write.
func (r PutResult) WriteIndex() uint64 { return r.Index }

// GetParams of definition.get: Name is "name" or "name@version"; Version
// (0: the latest) is the other way to pin one. Versions lists every
// version (without specs) as well.
type GetParams struct {
	Name     string `json:"name"`
	Version  int    `json:"version,omitempty"`
	Versions bool   `json:"versions,omitempty"`
}

// Definition is one version of a definition.
type Definition struct {
	Name      string       `json:"name"`
	Version   int          `json:"version"`
	Tasks     int          `json:"tasks"`
	Note      string       `json:"note,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
	Spec      *domain.Spec `json:"spec,omitempty"` // definition.get only
	// Latest is the latest version of the definition (definition.get).
	Latest int `json:"latest,omitempty"`
	// Versions: every version, oldest first, without specs (with versions: true).
	Versions []Definition `json:"versions,omitempty"`
}

// Summary is one definition in definition.list.
type Summary struct {
	Name      string    `json:"name"`
	Latest    int       `json:"latest"`
	Versions  int       `json:"versions"`
	Tasks     int       `json:"tasks"`
	Note      string    `json:"note,omitempty"`
	UpdatedAt time.Time `json:"updated_at"` // when the latest version was stored
}

// ListResult of definition.list, by name.
type ListResult struct {
	Definitions []Summary `json:"definitions"`
}

// Put calls definition.put (safe to retry: see PutParams).
func Put(ctx context.Context, c *rpc.Client, p PutParams) (*PutResult, error) {
	var out PutResult
	return &out, c.CallIdempotent(ctx, rpc.MethodDefinitionPut, p, &out)
}

// Get calls definition.get.
func Get(ctx context.Context, c *rpc.Client, p GetParams) (*Definition, error) {
	var out Definition
	return &out, c.CallIdempotent(ctx, rpc.MethodDefinitionGet, p, &out)
}

// List calls definition.list.
func List(ctx context.Context, c *rpc.Client) (*ListResult, error) {
	var out ListResult
	return &out, c.CallIdempotent(ctx, rpc.MethodDefinitionList, struct{}{}, &out)
}
