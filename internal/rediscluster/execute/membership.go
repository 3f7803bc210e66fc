package execute

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// AddNode reproduces `redis-cli --cluster add-node newAddr existingAddr`: after checking
// the new node is empty (layout.AddNode), it sends it CLUSTER MEET with the existing node's
// address and waits until the new node knows every node of the cluster, every node knows
// it and it reports cluster_state:ok (a new master refuses keys until then); with asReplicaOf (a master's node ID or address) it then sends CLUSTER
// REPLICATE <master-id> and waits until the new node reports itself a replica of it.
// A new master gets no slot: Rebalance with UseEmptyMasters, or Reshard, gives it some.
//
// AddNode is idempotent. When ctx has no deadline it gives up after two minutes
// (defaultWaitTimeout).
func (a *Admin) AddNode(ctx context.Context, newAddr, existingAddr, asReplicaOf string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultWaitTimeout)
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
	plan, err := layout.AddNode(cluster, layout.NodeState{View: view, Keys: keys}, asReplicaOf)
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
		return self.Role == nodes.RoleSlave && self.MasterID == plan.Master, fmt.Sprintf("%s is %s of %q", newAddr, self.Role, self.MasterID)
	})
	if err != nil {
		return fmt.Errorf("while adding %s: %w", newAddr, err)
	}
	return nil
}

// waitKnown waits until the node at addr (with id) knows every node of cluster and every
// reachable node of cluster knows it, none of them in handshake.
func (a *Admin) waitKnown(ctx context.Context, addr, id string, cluster []nodes.Node) error {
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
			if !slices.ContainsFunc(other, func(o nodes.Node) bool { return o.ID == id && !o.HasFlag("handshake") }) {
				return false, fmt.Sprintf("%s does not know %s yet", n.Addr, addr)
			}
		}
		return true, ""
	})
}

// DelNode reproduces `redis-cli --cluster del-node clusterAddr node`, node being an ID or
// an address: it plans with layout.DelNode (a master with slots is refused), makes every
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
		if _, view, err := a.Myself(ctx, node); err == nil && slices.ContainsFunc(view, func(n nodes.Node) bool { return n.ID == topo.nodes[0].ID }) {
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
	plan, err := layout.DelNode(topo.nodes, del.ID)
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
