package redisadmin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// fakeNode describes one pod's Redis node for a table test.
type fakeNode struct {
	pod, id, host string
	master        string // "" for a master
	slots         []SlotRange
}

// cluster builds a snapshot in which every node answers and knows every other at its
// address: the healthy starting point each case then breaks.
type cluster struct {
	nodes []fakeNode
	snap  observe.Snapshot
}

var now = time.Unix(1_800_000_000, 0)

func newFake(masters, replicasPerMaster int, nodes ...fakeNode) *cluster {
	c := &cluster{nodes: nodes}
	c.snap = observe.Snapshot{Masters: masters, ReplicasPerMaster: replicasPerMaster, NodeTimeout: 5 * time.Second, Now: now,
		Members: map[string]string{}}
	for i, n := range nodes {
		o := observe.Observation{Pod: n.pod, Addr: addrOf(i), Host: n.host, Info: map[string]string{"cluster_state": "ok"},
			Replication: map[string]string{"role": "master"}}
		if n.master != "" {
			o.Replication = map[string]string{"role": "slave", "master_link_status": "up", "master_sync_in_progress": "0", "slave_repl_offset": "1000"}
		}
		for j, m := range nodes {
			o.View = append(o.View, line(m, addrOf(j), i == j))
		}
		c.snap.Nodes = append(c.snap.Nodes, o)
		c.snap.Members[n.pod] = n.id
	}
	return c
}

func addrOf(i int) string { return fmt.Sprintf("127.1.0.%d:6379", i+1) }

func line(n fakeNode, addr string, myself bool) Node {
	host, port, _ := strings.Cut(addr, ":")
	l := Node{ID: n.id, Addr: addr, Host: host, PongRecv: now.UnixMilli(), LinkState: "connected"}
	l.Port, _ = strconv.Atoi(port)
	if n.master == "" {
		l.Role, l.Slots = RoleMaster, n.slots
	} else {
		l.Role, l.MasterID = RoleSlave, n.master
	}
	l.Flags = []string{l.Role}
	if myself {
		l.Myself = true
		l.Flags = append([]string{"myself"}, l.Flags...)
	}
	return l
}

// each changes node id's line in every view (its own included).
func (c *cluster) each(id string, f func(n *Node)) *cluster {
	for i := range c.snap.Nodes {
		for j := range c.snap.Nodes[i].View {
			if c.snap.Nodes[i].View[j].ID == id {
				f(&c.snap.Nodes[i].View[j])
			}
		}
	}
	return c
}

// silence makes pod i stop answering.
func (c *cluster) silence(i int, err error) *cluster {
	o := &c.snap.Nodes[i]
	o.Err, o.View, o.Info, o.Replication = err, nil, nil, nil
	return c
}

// fail flags node id fail in every view, last heard of ago.
func (c *cluster) fail(id string, ago time.Duration) *cluster {
	return c.each(id, func(n *Node) {
		n.Flags, n.Failed, n.PongRecv = append(n.Flags, "fail"), true, now.Add(-ago).UnixMilli()
	})
}

// promote makes the replica id the master of the slots of its master, in every view.
func (c *cluster) promote(replica, old string) *cluster {
	var slots []SlotRange
	c.each(old, func(n *Node) {
		if !n.Myself {
			slots, n.Slots = n.Slots, nil
		}
	})
	return c.each(replica, func(n *Node) {
		n.Role, n.MasterID, n.Slots = RoleMaster, "", slots
		n.Flags = slices.DeleteFunc(n.Flags, func(f string) bool { return f == RoleSlave })
		n.Flags = append(n.Flags, RoleMaster)
	}).each(old, func(n *Node) {})
}

var errDown = errors.New("dial tcp: connection refused")

// threeShards is rc-0..rc-2, masters aaaaaaaa, bbbbbbbb, cccccccc on n1..n3 with a third of
// the slots each, then the given nodes.
func threeShards(masters, replicasPerMaster int, others ...fakeNode) *cluster {
	return newFake(masters, replicasPerMaster, append([]fakeNode{
		{"rc-0", "aaaaaaaa", "n1", "", []SlotRange{{Start: 0, End: 5460}}},
		{"rc-1", "bbbbbbbb", "n2", "", []SlotRange{{Start: 5461, End: 10922}}},
		{"rc-2", "cccccccc", "n3", "", []SlotRange{{Start: 10923, End: 16383}}},
	}, others...)...)
}

