package execute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// topology is a cluster as redis-cli loads it (clusterManagerLoadInfoFromNode): the node it
// was reached through first, then every other node in the order that node lists them. A
// reachable node is described as it describes itself, so with its own slots and its open
// (migrating or importing) slots; an unreachable one as the first node sees it.
type topology struct {
	nodes     []nodes.Node
	byID      map[string]int
	reachable map[string]bool
	// entry is the address the first node was reached at, entryView that node's view.
	entry     string
	entryView []nodes.Node
}

// loadTopology reaches the cluster through the first of addrs that answers and asks every
// node it knows for its own view.
func (a *Admin) loadTopology(ctx context.Context, addrs []string) (*topology, error) {
	if len(addrs) == 0 {
		return nil, errors.New("while loading the cluster: no address given")
	}
	var view []nodes.Node
	var entry string
	var errs []error
	for _, addr := range addrs {
		nodes, err := a.ClusterNodes(ctx, addr)
		if err == nil {
			view, entry = nodes, addr
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("while loading the cluster: %w", ctx.Err())
		}
		errs = append(errs, err)
	}
	if view == nil {
		return nil, fmt.Errorf("while loading the cluster: no node answered: %w", errors.Join(errs...))
	}
	t := &topology{byID: map[string]int{}, reachable: map[string]bool{}, entry: entry, entryView: view}
	var others []nodes.Node
	for _, n := range view {
		if n.Myself {
			n.Addr = dialAddr(n, entry)
			t.add(n, true)
			continue
		}
		if n.HasFlag("handshake") || n.HasFlag("noaddr") || n.Host == "" {
			continue
		}
		others = append(others, n)
	}
	if len(t.nodes) == 0 {
		return nil, fmt.Errorf("while loading the cluster: %s lists no line flagged myself", entry)
	}
	for _, n := range others {
		self, _, err := a.Myself(ctx, n.Addr)
		if err != nil || self.ID != n.ID {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("while loading the cluster: %w", ctx.Err())
			}
			t.add(n, false)
			continue
		}
		self.Addr, self.Host, self.Port = n.Addr, n.Host, n.Port
		t.add(self, true)
	}
	return t, nil
}

// dialAddr is the address of the node a view was read from: the one it announces, or the
// one it was reached at while it does not know its own IP.
func dialAddr(self nodes.Node, reachedAt string) string {
	if self.Host == "" {
		return reachedAt
	}
	return self.Addr
}

func (t *topology) add(n nodes.Node, reachable bool) {
	t.byID[n.ID] = len(t.nodes)
	t.nodes = append(t.nodes, n)
	t.reachable[n.ID] = reachable
}

// node returns the node with id, or nil.
func (t *topology) node(id string) *nodes.Node {
	i, ok := t.byID[id]
	if !ok {
		return nil
	}
	return &t.nodes[i]
}

// find resolves a node ID or an address ("ip:port") to a node, or nil.
func (t *topology) find(idOrAddr string) *nodes.Node {
	if n := t.node(idOrAddr); n != nil {
		return n
	}
	for i := range t.nodes {
		if t.nodes[i].Addr == idOrAddr {
			return &t.nodes[i]
		}
	}
	return nil
}

// masters returns the reachable masters, in topology order.
func (t *topology) masters() []nodes.Node {
	var out []nodes.Node
	for _, n := range t.nodes {
		if n.IsMaster() && t.reachable[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

// openSlots returns every slot some reachable master has in migrating or importing state,
// sorted.
func (t *topology) openSlots() []int {
	seen := map[int]bool{}
	for _, n := range t.masters() {
		for s := range n.Migrating {
			seen[s] = true
		}
		for s := range n.Importing {
			seen[s] = true
		}
	}
	out := make([]int, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// strayed returns the slots no node claims (reachable masters as they describe themselves,
// the others as the entry sees them) while the entry's view routes them to a reachable
// master: one that lost the slot in its own view while the cluster still routes it there
// (see strayedSlots), sorted.
func (t *topology) strayed() []int {
	var claimed [nodes.SlotCount]bool
	for _, n := range t.nodes {
		if n.IsMaster() {
			for _, s := range nodes.SlotList(n.Slots) {
				claimed[s] = true
			}
		}
	}
	var out []int
	for _, n := range t.entryView {
		if !n.IsMaster() || !t.reachable[n.ID] || n.HasFlag("handshake") {
			continue
		}
		for _, s := range nodes.SlotList(n.Slots) {
			if !claimed[s] {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// hostPort splits a node's address into the host and port MIGRATE and MEET take.
func hostPort(n nodes.Node) (string, int, error) {
	if n.Host != "" && n.Port != 0 {
		return n.Host, n.Port, nil
	}
	host, port, err := net.SplitHostPort(n.Addr)
	if err != nil {
		return "", 0, fmt.Errorf("while reading the address of node %s: %w", n.ID, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("while reading the port of node %s: %w", n.ID, err)
	}
	return host, p, nil
}
