package redisadmin

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// NodeState is what a node says about itself: its CLUSTER NODES and its number of keys.
type NodeState struct {
	// View is its CLUSTER NODES, with its own line flagged myself.
	View []Node
	// Keys is its DBSIZE.
	Keys int64
}

// self returns the line flagged myself.
func (s NodeState) self() (Node, bool) {
	for _, n := range s.View {
		if n.Myself {
			return n, true
		}
	}
	return Node{}, false
}

// AddNodePlan says how a node joins a cluster.
type AddNodePlan struct {
	// ID is the joining node's ID.
	ID string
	// Meet is true when the node still has to be introduced: CLUSTER MEET <MeetHost>
	// <MeetPort> [<MeetBusPort>] is sent to it, naming the existing node.
	Meet bool
	// MeetHost and MeetPort are the existing node's address.
	MeetHost string
	MeetPort int
	// MeetBusPort is the existing node's cluster bus port, 0 when it is MeetPort+10000.
	MeetBusPort int
	// Master is the ID of the master the node must end up replicating, "" for a master.
	Master string
	// Replicate is true when CLUSTER REPLICATE <Master> must still be sent to the node.
	Replicate bool
}

// planAddNode plans `redis-cli --cluster add-node <new> <existing> [--cluster-slave
// --cluster-master-id <id>]`. cluster is the existing node's CLUSTER NODES (its own line
// flagged myself), joining what the new node says about itself. asReplicaOf names the
// master (node ID or address) the new node replicates, "" to add it as an empty master.
//
// The new node must be empty, as redis-cli requires: it knows no other node, serves no
// slot and holds no key; otherwise the error wraps ErrNodeNotEmpty. A node that already
// joined this cluster (it knows the existing node, or the existing node knows it) is not
// met again, so AddNode can be repeated; it is made a replica only while it serves no slot.
func planAddNode(cluster []Node, joining NodeState, asReplicaOf string) (AddNodePlan, error) {
	self, ok := joining.self()
	if !ok {
		return AddNodePlan{}, fmt.Errorf("while planning add-node: the new node's CLUSTER NODES has no line flagged myself")
	}
	var seed Node
	members := map[string]bool{}
	for _, n := range cluster {
		if n.Myself {
			seed = n
		}
		if !n.HasFlag("handshake") {
			members[n.ID] = true
		}
	}
	if seed.ID == "" {
		return AddNodePlan{}, fmt.Errorf("while planning add-node: the existing node's CLUSTER NODES has no line flagged myself")
	}
	if self.ID == seed.ID {
		return AddNodePlan{}, fmt.Errorf("while planning add-node: the new node and the existing node are the same node %s", self.ID)
	}
	plan := AddNodePlan{ID: self.ID}
	joined := members[self.ID]
	for _, n := range joining.View {
		if n.ID == seed.ID {
			joined = true
		}
	}
	if joined {
		for _, n := range joining.View {
			if !n.Myself && !n.HasFlag("handshake") && !members[n.ID] {
				return AddNodePlan{}, fmt.Errorf("while planning add-node: %s knows %s, which is not in the cluster: %w", self.Addr, n.ID, ErrNodeNotEmpty)
			}
		}
	} else {
		var problems []string
		if len(joining.View) > 1 {
			problems = append(problems, fmt.Sprintf("it knows %d other nodes", len(joining.View)-1))
		}
		if len(self.Slots) > 0 || self.HasOpenSlots() {
			problems = append(problems, "it has slots")
		}
		if joining.Keys > 0 {
			problems = append(problems, fmt.Sprintf("it holds %d keys", joining.Keys))
		}
		if len(problems) > 0 {
			return AddNodePlan{}, fmt.Errorf("while planning add-node: the new node %s is not empty: %s: %w",
				self.ID, strings.Join(problems, ", "), ErrNodeNotEmpty)
		}
		host, port := seed.Host, seed.Port
		if host == "" || port == 0 {
			return AddNodePlan{}, fmt.Errorf("while planning add-node: the existing node %s does not know its own address yet", seed.ID)
		}
		plan.Meet, plan.MeetHost, plan.MeetPort = true, host, port
		if seed.BusPort != 0 && seed.BusPort != port+10000 {
			plan.MeetBusPort = seed.BusPort
		}
	}
	if asReplicaOf == "" {
		return plan, nil
	}
	var master *Node
	for i, n := range cluster {
		if n.ID == asReplicaOf || n.Addr == asReplicaOf {
			master = &cluster[i]
		}
	}
	switch {
	case master == nil:
		return AddNodePlan{}, fmt.Errorf("while planning add-node: no such master %s", asReplicaOf)
	case master.ID == self.ID:
		return AddNodePlan{}, fmt.Errorf("while planning add-node: %s cannot replicate itself", asReplicaOf)
	case !master.IsMaster() || master.Failed:
		return AddNodePlan{}, fmt.Errorf("while planning add-node: %s is not a working master", asReplicaOf)
	}
	plan.Master = master.ID
	if self.MasterID != master.ID {
		if len(self.Slots) > 0 || joining.Keys > 0 && self.IsMaster() {
			return AddNodePlan{}, fmt.Errorf("while planning add-node: %s serves slots or holds keys and cannot become a replica: %w", self.Addr, ErrNodeNotEmpty)
		}
		plan.Replicate = true
	}
	return plan, nil
}

