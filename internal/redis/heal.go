package redis

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
)

// Introduction is one CLUSTER MEET: the node at From is told to meet the node at Peer.
type Introduction struct {
	From, Peer string // ip:port
}

// PlanHeal finds the introductions that re-join cluster members whose addresses changed,
// for example after every pod was recreated with a new IP. views maps each reachable
// node's address to its CLUSTER NODES. Only nodes that already belong to a cluster (they
// know other nodes or serve slots) are introduced: a new, empty node joins only through
// scaling. The first member (by address) meets every member it does not know at its
// current address, and every member that does not know the first member's current address
// meets it; gossip spreads the rest.
func PlanHeal(views map[string][]Node) []Introduction {
	members := map[string]string{} // addr -> node id
	for addr, view := range views {
		self, ok := selfOf(view)
		if ok && (len(view) > 1 || len(self.Slots) > 0) {
			members[addr] = self.ID
		}
	}
	addrs := make([]string, 0, len(members))
	for a := range members {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	if len(addrs) < 2 {
		return nil
	}
	first := addrs[0]
	var out []Introduction
	for _, addr := range addrs[1:] {
		if !knowsAt(views[first], members[addr], addr) {
			out = append(out, Introduction{From: first, Peer: addr})
		}
		if !knowsAt(views[addr], members[first], first) {
			out = append(out, Introduction{From: addr, Peer: first})
		}
	}
	return out
}

// Converged reports whether every member in views knows every other member at its current
// address.
func Converged(views map[string][]Node) bool {
	members := map[string]string{}
	for addr, view := range views {
		if self, ok := selfOf(view); ok && (len(view) > 1 || len(self.Slots) > 0) {
			members[addr] = self.ID
		}
	}
	for addr := range members {
		for peer, id := range members {
			if peer != addr && !knowsAt(views[addr], id, peer) {
				return false
			}
		}
	}
	return true
}

func selfOf(view []Node) (Node, bool) {
	for _, n := range view {
		if n.Myself {
			return n, true
		}
	}
	return Node{}, false
}

// knowsAt reports whether view has node id at addr, with a live address.
func knowsAt(view []Node, id, addr string) bool {
	for _, n := range view {
		if n.ID == id {
			return n.Addr == addr && !n.HasFlag("noaddr") && !n.HasFlag("handshake")
		}
	}
	return false
}

// Introduce sends CLUSTER MEET to the node at from, naming the node at peer.
func (a *Admin) Introduce(ctx context.Context, from, peer string) error {
	host, portText, err := net.SplitHostPort(peer)
	if err != nil {
		return fmt.Errorf("while introducing %s to %s: %w", peer, from, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("while introducing %s to %s: %w", peer, from, err)
	}
	if err := a.client(from).Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
		return fmt.Errorf("while introducing %s to %s: %w", peer, from, err)
	}
	return nil
}

// Heal reads CLUSTER NODES from every address and sends the introductions PlanHeal finds.
// It returns how many it sent; unreachable addresses are skipped.
func (a *Admin) Heal(ctx context.Context, addrs []string) (int, error) {
	views := map[string][]Node{}
	for _, addr := range addrs {
		if view, err := a.ClusterNodes(ctx, addr); err == nil {
			views[addr] = view
		}
	}
	plan := PlanHeal(views)
	for _, in := range plan {
		if err := a.Introduce(ctx, in.From, in.Peer); err != nil {
			return 0, err
		}
	}
	return len(plan), nil
}
