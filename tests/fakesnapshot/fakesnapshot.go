package fakesnapshot

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// Node describes one pod's Redis node for a table test.
type Node struct {
	// Pod is the pod's name, ID its node ID, Host its Kubernetes node.
	Pod, ID, Host string
	// Master is a replica's master's node ID, "" for a master.
	Master string
	// Slots are a master's slots.
	Slots []nodes.SlotRange
}

// Cluster builds a snapshot in which every node answers and knows every other at its
// address: the healthy starting point each case then breaks.
type Cluster struct {
	// Nodes are the nodes it was built from.
	Nodes []Node
	// Snap is the snapshot, which the methods change in place.
	Snap observe.Snapshot
}

// Now is the time every fake snapshot is taken at.
var Now = time.Unix(1_800_000_000, 0)

// New is a snapshot of the nodes fakes, for a spec of masters masters with
// replicasPerMaster replicas each: every node answers, is in sync and knows every other at
// its address (Addr of its index).
func New(masters, replicasPerMaster int, fakes ...Node) *Cluster {
	c := &Cluster{Nodes: fakes}
	c.Snap = observe.Snapshot{Masters: masters, ReplicasPerMaster: replicasPerMaster, NodeTimeout: 5 * time.Second, Now: Now,
		Members: map[string]string{}}
	for i, n := range fakes {
		o := observe.Observation{Pod: n.Pod, Addr: Addr(i), Host: n.Host, Info: map[string]string{"cluster_state": "ok"},
			Replication: map[string]string{"role": "master"}}
		if n.Master != "" {
			o.Replication = map[string]string{"role": "slave", "master_link_status": "up", "master_sync_in_progress": "0", "slave_repl_offset": "1000"}
		}
		for j, m := range fakes {
			o.View = append(o.View, Line(m, Addr(j), i == j))
		}
		c.Snap.Nodes = append(c.Snap.Nodes, o)
		c.Snap.Members[n.Pod] = n.ID
	}
	return c
}

// Addr is the address of the node at index i.
func Addr(i int) string { return fmt.Sprintf("127.1.0.%d:6379", i+1) }

// Line is n's line in a CLUSTER NODES view, at addr; myself for its own view.
func Line(n Node, addr string, myself bool) nodes.Node {
	host, port, _ := strings.Cut(addr, ":")
	l := nodes.Node{ID: n.ID, Addr: addr, Host: host, PongRecv: Now.UnixMilli(), LinkState: "connected"}
	l.Port, _ = strconv.Atoi(port)
	if n.Master == "" {
		l.Role, l.Slots = nodes.RoleMaster, n.Slots
	} else {
		l.Role, l.MasterID = nodes.RoleSlave, n.Master
	}
	l.Flags = []string{l.Role}
	if myself {
		l.Myself = true
		l.Flags = append([]string{"myself"}, l.Flags...)
	}
	return l
}

// Each changes node id's line in every view (its own included).
func (c *Cluster) Each(id string, f func(n *nodes.Node)) *Cluster {
	for i := range c.Snap.Nodes {
		for j := range c.Snap.Nodes[i].View {
			if c.Snap.Nodes[i].View[j].ID == id {
				f(&c.Snap.Nodes[i].View[j])
			}
		}
	}
	return c
}

// Silence makes pod i stop answering.
func (c *Cluster) Silence(i int, err error) *Cluster {
	o := &c.Snap.Nodes[i]
	o.Err, o.View, o.Info, o.Replication = err, nil, nil, nil
	return c
}

// Fail flags node id fail in every view, last heard of ago.
func (c *Cluster) Fail(id string, ago time.Duration) *Cluster {
	return c.Each(id, func(n *nodes.Node) {
		n.Flags, n.Failed, n.PongRecv = append(n.Flags, "fail"), true, Now.Add(-ago).UnixMilli()
	})
}