// AddNode reproduces `redis-cli --cluster add-node newAddr existingAddr`: after checking
// the new node is empty (planAddNode), it sends it CLUSTER MEET with the existing node's
// address and waits until the new node knows every node of the cluster, every node knows
// it and it reports cluster_state:ok (a new master refuses keys until then); with asReplicaOf (a master's node ID or address) it then sends CLUSTER
// REPLICATE <master-id> and waits until the new node reports itself a replica of it.
// A new master gets no slot: Rebalance with UseEmptyMasters, or Reshard, gives it some.
//
// AddNode is idempotent. When ctx has no deadline it gives up after DefaultWaitTimeout.
func (a *Admin) AddNode(ctx context.Context, newAddr, existingAddr, asReplicaOf string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitTimeout)
		defer cancel()
	}
	cluster, err := a.ClusterNodes(ctx, existingAddr)
	if err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	for i := range cluster {
		if cluster[i].Myself && cluster[i].Host == "" {
			cluster[i].Addr = existingAddr
			host, _, _ := net.SplitHostPort(existingAddr)
			cluster[i].Host = host
		}
	}
	view, err := a.ClusterNodes(ctx, newAddr)
	if err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	keys, err := a.Client(newAddr).DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("while adding %s: while running DBSIZE: %w", newAddr, err)
	}
	plan, err := planAddNode(cluster, NodeState{View: view, Keys: keys}, asReplicaOf)
	if err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	if plan.Meet {
		ip, err := conn.ResolveIP(ctx, plan.MeetHost)
		if err != nil {
			return fmt.Errorf("while adding %s: %w", newAddr, err)
		}
		args := []any{"CLUSTER", "MEET", ip, plan.MeetPort}
		if plan.MeetBusPort != 0 {
			args = append(args, plan.MeetBusPort)
		}
		if err := a.Client(newAddr).Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("while adding %s: while running CLUSTER MEET %s %d: %w", newAddr, ip, plan.MeetPort, err)
		}
		crashpoint.Reach(crashpoint.JoinAfterMeet)
	}
	if err := a.waitKnown(ctx, newAddr, plan.ID, cluster); err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	err = a.Poll(ctx, newAddr+" to report cluster_state:ok", func(ctx context.Context) (bool, string) {
		info, err := a.ClusterInfo(ctx, newAddr)
		if err != nil {
			return false, err.Error()
		}
		return info["cluster_state"] == "ok", "cluster_state:" + info["cluster_state"]
	})
	if err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	if plan.Master == "" {
		return nil
	}
	if plan.Replicate {
		if err := a.Client(newAddr).Do(ctx, "CLUSTER", "REPLICATE", plan.Master).Err(); err != nil {
			return fmt.Errorf("while adding %s: while running CLUSTER REPLICATE %s: %w", newAddr, plan.Master, err)
		}
	}
	err = a.Poll(ctx, newAddr+" to replicate "+plan.Master, func(ctx context.Context) (bool, string) {
		self, _, err := a.Myself(ctx, newAddr)
		if err != nil {
			return false, err.Error()
		}
		return self.Role == RoleSlave && self.MasterID == plan.Master, fmt.Sprintf("%s is %s of %q", newAddr, self.Role, self.MasterID)
	})
	if err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	return nil
}