// six is three masters (a, b, c on hosts n1..n3) and their replicas (d, e, f), each
// replica on another host than its master.
func six() *cluster {
	return newFake(3, 1,
		fakeNode{"rc-0", "aaaaaaaa", "n1", "", []SlotRange{{Start: 0, End: 5460}}},
		fakeNode{"rc-1", "bbbbbbbb", "n2", "", []SlotRange{{Start: 5461, End: 10922}}},
		fakeNode{"rc-2", "cccccccc", "n3", "", []SlotRange{{Start: 10923, End: 16383}}},
		fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
		fakeNode{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
		fakeNode{"rc-5", "ffffffff", "n1", "cccccccc", nil},
	)
}

func TestPlanRecovery(t *testing.T) {
	cases := map[string]struct {
		snap     observe.Snapshot
		want     ActionKind // "" for no action
		commands []string   // "addr: args", in order; nil to skip the check
		ready    bool
		served   int
		lost     bool
		released []string // pods dropped from the member record
		message  string   // a part of the action's message; "" to skip the check
	}{
		"a healthy cluster needs nothing and is Ready": {
			snap: six().snap, ready: true, served: SlotCount,
		},
		"a master restarted 3 s ago reports ok: every slot served, not Ready until it settles": {
			snap: func() observe.Snapshot {
				c := six()
				for i := range c.snap.Nodes {
					c.snap.Nodes[i].Started = now.Add(-time.Hour)
				}
				c.snap.Nodes[1].Started = now.Add(-3 * time.Second)
				return c.snap
			}(),
			served: SlotCount,
		},
		"every node started more than cluster-node-timeout + 2 s ago: Ready": {
			snap: func() observe.Snapshot {
				c := six()
				for i := range c.snap.Nodes {
					c.snap.Nodes[i].Started = now.Add(-SettleTime(5*time.Second) - time.Second)
				}
				return c.snap
			}(),
			ready: true, served: SlotCount,
		},
		"a replica still in its first full sync: every slot served, not Ready": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[3].Replication["master_link_status"] = "down"
				c.snap.Nodes[3].Replication["master_sync_in_progress"] = "1"
				return c.snap
			}(),
			served: SlotCount,
		},
		"a replica dialing its master's old address (every pod back at a new IP): pointed at its master again": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[3].Replication["master_host"], c.snap.Nodes[3].Replication["master_port"] = "127.1.0.99", "6379"
				c.snap.Nodes[3].Replication["master_link_status"] = "down"
				return c.snap
			}(),
			want: ActionRepoint, commands: []string{addrOf(3) + ": CLUSTER REPLICATE aaaaaaaa"}, served: SlotCount,
			message: "rc-3 replicates aaaaaaaa (rc-0) at 127.1.0.99:6379, an address it left: it answers at 127.1.0.1:6379 now",
		},
		"a replica whose link is down at its master's current address: Redis reconnects it, nothing to do": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[3].Replication["master_host"], c.snap.Nodes[3].Replication["master_port"] = "127.1.0.1", "6379"
				c.snap.Nodes[3].Replication["master_link_status"] = "down"
				return c.snap
			}(),
			served: SlotCount,
		},
		"a replica whose link is up but a full sync is under way: every slot served, not Ready": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[4].Replication["master_sync_in_progress"] = "1"
				return c.snap
			}(),
			served: SlotCount,
		},
		"every pod back at a new IP: every member meets every other, not only the lowest": {
			snap: func() observe.Snapshot {
				c := six()
				for i := range c.snap.Nodes {
					for j := range c.snap.Nodes[i].View {
						if v := &c.snap.Nodes[i].View[j]; !v.Myself {
							v.Addr, v.Host = "10.9.9.9:6379", "10.9.9.9"
							v.Flags = append(v.Flags, "noaddr")
						}
					}
				}
				return c.snap
			}(),
			want: ActionMeet, served: SlotCount,
		},
		"one node knows one peer at an old address: only that introduction": {
			snap: func() observe.Snapshot {
				c := six()
				v := &c.snap.Nodes[4].View[1]
				v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
				return c.snap
			}(),
			want: ActionMeet, commands: []string{addrOf(4) + ": CLUSTER MEET 127.1.0.2 6379"}, served: SlotCount,
			message: "first: rc-4 lists rc-1 (127.1.0.2:6379) as 10.9.9.9:6379 [",
		},
		"master back with an empty volume, held by its start guard, replica not promoted yet: wait for Redis": {
			snap:   six().silence(0, errDown).fail("aaaaaaaa", 8*time.Second).snap,
			served: SlotCount - 5461,
		},
		"master dead for three node timeouts and no replica took over: forced failover on its most caught-up replica": {
			snap: func() observe.Snapshot {
				c := threeShards(3, 2,
					fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
					fakeNode{"rc-4", "eeeeeeee", "n3", "aaaaaaaa", nil},
				)
				c.snap.Nodes[3].Replication["slave_repl_offset"] = "100"
				c.snap.Nodes[4].Replication["slave_repl_offset"] = "250"
				return c.silence(0, errDown).fail("aaaaaaaa", 20*time.Second).snap
			}(),
			want: ActionForceFailover, commands: []string{addrOf(4) + ": CLUSTER FAILOVER FORCE"}, served: SlotCount - 5461,
		},
		"one master's view routes two slots to a removed node with a higher epoch: the owner bumps its epoch, the master is told": {
			snap: func() observe.Snapshot {
				c := six()
				v := &c.snap.Nodes[1].View[0] // rc-1's line for aaaaaaaa
				v.Slots = []SlotRange{{Start: 0, End: 99}, {Start: 102, End: 5460}}
				c.snap.Nodes[1].View = append(c.snap.Nodes[1].View, Node{ID: "gggggggg", Addr: "127.1.9.9:6379", Role: RoleMaster,
					Flags: []string{"master", "fail"}, Failed: true, ConfigEpoch: 99, Slots: []SlotRange{{Start: 100, End: 101}}})
				return c.snap
			}(),
			want: ActionRoute, commands: []string{addrOf(0) + ": CLUSTER BUMPEPOCH",
				addrOf(1) + ": CLUSTER SETSLOT 100 NODE aaaaaaaa", addrOf(1) + ": CLUSTER SETSLOT 101 NODE aaaaaaaa"},
			served: SlotCount - 2,
		},
		"a replica's view has a slot unassigned: only the owner's epoch is bumped (a replica refuses SETSLOT)": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[4].View[2].Slots = []SlotRange{{Start: 10923, End: 16382}}
				return c.snap
			}(),
			want: ActionRoute, commands: []string{addrOf(2) + ": CLUSTER BUMPEPOCH"}, served: SlotCount - 1,
		},
		"a replica's view gives a shard to a forgotten master of the owner's own epoch, the highest the owner knows: another master's epoch is raised first": {
			snap: func() observe.Snapshot {
				c := six()
				for id, epoch := range map[string]int64{"aaaaaaaa": 1, "bbbbbbbb": 2, "cccccccc": 7} {
					c.each(id, func(n *Node) { n.ConfigEpoch = epoch })
				}
				v := &c.snap.Nodes[4].View[2] // rc-4's line for cccccccc
				v.Slots = nil
				c.snap.Nodes[4].View = append(c.snap.Nodes[4].View, Node{ID: "gggggggg", Role: RoleMaster,
					Flags: []string{"master", "noaddr"}, ConfigEpoch: 7, Slots: []SlotRange{{Start: 10923, End: 16383}}})
				return c.snap
			}(),
			want: ActionRoute, commands: []string{addrOf(0) + ": CLUSTER BUMPEPOCH", addrOf(2) + ": CLUSTER BUMPEPOCH"},
			served: SlotCount - 5461,
		},
		"the same a look later, the cluster's epoch raised: only the owner's epoch is bumped, and it outranks the stale entry": {
			snap: func() observe.Snapshot {
				c := six()
				for id, epoch := range map[string]int64{"aaaaaaaa": 8, "bbbbbbbb": 2, "cccccccc": 7} {
					c.each(id, func(n *Node) { n.ConfigEpoch = epoch })
				}
				v := &c.snap.Nodes[4].View[2]
				v.Slots = nil
				c.snap.Nodes[4].View = append(c.snap.Nodes[4].View, Node{ID: "gggggggg", Role: RoleMaster,
					Flags: []string{"master", "noaddr"}, ConfigEpoch: 7, Slots: []SlotRange{{Start: 10923, End: 16383}}})
				return c.snap
			}(),
			want: ActionRoute, commands: []string{addrOf(2) + ": CLUSTER BUMPEPOCH"},
			served: SlotCount - 5461,
		},
		"an old master back with its data claims slots most views give its silent promoted replica: its claim is not pushed": {
			snap: six().promote("eeeeeeee", "bbbbbbbb").silence(4, errDown).snap,
			want: "", served: SlotCount - 5462,
		},
		"a node suspects a peer (fail?): every slot served, not Ready": {
			snap: six().each("bbbbbbbb", func(n *Node) {
				if !n.Myself {
					n.Flags, n.PossiblyFailed = append(n.Flags, "fail?"), true
				}
			}).snap,
			served: SlotCount,
		},
		"a dead master's only replica never synced: it is not promoted over the data": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[3].Replication["slave_repl_offset"] = "0"
				return c.silence(0, errDown).fail("aaaaaaaa", time.Minute).snap
			}(),
			served: SlotCount - 5461,
		},
		"two of three masters dead: TAKEOVER, since no election can win": {
			snap: six().silence(0, errDown).silence(1, errDown).fail("aaaaaaaa", time.Minute).fail("bbbbbbbb", time.Minute).snap,
			want: ActionTakeover, commands: []string{addrOf(3) + ": CLUSTER FAILOVER TAKEOVER"}, served: 16384 - 10923,
		},
		"one pod Pending for good while another master crashed: the failover still happens": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes[5].Addr = ""
				return c.silence(5, errors.New("the pod has no IP")).silence(1, errDown).fail("bbbbbbbb", time.Minute).snap
			}(),
			want: ActionForceFailover, commands: []string{addrOf(4) + ": CLUSTER FAILOVER FORCE"}, served: SlotCount - 5462,
		},
		"master's volume lost, replica promoted, old ID failed long enough: forgotten on every node": {
			snap: six().silence(0, errDown).promote("dddddddd", "aaaaaaaa").fail("aaaaaaaa", 15*time.Second).snap,
			want: ActionForget,
			commands: []string{
				addrOf(1) + ": CLUSTER FORGET aaaaaaaa", addrOf(2) + ": CLUSTER FORGET aaaaaaaa", addrOf(3) + ": CLUSTER FORGET aaaaaaaa",
				addrOf(4) + ": CLUSTER FORGET aaaaaaaa", addrOf(5) + ": CLUSTER FORGET aaaaaaaa",
			},
			served: SlotCount,
		},
		"a member that was away brought a forgotten ID back from its nodes.conf: forgotten again": {
			snap: func() observe.Snapshot {
				c := six()
				ghost := line(fakeNode{id: "99999999", master: ""}, ":0", false)
				ghost.Host, ghost.Flags, ghost.PongRecv = "", []string{"master", "noaddr"}, now.Add(-4*time.Minute).UnixMilli()
				c.snap.Nodes[4].View = append(c.snap.Nodes[4].View, ghost)
				return c.snap
			}(),
			want: ActionForget, commands: []string{addrOf(4) + ": CLUSTER FORGET 99999999"}, served: SlotCount,
		},
		"a failed ID is not forgotten before the grace period": {
			snap:   six().silence(0, errDown).promote("dddddddd", "aaaaaaaa").fail("aaaaaaaa", 6*time.Second).snap,
			served: SlotCount,
		},
		"replica's volume lost: its old ID is forgotten": {
			snap: six().silence(4, errDown).fail("eeeeeeee", time.Minute).snap,
			want: ActionForget, served: SlotCount,
		},
		"a ghost's ID is forgotten and its pod released from the record once no node lists it": {
			snap: func() observe.Snapshot {
				c := six().silence(0, errDown).promote("dddddddd", "aaaaaaaa")
				for i := 1; i < 6; i++ {
					o := &c.snap.Nodes[i]
					o.View = slices.DeleteFunc(o.View, func(n Node) bool { return n.ID == "aaaaaaaa" })
				}
				return c.snap
			}(),
			// d is now a master without a replica; f and e stay; d takes one by balance.
			want: "", served: SlotCount, released: []string{"rc-0"},
		},
		"a replica whose master was forgotten is re-pointed to the master with the fewest": {
			snap: func() observe.Snapshot {
				c := threeShards(3, 1,
					fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
					fakeNode{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
					fakeNode{"rc-5", "ffffffff", "n1", "99999999", nil},
				)
				return c.snap
			}(),
			want: ActionRepoint, commands: []string{addrOf(5) + ": CLUSTER REPLICATE cccccccc"}, served: SlotCount, ready: true,
		},
		"a Form cut before its CLUSTER REPLICATE: the three planned replicas are empty masters, not Ready until they replicate": {
			snap: threeShards(3, 1,
				fakeNode{"rc-3", "dddddddd", "n2", "", nil},
				fakeNode{"rc-4", "eeeeeeee", "n3", "", nil},
				fakeNode{"rc-5", "ffffffff", "n1", "", nil},
			).snap,
			want: ActionDemote, served: SlotCount,
		},
		"a scale out's new masters wait empty for slots: the spec asks for them, so the cluster is Ready": {
			snap: threeShards(5, 0,
				fakeNode{"rc-3", "dddddddd", "n2", "", nil},
				fakeNode{"rc-4", "eeeeeeee", "n3", "", nil},
			).snap,
			served: SlotCount, ready: true,
		},
		"scale in left a staying master without slots beyond the spec's count: it becomes a replica": {
			snap: func() observe.Snapshot {
				c := threeShards(3, 1,
					fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
					fakeNode{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
					fakeNode{"rc-5", "ffffffff", "n1", "", nil},
				)
				return c.snap
			}(),
			want: ActionDemote, commands: []string{addrOf(5) + ": CLUSTER REPLICATE cccccccc"}, served: SlotCount, // its shard is a copy short

		},
		"an empty master the spec still needs (scale out in progress) is kept": {
			snap: func() observe.Snapshot {
				c := threeShards(4, 1,
					fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
					fakeNode{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
					fakeNode{"rc-5", "ffffffff", "n1", "cccccccc", nil},
					fakeNode{"rc-6", "gggggggg", "n2", "", nil},
				)
				return c.snap
			}(),
			served: SlotCount, ready: true,
		},
		"one master with two replicas, another with none: one moves, from outside its new master's node": {
			snap: func() observe.Snapshot {
				c := threeShards(3, 1,
					fakeNode{"rc-3", "dddddddd", "n3", "aaaaaaaa", nil},
					fakeNode{"rc-4", "eeeeeeee", "n2", "aaaaaaaa", nil},
					fakeNode{"rc-5", "ffffffff", "n1", "cccccccc", nil},
				)
				return c.snap
			}(),
			want: ActionBalanceReplicas, commands: []string{addrOf(3) + ": CLUSTER REPLICATE bbbbbbbb"}, served: SlotCount, ready: true,
		},
		"a replica on another node but in its master's zone: swapped with another master's replica": {
			snap: func() observe.Snapshot {
				c := six()
				for i, zone := range []string{"z1", "z2", "z3", "z1", "z3", "z2"} { // rc-3 shares z1 with its master rc-0
					c.snap.Nodes[i].Zone = zone
				}
				c.snap.Nodes[3].Host = "n4"
				return c.snap
			}(),
			want: ActionSeparate, served: SlotCount, ready: true,
		},
		"a replica on its master's Kubernetes node after a failover: swapped with another master's replica": {
			snap: func() observe.Snapshot {
				c := threeShards(3, 1,
					fakeNode{"rc-3", "dddddddd", "n1", "aaaaaaaa", nil},
					fakeNode{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
					fakeNode{"rc-5", "ffffffff", "n2", "cccccccc", nil},
				)
				return c.snap
			}(),
			want:     ActionSeparate,
			commands: []string{addrOf(3) + ": CLUSTER REPLICATE bbbbbbbb", addrOf(4) + ": CLUSTER REPLICATE aaaaaaaa"},
			served:   SlotCount, ready: true,
		},
		"a new empty node is not pulled in by introductions": {
			snap: func() observe.Snapshot {
				c := six()
				c.snap.Nodes = append(c.snap.Nodes, observe.Observation{Pod: "rc-6", Addr: addrOf(6), Info: map[string]string{"cluster_state": "fail"},
					View: []Node{line(fakeNode{id: "gggggggg"}, ":6379", true)}})
				return c.snap
			}(),
			served: SlotCount,
		},
		"every node back empty: the cluster is lost, nothing is released": {
			snap: func() observe.Snapshot {
				c := six()
				for i := range c.snap.Nodes {
					c.snap.Nodes[i].View = []Node{line(fakeNode{id: fmt.Sprintf("new%d", i)}, ":6379", true)}
				}
				return c.snap
			}(),
			lost: true,
		},
		"every node silent: the cluster is lost to the operator, nothing is released": {
			snap: func() observe.Snapshot {
				c := six()
				for i := range c.snap.Nodes {
					c.silence(i, errDown)
				}
				return c.snap
			}(),
			lost: true,
		},
		"wrong password on every node: nothing to do, nothing released": {
			snap: func() observe.Snapshot {
				c := six()
				for i := range c.snap.Nodes {
					c.silence(i, errors.New("WRONGPASS invalid username-password pair or user is disabled."))
				}
				return c.snap
			}(),
			lost: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := planRecovery(tc.snap)
			if !ok {
				got = Action{}
			}
			if got.Kind != tc.want {
				t.Fatalf("planRecovery = %s %v (%s), want %q", got.Kind, got.Commands, got.Message, tc.want)
			}
			if !strings.Contains(got.Message, tc.message) {
				t.Errorf("message %q does not say %q", got.Message, tc.message)
			}
			if tc.commands != nil {
				var cmds []string
				for _, c := range got.Commands {
					cmds = append(cmds, c.String())
				}
				if !slices.Equal(cmds, tc.commands) {
					t.Errorf("commands\n%s\nwant\n%s", strings.Join(cmds, "\n"), strings.Join(tc.commands, "\n"))
				}
			}
			h := Assess(tc.snap)
			if h.Ready() != tc.ready {
				t.Errorf("Ready = %v, want %v (problems: %v)", h.Ready(), tc.ready, h.Problems)
			}
			if h.SlotsServed != tc.served {
				t.Errorf("SlotsServed = %d, want %d", h.SlotsServed, tc.served)
			}
			if Lost(tc.snap) != tc.lost {
				t.Errorf("Lost = %v, want %v", Lost(tc.snap), tc.lost)
			}
			rec := observe.MemberRecord(tc.snap)
			var released []string
			for pod := range maps.Keys(tc.snap.Members) {
				if _, ok := rec[pod]; !ok {
					released = append(released, pod)
				}
			}
			slices.Sort(released)
			if !slices.Equal(released, tc.released) {
				t.Errorf("released %v, want %v", released, tc.released)
			}
		})
	}
}

// TestPlanMeetEveryPairEveryView checks the full mesh: after every pod moved, each of the
// six members is introduced to each of the five others from its own view.
func TestPlanMeetEveryPairEveryView(t *testing.T) {
	c := six()
	for i := range c.snap.Nodes {
		for j := range c.snap.Nodes[i].View {
			if v := &c.snap.Nodes[i].View[j]; !v.Myself {
				v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
			}
		}
	}
	a, ok := planRecovery(c.snap)
	if !ok || len(a.Commands) != 30 {
		t.Fatalf("got %d introductions (%v), want 30", len(a.Commands), a.Kind)
	}
	from := map[string]int{}
	for _, cmd := range a.Commands {
		from[cmd.Addr]++
	}
	for i := range 6 {
		if from[addrOf(i)] != 5 {
			t.Errorf("%s sends %d MEETs, want 5", addrOf(i), from[addrOf(i)])
		}
	}
}

// TestCheckIdentity: a server at a reused IP that is another pod's node does not speak for
// the pod the IP now belongs to.
func TestCheckIdentity(t *testing.T) {
	c := six()
	c.snap.Nodes[0].View = slices.Clone(c.snap.Nodes[1].View) // rc-0's address answers as bbbbbbbb
	c.snap.CheckIdentity()
	if c.snap.Nodes[0].Answered() || !strings.Contains(c.snap.Nodes[0].Err.Error(), "member record") {
		t.Errorf("rc-0 answered as another pod's node and was believed: err %v", c.snap.Nodes[0].Err)
	}
	for i := 1; i < 6; i++ {
		if !c.snap.Nodes[i].Answered() {
			t.Errorf("%s lost its answer: %v", c.snap.Nodes[i].Pod, c.snap.Nodes[i].Err)
		}
	}
	if Assess(c.snap).Ready() {
		t.Error("Ready with a pod whose own node did not answer")
	}
}

// TestSettledInIsTheLongestWait: the next look is due when the most recently started node
// has settled.
func TestSettledInIsTheLongestWait(t *testing.T) {
	c := six()
	c.snap.Nodes[0].Started = now.Add(-1 * time.Second)
	c.snap.Nodes[4].Started = now.Add(-4 * time.Second)
	h := Assess(c.snap)
	if want := SettleTime(5*time.Second) - time.Second; h.SettledIn != want {
		t.Errorf("SettledIn = %s, want %s", h.SettledIn, want)
	}
	if h.Ready() {
		t.Error("Ready while two nodes settle")
	}
}

func TestUnseparated(t *testing.T) {
	cases := map[string]struct {
		snap observe.Snapshot
		want []string
	}{
		"every replica on another node": {snap: six().snap},
		"a replica on its master's node but a swap separates them: the planner will, nothing to report": {
			snap: threeShards(3, 1,
				fakeNode{"rc-3", "dddddddd", "n1", "aaaaaaaa", nil},
				fakeNode{"rc-4", "eeeeeeee", "n3", "bbbbbbbb", nil},
				fakeNode{"rc-5", "ffffffff", "n2", "cccccccc", nil},
			).snap,
		},
		"two Kubernetes nodes for three shards of two: one replica cannot be separated": {
			snap: newFake(3, 1,
				fakeNode{"rc-0", "aaaaaaaa", "n1", "", []SlotRange{{Start: 0, End: 5460}}},
				fakeNode{"rc-1", "bbbbbbbb", "n2", "", []SlotRange{{Start: 5461, End: 10922}}},
				fakeNode{"rc-2", "cccccccc", "n1", "", []SlotRange{{Start: 10923, End: 16383}}},
				fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
				fakeNode{"rc-4", "eeeeeeee", "n1", "bbbbbbbb", nil},
				fakeNode{"rc-5", "ffffffff", "n1", "cccccccc", nil},
			).snap,
			want: []string{"rc-5 shares Kubernetes node n1 with its master rc-2"},
		},
		"one Kubernetes node: every replica shares it": {
			snap: newFake(3, 1,
				fakeNode{"rc-0", "aaaaaaaa", "n1", "", []SlotRange{{Start: 0, End: 5460}}},
				fakeNode{"rc-1", "bbbbbbbb", "n1", "", []SlotRange{{Start: 5461, End: 10922}}},
				fakeNode{"rc-2", "cccccccc", "n1", "", []SlotRange{{Start: 10923, End: 16383}}},
				fakeNode{"rc-3", "dddddddd", "n1", "aaaaaaaa", nil},
				fakeNode{"rc-4", "eeeeeeee", "n1", "bbbbbbbb", nil},
				fakeNode{"rc-5", "ffffffff", "n1", "cccccccc", nil},
			).snap,
			want: []string{
				"rc-3 shares Kubernetes node n1 with its master rc-0",
				"rc-4 shares Kubernetes node n1 with its master rc-1",
				"rc-5 shares Kubernetes node n1 with its master rc-2",
			},
		},
		"other nodes but one zone for a master and its replica, no swap left": {
			snap: func() observe.Snapshot {
				c := six()
				for i, zone := range []string{"z1", "z1", "z1", "z1", "z1", "z1"} {
					c.snap.Nodes[i].Zone = zone
				}
				return c.snap
			}(),
			want: []string{
				"rc-3 shares zone z1 with its master rc-0",
				"rc-4 shares zone z1 with its master rc-1",
				"rc-5 shares zone z1 with its master rc-2",
			},
		},
		"a master not answering: the layout is not judged": {
			snap: func() observe.Snapshot {
				c := newFake(3, 1,
					fakeNode{"rc-0", "aaaaaaaa", "n1", "", []SlotRange{{Start: 0, End: 5460}}},
					fakeNode{"rc-1", "bbbbbbbb", "n1", "", []SlotRange{{Start: 5461, End: 10922}}},
					fakeNode{"rc-2", "cccccccc", "n1", "", []SlotRange{{Start: 10923, End: 16383}}},
					fakeNode{"rc-3", "dddddddd", "n1", "aaaaaaaa", nil},
				)
				c.snap.Nodes[1].Err = errors.New("i/o timeout")
				c.snap.Nodes[1].View = nil
				return c.snap
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Unseparated(tc.snap)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Unseparated:\n got %q\nwant %q", got, tc.want)
			}
			if h := Assess(tc.snap); !slices.Equal(h.Unseparated, tc.want) {
				t.Fatalf("Assess().Unseparated = %q, want %q", h.Unseparated, tc.want)
			}
		})
	}
}
