package execute

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// emptyNode is what preflight learnt about one empty node of the plan.
type emptyNode struct {
	self nodes.Node
	// meetIP is the IP other nodes reach it at, for CLUSTER MEET.
	meetIP string
	// epochZero is true when the node never had a config epoch, so SET-CONFIG-EPOCH works.
	epochZero bool
}

// Create builds the cluster of plan much as `redis-cli --cluster create` does: it gives
// each master its slots (CLUSTER ADDSLOTSRANGE), gives every node its own config epoch,
// introduces every node to every other (CLUSTER MEET, see meet), waits until all nodes know
// each other, has each master announce its slots (see announceSlots), waits until all nodes
// agree on the slots, makes the replicas replicate their masters (CLUSTER
// REPLICATE), and waits until every node reports cluster_state:ok with the planned slots
// and every replica reports itself attached to its master (not with plan.NoReadyWait).
//
// Create refuses, changing nothing, when any node already knows other nodes, serves slots,
// has open slots or holds keys; that error wraps ErrNodeNotEmpty. An existing cluster is
// never re-created, reset or flushed. A Create that fails half-way leaves nodes that a new
// Create refuses too.
//
// When ctx has no deadline, Create gives up after two minutes (defaultWaitTimeout).
func (a *Admin) Create(ctx context.Context, plan layout.Plan) error {
	if err := plan.Validate(); err != nil {
		return fmt.Errorf("while creating the cluster: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultWaitTimeout)
		defer cancel()
	}
	nodes, err := a.preflight(ctx, plan)
	if err != nil {
		return fmt.Errorf("while creating the cluster, nothing was changed: %w", err)
	}
	steps := []struct {
		name string
		run  func(context.Context, layout.Plan, map[string]emptyNode) error
	}{
		{"assigning slots", a.assignSlots},
		{"setting config epochs", a.setConfigEpochs},
		{"joining the nodes", a.meet},
		{"waiting for the nodes to know each other", a.waitMet},
		{"announcing each master's slots", a.announceSlots},
		{"waiting for the nodes to agree on the slots", a.waitSlots},
		{"attaching replicas", a.replicate},
		{"waiting for the cluster to be ready", a.waitReady},
	}
	if plan.NoReadyWait {
		steps = steps[:len(steps)-1]
	}
	for _, s := range steps {
		if err := s.run(ctx, plan, nodes); err != nil {
			return fmt.Errorf("while creating the cluster, %s (nodes may be partly configured): %w", s.name, err)
		}
	}
	return nil
}

// preflight checks every node of the plan is an empty, lone cluster node and collects its
// ID, bus port and IP. It only reads.
func (a *Admin) preflight(ctx context.Context, plan layout.Plan) (map[string]emptyNode, error) {
	out := map[string]emptyNode{}
	byID := map[string]string{}
	var problems []string
	for _, e := range plan.Endpoints() {
		self, view, err := a.Myself(ctx, e.Addr)
		if err != nil {
			return nil, err
		}
		info, err := a.ClusterInfo(ctx, e.Addr)
		if err != nil {
			return nil, err
		}
		keys, err := a.Client(e.Addr).DBSize(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("while running DBSIZE on %s: %w", e.Addr, err)
		}
		if other, ok := byID[self.ID]; ok {
			return nil, fmt.Errorf("%s and %s are the same node %s", other, e.Addr, self.ID)
		}
		byID[self.ID] = e.Addr
		if len(view) > 1 {
			problems = append(problems, fmt.Sprintf("%s already knows %d other nodes", e.Addr, len(view)-1))
		}
		if n := nodes.CountSlots(self.Slots); n > 0 || info["cluster_slots_assigned"] != "0" {
			problems = append(problems, fmt.Sprintf("%s already has slots assigned (%s)", e.Addr, nodes.FormatSlotRanges(self.Slots)))
		}
		if self.HasOpenSlots() {
			problems = append(problems, fmt.Sprintf("%s has importing or migrating slots", e.Addr))
		}
		if self.Role == nodes.RoleSlave {
			problems = append(problems, fmt.Sprintf("%s is a replica", e.Addr))
		}
		if keys > 0 {
			problems = append(problems, fmt.Sprintf("%s holds %d keys", e.Addr, keys))
		}
		host, _, err := net.SplitHostPort(e.Addr)
		if err != nil {
			return nil, fmt.Errorf("while reading address %s: %w", e.Addr, err)
		}
		ip, err := conn.ResolveIP(ctx, host)
		if err != nil {
			return nil, err
		}
		out[e.Addr] = emptyNode{
			self:      self,
			meetIP:    ip,
			epochZero: info["cluster_current_epoch"] == "0" && info["cluster_my_epoch"] == "0",
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("refusing to touch an existing cluster: %s: %w", strings.Join(problems, "; "), layout.ErrNodeNotEmpty)
	}
	return out, nil
}

// assignSlots gives each master its slots with one CLUSTER ADDSLOTSRANGE.
func (a *Admin) assignSlots(ctx context.Context, plan layout.Plan, _ map[string]emptyNode) error {
	for _, m := range plan.Masters {
		args := []any{"CLUSTER", "ADDSLOTSRANGE"}
		for _, r := range m.Slots {
			args = append(args, r.Start, r.End)
		}
		if err := a.Client(m.Addr).Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("while assigning slots %s to %s: %w", nodes.FormatSlotRanges(m.Slots), m.Addr, err)
		}
	}
	return nil
}

// setConfigEpochs gives every node its own config epoch, 1 for the first master, as
// redis-cli does, so the nodes need not resolve epoch collisions. A node whose epoch is
// already set (a node once reset) keeps it; Redis resolves any collision.
func (a *Admin) setConfigEpochs(ctx context.Context, plan layout.Plan, nodes map[string]emptyNode) error {
	for i, e := range plan.Endpoints() {
		if !nodes[e.Addr].epochZero {
			continue
		}
		if err := a.Client(e.Addr).Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("while setting config epoch %d on %s: %w", i+1, e.Addr, err)
		}
	}
	return nil
}