// waitKnown waits until the node at addr (with id) knows every node of cluster and every
// reachable node of cluster knows it, none of them in handshake.
func (a *Admin) waitKnown(ctx context.Context, addr, id string, cluster []Node) error {
	return a.Poll(ctx, addr+" to join the cluster", func(ctx context.Context) (bool, string) {
		view, err := a.ClusterNodes(ctx, addr)
		if err != nil {
			return false, err.Error()
		}
		known := map[string]bool{}
		for _, n := range view {
			if !n.HasFlag("handshake") && !n.HasFlag("noaddr") {
				known[n.ID] = true
			}
		}
		for _, n := range cluster {
			if n.Failed || n.HasFlag("handshake") || n.HasFlag("noaddr") {
				continue
			}
			if !known[n.ID] {
				return false, fmt.Sprintf("%s does not know %s yet", addr, n.Addr)
			}
			other, err := a.ClusterNodes(ctx, n.Addr)
			if err != nil {
				return false, err.Error()
			}
			if !slices.ContainsFunc(other, func(o Node) bool { return o.ID == id && !o.HasFlag("handshake") }) {
				return false, fmt.Sprintf("%s does not know %s yet", n.Addr, addr)
			}
		}
		return true, ""
	})
}

// Repoint is a replica to attach to another master.
type Repoint struct {
	// Replica is the replica.
	Replica Node
	// Master is the ID of the master it will replicate.
	Master string
}

// DelNodePlan says how a node leaves a cluster.
type DelNodePlan struct {
	// Node is the node to remove.
	Node Node
	// Repoint lists its replicas and the master each will replicate instead (CLUSTER
	// REPLICATE, sent before CLUSTER FORGET).
	Repoint []Repoint
	// Forget lists every other node, each to be sent CLUSTER FORGET <Node.ID>.
	Forget []Node
}

// planDelNode plans `redis-cli --cluster del-node <addr> <node>`: node (an ID or an
// address) may be a replica or a master without slots; a master with slots is refused
// ("reshard data away and try again"). Its replicas are re-pointed to the working master
// (not the removed one) with the fewest replicas, masters with slots first, then in
// cluster order (redis-cli takes the first master with the fewest replicas, which may be
// the removed node itself or an empty master). Every other node is sent CLUSTER FORGET;
// then the removed node is reset (redis-cli shuts it down instead).
func planDelNode(cluster []Node, node string) (DelNodePlan, error) {
	idx := slices.IndexFunc(cluster, func(n Node) bool { return n.ID == node })
	if idx < 0 {
		idx = slices.IndexFunc(cluster, func(n Node) bool { return n.Addr == node })
	}
	if idx < 0 {
		return DelNodePlan{}, fmt.Errorf("while planning del-node: no such node %s", node)
	}
	del := cluster[idx]
	if del.IsMaster() && len(del.Slots) > 0 {
		return DelNodePlan{}, fmt.Errorf("while planning del-node: node %s serves %d slots; reshard them away first: %w",
			del.Addr, CountSlots(del.Slots), ErrNodeNotEmpty)
	}
	plan := DelNodePlan{Node: del}
	replicas := map[string]int{}
	for _, n := range cluster {
		if n.Role == RoleSlave && n.MasterID != "" {
			replicas[n.MasterID]++
		}
	}
	var candidates []Node
	for _, n := range cluster {
		if n.IsMaster() && n.ID != del.ID && !n.Failed && !n.PossiblyFailed {
			candidates = append(candidates, n)
		}
	}
	for _, n := range cluster {
		if n.ID == del.ID {
			continue
		}
		if n.Role == RoleSlave && n.MasterID == del.ID {
			if len(candidates) == 0 {
				return DelNodePlan{}, fmt.Errorf("while planning del-node: no working master to re-point replica %s to", n.Addr)
			}
			best := slices.MinFunc(candidates, func(x, y Node) int {
				return cmp.Or(
					cmp.Compare(nodes.BoolRank(len(x.Slots) == 0), nodes.BoolRank(len(y.Slots) == 0)),
					cmp.Compare(replicas[x.ID], replicas[y.ID]),
				)
			})
			replicas[best.ID]++
			plan.Repoint = append(plan.Repoint, Repoint{Replica: n, Master: best.ID})
		}
		plan.Forget = append(plan.Forget, n)
	}
	return plan, nil
}