// Promote makes the replica id the master of the slots of its master, in every view.
func (c *Cluster) Promote(replica, old string) *Cluster {
	var slots []nodes.SlotRange
	c.Each(old, func(n *nodes.Node) {
		if !n.Myself {
			slots, n.Slots = n.Slots, nil
		}
	})
	return c.Each(replica, func(n *nodes.Node) {
		n.Role, n.MasterID, n.Slots = nodes.RoleMaster, "", slots
		n.Flags = slices.DeleteFunc(n.Flags, func(f string) bool { return f == nodes.RoleSlave })
		n.Flags = append(n.Flags, nodes.RoleMaster)
	}).Each(old, func(n *nodes.Node) {})
}

// ErrDown is the error of a node that does not answer.
var ErrDown = errors.New("dial tcp: connection refused")

// ThreeShards is rc-0..rc-2, masters aaaaaaaa, bbbbbbbb, cccccccc on n1..n3 with a third of
// the slots each, then the given nodes.
func ThreeShards(masters, replicasPerMaster int, others ...Node) *Cluster {
	return New(masters, replicasPerMaster, append([]Node{
		{"rc-0", "aaaaaaaa", "n1", "", []nodes.SlotRange{{Start: 0, End: 5460}}},
		{"rc-1", "bbbbbbbb", "n2", "", []nodes.SlotRange{{Start: 5461, End: 10922}}},
		{"rc-2", "cccccccc", "n3", "", []nodes.SlotRange{{Start: 10923, End: 16383}}},
	}, others...)...)
}

// Six is three masters (a, b, c on hosts n1..n3) and their replicas (d, e, f), each
// replica on another host than its master.
func Six() *Cluster {
	return New(3, 1,
		Node{"rc-0", "aaaaaaaa", "n1", "", []nodes.SlotRange{{Start: 0, End: 5460}}},
		Node{"rc-1", "bbbbbbbb", "n2", "", []nodes.SlotRange{{Start: 5461, End: 10922}}},
		Node{"rc-2", "cccccccc", "n3", "", []nodes.SlotRange{{Start: 10923, End: 16383}}},
		Node{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
		Node{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
		Node{"rc-5", "ffffffff", "n1", "cccccccc", nil},
	)
}

// Eight is four shards (a, b, c, g) with a replica each; g and h on rc-6 and rc-7.
func Eight() *Cluster {
	return New(3, 1,
		Node{Pod: "rc-0", ID: "aaaaaaaa", Host: "n1", Slots: []nodes.SlotRange{{Start: 0, End: 4095}}},
		Node{Pod: "rc-1", ID: "bbbbbbbb", Host: "n2", Slots: []nodes.SlotRange{{Start: 4096, End: 8191}}},
		Node{Pod: "rc-2", ID: "cccccccc", Host: "n3", Slots: []nodes.SlotRange{{Start: 8192, End: 12287}}},
		Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
		Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "bbbbbbbb"},
		Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "cccccccc"},
		Node{Pod: "rc-6", ID: "gggggggg", Host: "n1", Slots: []nodes.SlotRange{{Start: 12288, End: 16383}}},
		Node{Pod: "rc-7", ID: "hhhhhhhh", Host: "n2", Master: "gggggggg"},
	).Current()
}

// LostShard is Six() with master aaaaaaaa and its replica dddddddd both back empty and held
// by their start guards (silent), aaaaaaaa flagged fail for ago.
func LostShard(ago time.Duration) *Cluster {
	return Six().Silence(0, ErrDown).Silence(3, ErrDown).Fail("aaaaaaaa", ago).Fail("dddddddd", ago)
}

// Forgotten is LostShard after every answering member forgot aaaaaaaa and dddddddd: slots
// 0-5460 are routed nowhere.
func Forgotten() *Cluster {
	c := LostShard(time.Minute)
	for i := range c.Snap.Nodes {
		o := &c.Snap.Nodes[i]
		o.View = slices.DeleteFunc(o.View, func(n nodes.Node) bool { return n.ID == "aaaaaaaa" || n.ID == "dddddddd" })
	}
	return c
}

