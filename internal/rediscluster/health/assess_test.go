package health

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

func TestPlanRecovery(t *testing.T) {
	cases := map[string]struct {
		snap     observe.Snapshot
		want     recovery.ActionKind // "" for no action
		commands []string            // "addr: args", in order; nil to skip the check
		ready    bool
		served   int
		lost     bool
		released []string // pods dropped from the member record
		message  string   // a part of the action's message; "" to skip the check
	}{
		"a healthy cluster needs nothing and is Ready": {
			snap: fakesnapshot.Six().Snap, ready: true, served: nodes.SlotCount,
		},
		"a master restarted 3 s ago reports ok: every slot served, not Ready until it settles": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i := range c.Snap.Nodes {
					c.Snap.Nodes[i].Started = fakesnapshot.Now.Add(-time.Hour)
				}
				c.Snap.Nodes[1].Started = fakesnapshot.Now.Add(-3 * time.Second)
				return c.Snap
			}(),
			served: nodes.SlotCount,
		},
		"every node started 3 s ago, then the operator formed the cluster from them: Ready": {
			snap:  formedFromEveryNode(3*time.Second, nil),
			ready: true, served: nodes.SlotCount,
		},
		"a master restarted 1 s ago, after the operator formed the cluster: not Ready until it settles": {
			snap: formedFromEveryNode(3*time.Second, func(c *fakesnapshot.Cluster) {
				c.Snap.Nodes[1].Started = fakesnapshot.Now.Add(-time.Second)
				c.Snap.Nodes[1].Replication["run_id"] = "restarted"
			}),
			served: nodes.SlotCount,
		},
		"every node started more than cluster-node-timeout + 2 s ago: Ready": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i := range c.Snap.Nodes {
					c.Snap.Nodes[i].Started = fakesnapshot.Now.Add(-SettleTime(5*time.Second) - time.Second)
				}
				return c.Snap
			}(),
			ready: true, served: nodes.SlotCount,
		},
		"a pod terminating: its node answers only until its process stops, every slot served, not Ready": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[4].Terminating = true
				return c.Snap
			}(),
			served: nodes.SlotCount,
		},
		"a replica still in its first full sync: every slot served, not Ready": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[3].Replication["master_link_status"] = "down"
				c.Snap.Nodes[3].Replication["master_sync_in_progress"] = "1"
				return c.Snap
			}(),
			served: nodes.SlotCount,
		},
		"a replica dialing its master's old address (every pod back at a new IP): pointed at its master again": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[3].Replication["master_host"], c.Snap.Nodes[3].Replication["master_port"] = "127.1.0.99", "6379"
				c.Snap.Nodes[3].Replication["master_link_status"] = "down"
				return c.Snap
			}(),
			want: recovery.ActionRepoint, commands: []string{fakesnapshot.Addr(3) + ": CLUSTER REPLICATE aaaaaaaa"}, served: nodes.SlotCount,
			message: "rc-3 replicates aaaaaaaa (rc-0) at 127.1.0.99:6379, an address it left: it answers at 127.1.0.1:6379 now",
		},
		"a replica whose link is down at its master's current address: Redis reconnects it, nothing to do": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[3].Replication["master_host"], c.Snap.Nodes[3].Replication["master_port"] = "127.1.0.1", "6379"
				c.Snap.Nodes[3].Replication["master_link_status"] = "down"
				return c.Snap
			}(),
			served: nodes.SlotCount,
		},
		"a replica whose link is up but a full sync is under way: every slot served, not Ready": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[4].Replication["master_sync_in_progress"] = "1"
				return c.Snap
			}(),
			served: nodes.SlotCount,
		},
		"every pod back at a new IP: every member meets every other, not only the lowest": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i := range c.Snap.Nodes {
					for j := range c.Snap.Nodes[i].View {
						if v := &c.Snap.Nodes[i].View[j]; !v.Myself {
							v.Addr, v.Host = "10.9.9.9:6379", "10.9.9.9"
							v.Flags = append(v.Flags, "noaddr")
						}
					}
				}
				return c.Snap
			}(),
			want: recovery.ActionMeet, served: nodes.SlotCount,
		},
		"one node knows one peer at an old address: only that introduction": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				v := &c.Snap.Nodes[4].View[1]
				v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
				return c.Snap
			}(),
			want: recovery.ActionMeet, commands: []string{fakesnapshot.Addr(4) + ": CLUSTER MEET 127.1.0.2 6379"}, served: nodes.SlotCount,
			message: "first: rc-4 lists rc-1 (127.1.0.2:6379) as 10.9.9.9:6379 [",
		},
		"master back with an empty volume, held by its start guard, replica not promoted yet: wait for Redis": {
			snap:   fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", 8*time.Second).Snap,
			served: nodes.SlotCount - 5461,
		},
		"master dead for three node timeouts and no replica took over: forced failover on its most caught-up replica": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(3, 2,
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "aaaaaaaa"},
				)
				c.Snap.Nodes[3].Replication["slave_repl_offset"] = "100"
				c.Snap.Nodes[4].Replication["slave_repl_offset"] = "250"
				return c.Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", 20*time.Second).Snap
			}(),
			want: recovery.ActionForceFailover, commands: []string{fakesnapshot.Addr(4) + ": CLUSTER FAILOVER FORCE"}, served: nodes.SlotCount - 5461,
		},
		"one master's view routes two slots to a removed node with a higher epoch: the owner bumps its epoch, the master is told": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				v := &c.Snap.Nodes[1].View[0] // rc-1's line for aaaaaaaa
				v.Slots = []nodes.SlotRange{{Start: 0, End: 99}, {Start: 102, End: 5460}}
				c.Snap.Nodes[1].View = append(c.Snap.Nodes[1].View, nodes.Node{ID: "gggggggg", Addr: "127.1.9.9:6379", Role: nodes.RoleMaster,
					Flags: []string{"master", "fail"}, Failed: true, ConfigEpoch: 99, Slots: []nodes.SlotRange{{Start: 100, End: 101}}})
				return c.Snap
			}(),
			want: recovery.ActionRoute, commands: []string{fakesnapshot.Addr(0) + ": CLUSTER BUMPEPOCH",
				fakesnapshot.Addr(1) + ": CLUSTER SETSLOT 100 NODE aaaaaaaa", fakesnapshot.Addr(1) + ": CLUSTER SETSLOT 101 NODE aaaaaaaa"},
			served: nodes.SlotCount - 2,
		},
		"a replica's view has a slot unassigned: only the owner's epoch is bumped (a replica refuses SETSLOT)": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[4].View[2].Slots = []nodes.SlotRange{{Start: 10923, End: 16382}}
				return c.Snap
			}(),
			want: recovery.ActionRoute, commands: []string{fakesnapshot.Addr(2) + ": CLUSTER BUMPEPOCH"}, served: nodes.SlotCount - 1,
		},
		"a replica's view gives a shard to a forgotten master of the owner's own epoch, the highest the owner knows: another master's epoch is raised first": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for id, epoch := range map[string]int64{"aaaaaaaa": 1, "bbbbbbbb": 2, "cccccccc": 7} {
					c.Each(id, func(n *nodes.Node) { n.ConfigEpoch = epoch })
				}
				v := &c.Snap.Nodes[4].View[2] // rc-4's line for cccccccc
				v.Slots = nil
				c.Snap.Nodes[4].View = append(c.Snap.Nodes[4].View, nodes.Node{ID: "gggggggg", Role: nodes.RoleMaster,
					Flags: []string{"master", "noaddr"}, ConfigEpoch: 7, Slots: []nodes.SlotRange{{Start: 10923, End: 16383}}})
				return c.Snap
			}(),
			want: recovery.ActionRoute, commands: []string{fakesnapshot.Addr(0) + ": CLUSTER BUMPEPOCH", fakesnapshot.Addr(2) + ": CLUSTER BUMPEPOCH"},
			served: nodes.SlotCount - 5461,
		},
		"the same a look later, the cluster's epoch raised: only the owner's epoch is bumped, and it outranks the stale entry": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for id, epoch := range map[string]int64{"aaaaaaaa": 8, "bbbbbbbb": 2, "cccccccc": 7} {
					c.Each(id, func(n *nodes.Node) { n.ConfigEpoch = epoch })
				}
				v := &c.Snap.Nodes[4].View[2]
				v.Slots = nil
				c.Snap.Nodes[4].View = append(c.Snap.Nodes[4].View, nodes.Node{ID: "gggggggg", Role: nodes.RoleMaster,
					Flags: []string{"master", "noaddr"}, ConfigEpoch: 7, Slots: []nodes.SlotRange{{Start: 10923, End: 16383}}})
				return c.Snap
			}(),
			want: recovery.ActionRoute, commands: []string{fakesnapshot.Addr(2) + ": CLUSTER BUMPEPOCH"},
			served: nodes.SlotCount - 5461,
		},
		"an old master back with its data claims slots most views give its silent promoted replica: its claim is not pushed": {
			snap: fakesnapshot.Six().Promote("eeeeeeee", "bbbbbbbb").Silence(4, fakesnapshot.ErrDown).Snap,
			want: "", served: nodes.SlotCount - 5462,
		},
		"a node suspects a peer (fail?): every slot served, not Ready": {
			snap: fakesnapshot.Six().Each("bbbbbbbb", func(n *nodes.Node) {
				if !n.Myself {
					n.Flags, n.PossiblyFailed = append(n.Flags, "fail?"), true
				}
			}).Snap,
			served: nodes.SlotCount,
		},
		"a dead master's only replica never synced: it is not promoted over the data": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[3].Replication["slave_repl_offset"] = "0"
				return c.Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap
			}(),
			served: nodes.SlotCount - 5461,
		},
		"two of three masters dead: TAKEOVER, since no election can win": {
			snap: fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Silence(1, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Fail("bbbbbbbb", time.Minute).Snap,
			want: recovery.ActionTakeover, commands: []string{fakesnapshot.Addr(3) + ": CLUSTER FAILOVER TAKEOVER"}, served: 16384 - 10923,
		},
		"one pod Pending for good while another master crashed: the failover still happens": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes[5].Addr = ""
				return c.Silence(5, errors.New("the pod has no IP")).Silence(1, fakesnapshot.ErrDown).Fail("bbbbbbbb", time.Minute).Snap
			}(),
			want: recovery.ActionForceFailover, commands: []string{fakesnapshot.Addr(4) + ": CLUSTER FAILOVER FORCE"}, served: nodes.SlotCount - 5462,
		},
		"master's volume lost, replica promoted, old ID failed long enough: forgotten on every node": {
			snap: fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Promote("dddddddd", "aaaaaaaa").Fail("aaaaaaaa", 15*time.Second).Snap,
			want: recovery.ActionForget,
			commands: []string{
				fakesnapshot.Addr(1) + ": CLUSTER FORGET aaaaaaaa", fakesnapshot.Addr(2) + ": CLUSTER FORGET aaaaaaaa", fakesnapshot.Addr(3) + ": CLUSTER FORGET aaaaaaaa",
				fakesnapshot.Addr(4) + ": CLUSTER FORGET aaaaaaaa", fakesnapshot.Addr(5) + ": CLUSTER FORGET aaaaaaaa",
			},
			served: nodes.SlotCount,
		},
		"a member that was away brought a forgotten ID back from its nodes.conf: forgotten again": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				ghost := fakesnapshot.Line(fakesnapshot.Node{ID: "99999999"}, ":0", false)
				ghost.Host, ghost.Flags, ghost.PongRecv = "", []string{"master", "noaddr"}, fakesnapshot.Now.Add(-4*time.Minute).UnixMilli()
				c.Snap.Nodes[4].View = append(c.Snap.Nodes[4].View, ghost)
				return c.Snap
			}(),
			want: recovery.ActionForget, commands: []string{fakesnapshot.Addr(4) + ": CLUSTER FORGET 99999999"}, served: nodes.SlotCount,
		},
		"a failed ID is not forgotten before the grace period": {
			snap:   fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Promote("dddddddd", "aaaaaaaa").Fail("aaaaaaaa", 6*time.Second).Snap,
			served: nodes.SlotCount,
		},
		"replica's volume lost: its old ID is forgotten": {
			snap: fakesnapshot.Six().Silence(4, fakesnapshot.ErrDown).Fail("eeeeeeee", time.Minute).Snap,
			want: recovery.ActionForget, served: nodes.SlotCount,
		},
		"a ghost's ID is forgotten and its pod released from the record once no node lists it": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Promote("dddddddd", "aaaaaaaa")
				for i := 1; i < 6; i++ {
					o := &c.Snap.Nodes[i]
					o.View = slices.DeleteFunc(o.View, func(n nodes.Node) bool { return n.ID == "aaaaaaaa" })
				}
				return c.Snap
			}(),
			// d is now a master without a replica; f and e stay; d takes one by balance.
			want: "", served: nodes.SlotCount, released: []string{"rc-0"},
		},
		"a replica whose master was forgotten is re-pointed to the master with the fewest": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(3, 1,
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "bbbbbbbb"},
					fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "99999999"},
				)
				return c.Snap
			}(),
			want: recovery.ActionRepoint, commands: []string{fakesnapshot.Addr(5) + ": CLUSTER REPLICATE cccccccc"}, served: nodes.SlotCount, ready: true,
		},
		"a Form cut before its CLUSTER REPLICATE: the three planned replicas are empty masters, not Ready until they replicate": {
			snap: fakesnapshot.ThreeShards(3, 1,
				fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2"},
				fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3"},
				fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1"},
			).Snap,
			want: recovery.ActionDemote, served: nodes.SlotCount,
		},
		"a scale out's new masters wait empty for slots: the spec asks for them, so the cluster is Ready": {
			snap: fakesnapshot.ThreeShards(5, 0,
				fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2"},
				fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3"},
			).Snap,
			served: nodes.SlotCount, ready: true,
		},
		"scale in left a staying master without slots beyond the spec's count: it becomes a replica": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(3, 1,
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "bbbbbbbb"},
					fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1"},
				)
				return c.Snap
			}(),
			want: recovery.ActionDemote, commands: []string{fakesnapshot.Addr(5) + ": CLUSTER REPLICATE cccccccc"}, served: nodes.SlotCount, // its shard is a copy short

		},
		"an empty master the spec still needs (scale out in progress) is kept": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(4, 1,
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "bbbbbbbb"},
					fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "cccccccc"},
					fakesnapshot.Node{Pod: "rc-6", ID: "gggggggg", Host: "n2"},
				)
				return c.Snap
			}(),
			served: nodes.SlotCount, ready: true,
		},
		"one master with two replicas, another with none: one moves, from outside its new master's node": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(3, 1,
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n3", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n2", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "cccccccc"},
				)
				return c.Snap
			}(),
			want: recovery.ActionBalanceReplicas, commands: []string{fakesnapshot.Addr(3) + ": CLUSTER REPLICATE bbbbbbbb"}, served: nodes.SlotCount, ready: true,
		},
		"a replica on another node but in its master's zone: swapped with another master's replica": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i, zone := range []string{"z1", "z2", "z3", "z1", "z3", "z2"} { // rc-3 shares z1 with its master rc-0
					c.Snap.Nodes[i].Zone = zone
				}
				c.Snap.Nodes[3].Host = "n4"
				return c.Snap
			}(),
			want: recovery.ActionSeparate, served: nodes.SlotCount, ready: true,
		},
		"a replica on its master's Kubernetes node after a failover: swapped with another master's replica": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(3, 1,
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n1", Master: "aaaaaaaa"},
					fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "bbbbbbbb"},
					fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n2", Master: "cccccccc"},
				)
				return c.Snap
			}(),
			want:     recovery.ActionSeparate,
			commands: []string{fakesnapshot.Addr(3) + ": CLUSTER REPLICATE bbbbbbbb", fakesnapshot.Addr(4) + ": CLUSTER REPLICATE aaaaaaaa"},
			served:   nodes.SlotCount, ready: true,
		},
		"a new empty node is not pulled in by introductions": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				c.Snap.Nodes = append(c.Snap.Nodes, observe.Observation{Pod: "rc-6", Addr: fakesnapshot.Addr(6), Info: map[string]string{"cluster_state": "fail"},
					View: []nodes.Node{fakesnapshot.Line(fakesnapshot.Node{ID: "gggggggg"}, ":6379", true)}})
				return c.Snap
			}(),
			served: nodes.SlotCount,
		},
		"every node back empty: the cluster is lost, nothing is released": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i := range c.Snap.Nodes {
					c.Snap.Nodes[i].View = []nodes.Node{fakesnapshot.Line(fakesnapshot.Node{ID: fmt.Sprintf("new%d", i)}, ":6379", true)}
				}
				return c.Snap
			}(),
			lost: true,
		},
		"every node silent: the cluster is lost to the operator, nothing is released": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i := range c.Snap.Nodes {
					c.Silence(i, fakesnapshot.ErrDown)
				}
				return c.Snap
			}(),
			lost: true,
		},
		"wrong password on every node: nothing to do, nothing released": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i := range c.Snap.Nodes {
					c.Silence(i, errors.New("WRONGPASS invalid username-password pair or user is disabled."))
				}
				return c.Snap
			}(),
			lost: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := recovery.Recover(tc.snap)
			if !ok {
				got = recovery.Action{}
			}
			if got.Kind != tc.want {
				t.Fatalf("recovery.Recover = %s %v (%s), want %q", got.Kind, got.Commands, got.Message, tc.want)
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

// TestCheckIdentity: a server at a reused IP that is another pod's node does not speak for
// the pod the IP now belongs to.
func TestCheckIdentity(t *testing.T) {
	c := fakesnapshot.Six()
	c.Snap.Nodes[0].View = slices.Clone(c.Snap.Nodes[1].View) // rc-0's address answers as bbbbbbbb
	c.Snap.CheckIdentity()
	if c.Snap.Nodes[0].Answered() || !strings.Contains(c.Snap.Nodes[0].Err.Error(), "member record") {
		t.Errorf("rc-0 answered as another pod's node and was believed: err %v", c.Snap.Nodes[0].Err)
	}
	for i := 1; i < 6; i++ {
		if !c.Snap.Nodes[i].Answered() {
			t.Errorf("%s lost its answer: %v", c.Snap.Nodes[i].Pod, c.Snap.Nodes[i].Err)
		}
	}
	if Assess(c.Snap).Ready() {
		t.Error("Ready with a pod whose own node did not answer")
	}
}

// TestSettledInIsTheLongestWait: the next look is due when the most recently started node
// has settled.
func TestSettledInIsTheLongestWait(t *testing.T) {
	c := fakesnapshot.Six()
	c.Snap.Nodes[0].Started = fakesnapshot.Now.Add(-1 * time.Second)
	c.Snap.Nodes[4].Started = fakesnapshot.Now.Add(-4 * time.Second)
	h := Assess(c.Snap)
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
		"every replica on another node": {snap: fakesnapshot.Six().Snap},
		"a replica on its master's node but a swap separates them: the planner will, nothing to report": {
			snap: fakesnapshot.ThreeShards(3, 1,
				fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n1", Master: "aaaaaaaa"},
				fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "bbbbbbbb"},
				fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n2", Master: "cccccccc"},
			).Snap,
		},
		"two Kubernetes nodes for three shards of two: one replica cannot be separated": {
			snap: fakesnapshot.New(3, 1,
				fakesnapshot.Node{Pod: "rc-0", ID: "aaaaaaaa", Host: "n1", Slots: []nodes.SlotRange{{Start: 0, End: 5460}}},
				fakesnapshot.Node{Pod: "rc-1", ID: "bbbbbbbb", Host: "n2", Slots: []nodes.SlotRange{{Start: 5461, End: 10922}}},
				fakesnapshot.Node{Pod: "rc-2", ID: "cccccccc", Host: "n1", Slots: []nodes.SlotRange{{Start: 10923, End: 16383}}},
				fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
				fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n1", Master: "bbbbbbbb"},
				fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "cccccccc"},
			).Snap,
			want: []string{"rc-5 shares Kubernetes node n1 with its master rc-2"},
		},
		"one Kubernetes node: every replica shares it": {
			snap: fakesnapshot.New(3, 1,
				fakesnapshot.Node{Pod: "rc-0", ID: "aaaaaaaa", Host: "n1", Slots: []nodes.SlotRange{{Start: 0, End: 5460}}},
				fakesnapshot.Node{Pod: "rc-1", ID: "bbbbbbbb", Host: "n1", Slots: []nodes.SlotRange{{Start: 5461, End: 10922}}},
				fakesnapshot.Node{Pod: "rc-2", ID: "cccccccc", Host: "n1", Slots: []nodes.SlotRange{{Start: 10923, End: 16383}}},
				fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n1", Master: "aaaaaaaa"},
				fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n1", Master: "bbbbbbbb"},
				fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "cccccccc"},
			).Snap,
			want: []string{
				"rc-3 shares Kubernetes node n1 with its master rc-0",
				"rc-4 shares Kubernetes node n1 with its master rc-1",
				"rc-5 shares Kubernetes node n1 with its master rc-2",
			},
		},
		"other nodes but one zone for a master and its replica, no swap left": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six()
				for i, zone := range []string{"z1", "z1", "z1", "z1", "z1", "z1"} {
					c.Snap.Nodes[i].Zone = zone
				}
				return c.Snap
			}(),
			want: []string{
				"rc-3 shares zone z1 with its master rc-0",
				"rc-4 shares zone z1 with its master rc-1",
				"rc-5 shares zone z1 with its master rc-2",
			},
		},
		"a master not answering: the layout is not judged": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.New(3, 1,
					fakesnapshot.Node{Pod: "rc-0", ID: "aaaaaaaa", Host: "n1", Slots: []nodes.SlotRange{{Start: 0, End: 5460}}},
					fakesnapshot.Node{Pod: "rc-1", ID: "bbbbbbbb", Host: "n1", Slots: []nodes.SlotRange{{Start: 5461, End: 10922}}},
					fakesnapshot.Node{Pod: "rc-2", ID: "cccccccc", Host: "n1", Slots: []nodes.SlotRange{{Start: 10923, End: 16383}}},
					fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n1", Master: "aaaaaaaa"},
				)
				c.Snap.Nodes[1].Err = errors.New("i/o timeout")
				c.Snap.Nodes[1].View = nil
				return c.Snap
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := recovery.Unseparated(tc.snap)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Unseparated:\n got %q\nwant %q", got, tc.want)
			}
			if h := Assess(tc.snap); !slices.Equal(h.Unseparated, tc.want) {
				t.Fatalf("Assess().Unseparated = %q, want %q", h.Unseparated, tc.want)
			}
		})
	}
}