// meet introduces every pair of nodes directly: each node sends, in one pipeline, a CLUSTER
// MEET for every node after it in the plan. Every node then knows the others after one
// handshake with each, instead of learning of them from the gossip of the one node they all
// met (`redis-cli --cluster create` meets every node with the first master only): six nodes
// on loopback knew each other 0.3-0.6 s after the MEETs against 0.8-3.9 s, a wait the Form
// step spends holding one of the reconcile workers every cluster shares. A pair whose own
// handshake fails still learns of each other through the others' gossip.
func (a *Admin) meet(ctx context.Context, plan layout.Plan, nodes map[string]emptyNode) error {
	endpoints := plan.Endpoints()
	for i, from := range endpoints[:len(endpoints)-1] {
		if err := a.meetAll(ctx, from.Addr, endpoints[i+1:], nodes); err != nil {
			return err
		}
	}
	return nil
}

// meetAll sends, from the node at addr, one pipeline of CLUSTER MEET for every node of to.
func (a *Admin) meetAll(ctx context.Context, addr string, to []layout.Endpoint, nodes map[string]emptyNode) error {
	meets := make([]*goredis.Cmd, len(to))
	_, err := a.Client(addr).Pipelined(ctx, func(p goredis.Pipeliner) error {
		for j, e := range to {
			meets[j] = p.Do(ctx, meetArgs(nodes[e.Addr])...)
		}
		return nil
	})
	for j, m := range meets {
		if m != nil && m.Err() != nil {
			return fmt.Errorf("while introducing %s to %s: %w", to[j].Addr, addr, m.Err())
		}
	}
	if err != nil {
		return fmt.Errorf("while introducing %d nodes to %s: %w", len(to), addr, err)
	}
	return nil
}

// meetArgs is the CLUSTER MEET that introduces n, with its bus port when it is not the
// data port + 10000.
func meetArgs(n emptyNode) []any {
	args := []any{"CLUSTER", "MEET", n.meetIP, n.self.Port}
	if n.self.BusPort != 0 && n.self.BusPort != n.self.Port+10000 {
		args = append(args, n.self.BusPort)
	}
	return args
}

// waitMet waits until every node knows every other node, none in handshake.
func (a *Admin) waitMet(ctx context.Context, plan layout.Plan, nodes map[string]emptyNode) error {
	return a.Poll(ctx, "every node to know every other node", func(ctx context.Context) (bool, string) {
		for _, e := range plan.Endpoints() {
			view, err := a.ClusterNodes(ctx, e.Addr)
			if err != nil {
				return false, err.Error()
			}
			if reason := missingNodes(e.Addr, view, nodes); reason != "" {
				return false, reason
			}
		}
		return true, ""
	})
}

// announceSlots has each master send a CLUSTER MEET to every other node, once every node
// knows every other. A node learns a master's slots from the header of a packet the master
// sends it after the node knows the master by name, and the packet that ends a handshake
// does not count, so without this half the pairs wait for their next ping, up to
// cluster-node-timeout/2 (2.6 s on loopback against 0.2 s with it). A MEET of a node already
// known is such a packet: the receiver takes the sender's slots from it, and the sender
// drops the duplicate handshake at the answer.
func (a *Admin) announceSlots(ctx context.Context, plan layout.Plan, nodes map[string]emptyNode) error {
	endpoints := plan.Endpoints()
	for _, m := range plan.Masters {
		var to []layout.Endpoint
		for _, e := range endpoints {
			if e.Addr != m.Addr {
				to = append(to, e)
			}
		}
		if err := a.meetAll(ctx, m.Addr, to, nodes); err != nil {
			return err
		}
	}
	return nil
}