// Current makes every pod of c Running, on revision "r1", started an hour ago (settled).
func (c *Cluster) Current() *Cluster {
	for i := range c.Snap.Nodes {
		o := &c.Snap.Nodes[i]
		o.Running, o.Revision, o.Started, o.PodStarted = true, "r1", Now.Add(-time.Hour), Now.Add(-time.Hour)
	}
	return c
}

// Fresh appends pod as a new, empty, running node on host.
func (c *Cluster) Fresh(pod, id, host string) *Cluster {
	i := len(c.Snap.Nodes)
	c.Snap.Nodes = append(c.Snap.Nodes, observe.Observation{Pod: pod, Addr: Addr(i), Host: host, Running: true, Revision: "r1",
		Info: map[string]string{"cluster_state": "fail"}, Replication: map[string]string{"role": "master"},
		View: []nodes.Node{Line(Node{ID: id}, Addr(i), true)}})
	return c
}

// Leaving marks the pods from ordinal n on as leaving (spec.replicas = n).
func (c *Cluster) Leaving(n int) *Cluster {
	for i := n; i < len(c.Snap.Nodes); i++ {
		c.Snap.Nodes[i].Leaving = true
	}
	return c
}

// WithNewMaster is c with one more master, gggggggg on n1, without slots, that every node
// knows (a scale out's new master once it joined).
func (c *Cluster) WithNewMaster() *Cluster {
	fakes := append(append([]Node{}, c.Nodes...), Node{fmt.Sprintf("rc-%d", len(c.Nodes)), "gggggggg", "n1", "", nil})
	return New(c.Snap.Masters, c.Snap.ReplicasPerMaster, fakes...).Current()
}

// Announcing is c with node index i's own line announcing hostname.
func (c *Cluster) Announcing(i int, hostname string) *Cluster {
	for j := range c.Snap.Nodes[i].View {
		if c.Snap.Nodes[i].View[j].Myself {
			c.Snap.Nodes[i].View[j].Hostname = hostname
		}
	}
	return c
}

// Used sets the used memory of each of c's nodes to the share of 1000 bytes of maxmemory
// given by percents, in ordinal order (masters first in Six()).
func (c *Cluster) Used(percents ...int64) *Cluster {
	for i, p := range percents {
		r := c.Snap.Nodes[i].Replication
		r["maxmemory"], r["used_memory"], r["maxmemory_policy"] = "1000", strconv.FormatInt(p*10, 10), "noeviction"
	}
	return c
}

// Stale marks the nodes at indexes i as not yet set to plan.Desired.Coverage.
func (c *Cluster) Stale(i ...int) *Cluster {
	for _, n := range i {
		c.Snap.Nodes[n].StaleCoverage = true
	}
	return c
}

// Memory gives every answering node of c the INFO memory fields of maxmemory maxMemory and
// policy, with 1 MiB used.
func (c *Cluster) Memory(maxMemory int64, policy string) *Cluster {
	for i := range c.Snap.Nodes {
		if r := c.Snap.Nodes[i].Replication; r != nil {
			r["maxmemory"], r["maxmemory_policy"], r["used_memory"] = strconv.FormatInt(maxMemory, 10), policy, "1048576"
		}
	}
	return c
}

// Flag makes view (the observation of pod index viewer) flag node id with flag ("fail?"
// or "fail").
func (c *Cluster) Flag(viewer int, id, flag string) *Cluster {
	for j := range c.Snap.Nodes[viewer].View {
		if n := &c.Snap.Nodes[viewer].View[j]; n.ID == id {
			n.Flags = append(n.Flags, flag)
			n.PossiblyFailed, n.Failed = flag == "fail?", flag == "fail"
		}
	}
	return c
}