// TestAgreedRoutesCountLikeSlotBySlot: where every view routes alike, Assess counts slots
// from the masters' ranges; that must give what the slot-by-slot pass gives.
func TestAgreedRoutesCountLikeSlotBySlot(t *testing.T) {
	snaps := map[string]observe.Snapshot{
		"six":                 fakesnapshot.Six().Current().Snap,
		"a new master joined": fakesnapshot.Six().WithNewMaster().Snap,
		"a slot moved in every view": func() observe.Snapshot {
			c := fakesnapshot.Six()
			c.Each("aaaaaaaa", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: 0, End: 99}, {Start: 101, End: 5460}} })
			c.Each("bbbbbbbb", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: 100, End: 100}, {Start: 5461, End: 10922}} })
			return c.Snap
		}(),
		"a master silent":      fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Snap,
		"slots routed nowhere": fakesnapshot.Forgotten().Snap,
		"a master failed":      fakesnapshot.Six().Silence(1, fakesnapshot.ErrDown).Fail("bbbbbbbb", time.Minute).Snap,
	}
	for name, snap := range snaps {
		joined := snap.Joined()
		if _, agreed := observe.AgreedRoutes(joined); !agreed {
			t.Errorf("%s: the views were expected to agree", name)
			continue
		}
		fast := Assess(snap)
		var slow Health
		_, unowned := servedSlotBySlot(&slow, joined, snap.ByID(), map[string]bool{})
		if fast.SlotsAssigned != slow.SlotsAssigned || fast.SlotsServed != slow.SlotsServed || nodes.SlotCount-fast.SlotsAssigned != unowned {
			t.Errorf("%s: from ranges %d assigned, %d served; slot by slot %d and %d (%d unowned)",
				name, fast.SlotsAssigned, fast.SlotsServed, slow.SlotsAssigned, slow.SlotsServed, unowned)
		}
	}
}

// formedFromEveryNode is six nodes that started ago, each with its own run ID, which the
// operator formed the cluster from; then change, when not nil.
func formedFromEveryNode(ago time.Duration, change func(*fakesnapshot.Cluster)) observe.Snapshot {
	c := fakesnapshot.Six()
	c.Snap.FormedFrom = map[string]bool{}
	for i := range c.Snap.Nodes {
		id := fmt.Sprintf("run-%d", i)
		c.Snap.Nodes[i].Started, c.Snap.Nodes[i].Replication["run_id"] = fakesnapshot.Now.Add(-ago), id
		c.Snap.FormedFrom[id] = true
	}
	if change != nil {
		change(c)
	}
	return c.Snap
}
