package fsm

import (
	"fmt"
)

// Node records: each agent's addresses, published by the node itself when
// it becomes leader, so followers know where to forward writes without
// assuming a port layout.

// NodeInfo publishes one node's addresses.
type NodeInfo struct {
	Stamped
	ID   string            `json:"id"`
	Meta map[string]string `json:"meta"`
}

// Type implements Command.
func (*NodeInfo) Type() MsgType { return MsgNodeInfo }

// NodeRecord is a stored NodeInfo.
type NodeRecord struct {
	ID        string            `json:"id"`
	Meta      map[string]string `json:"meta"`
	UpdatedAt int64             `json:"updated_at"`
}

var pfxNode = []byte("n/")

func nodeKey(id string) []byte { return cat(pfxNode, []byte(id)) }

func (a *applier) applyNodeInfo(c *NodeInfo) any {
	if err := validName("node id", c.ID); err != nil {
		return err
	}
	if len(c.Meta) > 16 {
		return fmt.Errorf("%w: at most 16 meta entries", ErrInvalidArgument)
	}
	a.put(nodeKey(c.ID), NodeRecord{ID: c.ID, Meta: c.Meta, UpdatedAt: a.now})
	return &ChangedResult{Changed: true}
}

// Node returns a node's published record.
func (f *FSM) Node(id string) (*NodeRecord, error) {
	var out *NodeRecord
	err := f.View(func(r Reader) error {
		v, ok, err := r.Get(nodeKey(id))
		if err != nil || !ok {
			return err
		}
		out = &NodeRecord{}
		return unmarshal(v, out)
	})
	if err == nil && out == nil {
		err = fmt.Errorf("%w: node %s", ErrNotFound, id)
	}
	return out, err
}