// DelNode reproduces `redis-cli --cluster del-node clusterAddr node`, node being an ID or
// an address: it plans with planDelNode (a master with slots is refused), makes every
// replica of the node replicate another master, sends CLUSTER FORGET <id> to every other
// node, and finally CLUSTER RESET HARD to the removed node, so it forgets the cluster,
// gets a new ID and can join again later (redis-cli shuts it down instead). The removed
// node keeps running; stopping it is the caller's business.
//
// DelNode refuses, changing nothing, while another node of the cluster cannot be reached
// and is not flagged failed: it would still know the removed node and reintroduce it. It is idempotent: a node no
// reachable node knows any more is only reset, when it still knows the cluster.
func (a *Admin) DelNode(ctx context.Context, clusterAddr, node string) error {
	topo, err := a.loadTopology(ctx, []string{clusterAddr})
	if err != nil {
		return fmt.Errorf("while deleting node %s: %w", node, err)
	}
	del := topo.find(node)
	if del == nil {
		// Forgotten already; reset the node if it still thinks it is in this cluster.
		if _, _, err := net.SplitHostPort(node); err != nil {
			return nil
		}
		if _, view, err := a.Myself(ctx, node); err == nil && slices.ContainsFunc(view, func(n Node) bool { return n.ID == topo.nodes[0].ID }) {
			return a.resetIfClustered(ctx, node)
		}
		return nil
	}
	if del.Addr == topo.entry || topo.nodes[0].ID == del.ID {
		return fmt.Errorf("while deleting node %s: reach the cluster through another node than the one to delete", node)
	}
	for _, n := range topo.nodes {
		if n.ID != del.ID && !topo.reachable[n.ID] && !n.Failed {
			return fmt.Errorf("while deleting node %s, nothing was changed: %s cannot be reached and is not flagged failed", node, n.Addr)
		}
	}
	plan, err := planDelNode(topo.nodes, del.ID)
	if err != nil {
		return fmt.Errorf("while deleting node %s: %w", node, err)
	}
	masterOf := map[string]string{}
	for _, r := range plan.Repoint {
		masterOf[r.Replica.ID] = r.Master
	}
	for _, n := range plan.Forget {
		if !topo.reachable[n.ID] {
			continue // failed: it forgets nothing, and the others forget it in turn
		}
		c := a.Client(n.Addr)
		if m, ok := masterOf[n.ID]; ok {
			if err := c.Do(ctx, "CLUSTER", "REPLICATE", m).Err(); err != nil {
				return fmt.Errorf("while deleting node %s: while making %s replicate %s: %w", node, n.Addr, m, err)
			}
		}
		if err := c.Do(ctx, "CLUSTER", "FORGET", del.ID).Err(); err != nil && !strings.Contains(err.Error(), "Unknown node") {
			return fmt.Errorf("while deleting node %s: while running CLUSTER FORGET on %s: %w", node, n.Addr, err)
		}
	}
	if !topo.reachable[del.ID] {
		return nil
	}
	return a.resetIfClustered(ctx, del.Addr)
}

// resetIfClustered sends CLUSTER RESET HARD to the node at addr if it still knows other
// nodes or serves slots.
func (a *Admin) resetIfClustered(ctx context.Context, addr string) error {
	self, view, err := a.Myself(ctx, addr)
	if err != nil {
		return fmt.Errorf("while resetting %s: %w", addr, err)
	}
	if len(view) == 1 && len(self.Slots) == 0 && self.IsMaster() {
		return nil
	}
	if err := a.Client(addr).Do(ctx, "CLUSTER", "RESET", "HARD").Err(); err != nil {
		return fmt.Errorf("while running CLUSTER RESET HARD on %s: %w", addr, err)
	}
	return nil
}