// waitSlots waits until every node sees the planned slots.
func (a *Admin) waitSlots(ctx context.Context, plan layout.Plan, nodes map[string]emptyNode) error {
	want := planSignature(plan, nodes)
	return a.Poll(ctx, "every node to see the planned slots", func(ctx context.Context) (bool, string) {
		for _, e := range plan.Endpoints() {
			view, err := a.ClusterNodes(ctx, e.Addr)
			if err != nil {
				return false, err.Error()
			}
			if got := slotSignature(view); got != want {
				return false, fmt.Sprintf("%s does not see the planned slots yet", e.Addr)
			}
		}
		return true, ""
	})
}

// missingNodes says which expected node the view of addr lacks or still handshakes with.
func missingNodes(addr string, view []nodes.Node, empty map[string]emptyNode) string {
	known := map[string]nodes.Node{}
	for _, n := range view {
		known[n.ID] = n
	}
	for other, f := range empty {
		n, ok := known[f.self.ID]
		switch {
		case !ok:
			return fmt.Sprintf("%s does not know %s yet", addr, other)
		case n.HasFlag("handshake") || n.HasFlag("noaddr"):
			return fmt.Sprintf("%s is still in handshake with %s", addr, other)
		}
	}
	if len(view) != len(empty) {
		return fmt.Sprintf("%s knows %d nodes, want %d", addr, len(view), len(empty))
	}
	return ""
}

// replicate attaches each replica to its master.
func (a *Admin) replicate(ctx context.Context, plan layout.Plan, nodes map[string]emptyNode) error {
	for _, m := range plan.Masters {
		masterID := nodes[m.Addr].self.ID
		for _, r := range m.Replicas {
			if err := a.Client(r.Addr).Do(ctx, "CLUSTER", "REPLICATE", masterID).Err(); err != nil {
				return fmt.Errorf("while making %s a replica of %s: %w", r.Addr, m.Addr, err)
			}
		}
	}
	return nil
}

// waitReady waits until every node reports cluster_state:ok, knows every node and sees the
// planned slots, and every replica reports itself a replica of its master. The other
// nodes learn of the replicas later, through gossip (within cluster-node-timeout/2 at
// worst), as they do after redis-cli.
func (a *Admin) waitReady(ctx context.Context, plan layout.Plan, empty map[string]emptyNode) error {
	want := planSignature(plan, empty)
	views := map[string][]nodes.Node{}
	return a.Poll(ctx, "the cluster to be ready", func(ctx context.Context) (bool, string) {
		for _, e := range plan.Endpoints() {
			info, err := a.ClusterInfo(ctx, e.Addr)
			if err != nil {
				return false, err.Error()
			}
			if state := info["cluster_state"]; state != "ok" {
				return false, fmt.Sprintf("%s reports cluster_state:%s", e.Addr, state)
			}
			view, err := a.ClusterNodes(ctx, e.Addr)
			if err != nil {
				return false, err.Error()
			}
			if reason := missingNodes(e.Addr, view, empty); reason != "" {
				return false, reason
			}
			if got := slotSignature(view); got != want {
				return false, fmt.Sprintf("%s does not see the planned slots", e.Addr)
			}
			views[e.Addr] = view
		}
		for _, m := range plan.Masters {
			masterID := empty[m.Addr].self.ID
			for _, r := range m.Replicas {
				replicaID := empty[r.Addr].self.ID
				if !isReplicaOf(views[r.Addr], replicaID, masterID) {
					return false, fmt.Sprintf("%s does not report itself a replica of %s yet", r.Addr, m.Addr)
				}
			}
		}
		return true, ""
	})
}

// isReplicaOf reports whether view shows node id as a replica of masterID.
func isReplicaOf(view []nodes.Node, id, masterID string) bool {
	for _, n := range view {
		if n.ID == id {
			return n.Role == nodes.RoleSlave && n.MasterID == masterID
		}
	}
	return false
}

// planSignature is the slotSignature every node shows once the plan's slots are known.
func planSignature(plan layout.Plan, empty map[string]emptyNode) string {
	var view []nodes.Node
	for _, m := range plan.Masters {
		view = append(view, nodes.Node{ID: empty[m.Addr].self.ID, Slots: m.Slots})
	}
	return slotSignature(view)
}

// slotSignature describes who serves which slots in a view, as redis-cli's config
// signature does: "id:ranges" of every node that serves slots, sorted.
func slotSignature(view []nodes.Node) string {
	var parts []string
	for _, n := range view {
		if len(n.Slots) > 0 {
			parts = append(parts, n.ID+":"+nodes.FormatSlotRanges(nodes.MergeSlots(n.Slots)))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "|")
}
