package layout

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// ErrNodeNotEmpty is wrapped by the error of Admin.Create (and of AddNode and DelNode) when
// a node already belongs to a cluster, serves slots or holds keys. Admin.Create then
// changed nothing.
var ErrNodeNotEmpty = errors.New("node is not empty")

// NodeState is what a node says about itself: its CLUSTER NODES and its number of keys.
type NodeState struct {
	// View is its CLUSTER NODES, with its own line flagged myself.
	View []nodes.Node
	// Keys is its DBSIZE.
	Keys int64
}

// self returns the line flagged myself.
func (s NodeState) self() (nodes.Node, bool) {
	for _, n := range s.View {
		if n.Myself {
			return n, true
		}
	}
	return nodes.Node{}, false
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

// AddNode plans `redis-cli --cluster add-node <new> <existing> [--cluster-slave
// --cluster-master-id <id>]`. cluster is the existing node's CLUSTER NODES (its own line
// flagged myself), joining what the new node says about itself. asReplicaOf names the
// master (node ID or address) the new node replicates, "" to add it as an empty master.
//
// The new node must be empty, as redis-cli requires: it knows no other node, serves no
// slot and holds no key; otherwise the error wraps ErrNodeNotEmpty. A node that already
// joined this cluster (it knows the existing node, or the existing node knows it) is not
// met again, so Admin.AddNode can be repeated; it is made a replica only while it serves
// no slot.
func AddNode(cluster []nodes.Node, joining NodeState, asReplicaOf string) (AddNodePlan, error) {
	self, ok := joining.self()
	if !ok {
		return AddNodePlan{}, fmt.Errorf("while planning add-node: the new node's CLUSTER NODES has no line flagged myself")
	}
	var seed nodes.Node
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
	var master *nodes.Node
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

// Repoint is a replica to attach to another master.
type Repoint struct {
	// Replica is the replica.
	Replica nodes.Node
	// Master is the ID of the master it will replicate.
	Master string
}

// DelNodePlan says how a node leaves a cluster.
type DelNodePlan struct {
	// Node is the node to remove.
	Node nodes.Node
	// Repoint lists its replicas and the master each will replicate instead (CLUSTER
	// REPLICATE, sent before CLUSTER FORGET).
	Repoint []Repoint
	// Forget lists every other node, each to be sent CLUSTER FORGET <Node.ID>.
	Forget []nodes.Node
}

// DelNode plans `redis-cli --cluster del-node <addr> <node>`: node (an ID or an
// address) may be a replica or a master without slots; a master with slots is refused
// ("reshard data away and try again"). Its replicas are re-pointed to the working master
// (not the removed one) with the fewest replicas, masters with slots first, then in
// cluster order (redis-cli takes the first master with the fewest replicas, which may be
// the removed node itself or an empty master). Every other node is sent CLUSTER FORGET;
// then the removed node is reset (redis-cli shuts it down instead).
func DelNode(cluster []nodes.Node, node string) (DelNodePlan, error) {
	idx := slices.IndexFunc(cluster, func(n nodes.Node) bool { return n.ID == node })
	if idx < 0 {
		idx = slices.IndexFunc(cluster, func(n nodes.Node) bool { return n.Addr == node })
	}
	if idx < 0 {
		return DelNodePlan{}, fmt.Errorf("while planning del-node: no such node %s", node)
	}
	del := cluster[idx]
	if del.IsMaster() && len(del.Slots) > 0 {
		return DelNodePlan{}, fmt.Errorf("while planning del-node: node %s serves %d slots; reshard them away first: %w",
			del.Addr, nodes.CountSlots(del.Slots), ErrNodeNotEmpty)
	}
	plan := DelNodePlan{Node: del}
	replicas := map[string]int{}
	for _, n := range cluster {
		if n.Role == nodes.RoleSlave && n.MasterID != "" {
			replicas[n.MasterID]++
		}
	}
	var candidates []nodes.Node
	for _, n := range cluster {
		if n.IsMaster() && n.ID != del.ID && !n.Failed && !n.PossiblyFailed {
			candidates = append(candidates, n)
		}
	}
	for _, n := range cluster {
		if n.ID == del.ID {
			continue
		}
		if n.Role == nodes.RoleSlave && n.MasterID == del.ID {
			if len(candidates) == 0 {
				return DelNodePlan{}, fmt.Errorf("while planning del-node: no working master to re-point replica %s to", n.Addr)
			}
			best := slices.MinFunc(candidates, func(x, y nodes.Node) int {
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
