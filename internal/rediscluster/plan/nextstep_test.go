package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// rotating is the spec of six nodes with a CA rotation in stage, last or not, that may end
// from due.
func rotating(stage string, last bool, due time.Time) Desired {
	s := specFor(6)
	s.CARotation = &CARotation{Stage: stage, Last: last, Due: due, Checked: true}
	return s
}

// generatedCA is the spec of six nodes with a generated CA due for renewal at renewAt and
// the rotate-ca annotation token, the last rotation having been for rotatedFor.
func generatedCA(renewAt time.Time, token, rotatedFor string) Desired {
	s := specFor(6)
	s.GeneratedCA = &GeneratedCA{RenewAt: renewAt, Token: token, RotatedFor: rotatedFor}
	return s
}

// specFor is the spec of a cluster of n pods whose StatefulSet has n, all recorded.
func specFor(n int) Desired {
	return Desired{Name: "rc", Replicas: n, StatefulSetReplicas: n, UpdateRevision: "r1", MembersRecorded: true,
		AcceptAnnotation: "redis.middleware-operator.io/accept-data-loss"}
}

// restoring is spec restoring a backup of three shards (the second with two ranges), with
// the masters loaded and the problem given.
func restoring(spec Desired, loaded []string, problem string) Desired {
	spec.UpdateRevision = ""
	spec.Restore = &Restore{Loaded: loaded, Problem: problem, Shards: [][]nodes.SlotRange{
		{{Start: 0, End: 99}}, {{Start: 100, End: 8000}, {Start: 9000, End: 9100}}, {{Start: 8001, End: 8999}, {Start: 9101, End: 16383}}}}
	return spec
}

// restoringSix is spec restoring a backup of six()'s slot map, with the masters loaded.
func restoringSix(spec Desired, loaded ...string) Desired {
	spec = restoring(spec, loaded, "")
	spec.Restore.Shards = [][]nodes.SlotRange{{{Start: 0, End: 5460}}, {{Start: 5461, End: 10922}}, {{Start: 10923, End: 16383}}}
	return spec
}

// reloading is spec reloading slots 0-5460 from a backup of the shards given.
func reloading(spec Desired, shards [][]nodes.SlotRange) Desired {
	spec.Reload = &Reload{Source: "nightly", Slots: []nodes.SlotRange{{Start: 0, End: 5460}}, Shards: shards}
	return spec
}

// repointing is six nodes, rc-3 a replica dialing its master at an address it left (a
// heal: StepRecover repoints it).
func repointing() observe.Snapshot {
	c := fakesnapshot.Six().Current()
	c.Snap.Nodes[3].Replication["master_host"], c.Snap.Nodes[3].Replication["master_port"] = "127.1.0.99", "6379"
	c.Snap.Nodes[3].Replication["master_link_status"] = "down"
	return c.Snap
}

// uniqueAddrs gives every node of s its own address (its index's).
func uniqueAddrs(s observe.Snapshot) observe.Snapshot {
	for i := range s.Nodes {
		s.Nodes[i].Addr = fakesnapshot.Addr(i)
		s.Nodes[i].Pod = fmt.Sprintf("rc-%d", i)
	}
	return s
}

func TestNextStep(t *testing.T) {
	accept := func(s Desired) Desired { s.AcceptDataLoss = true; return s }
	// scaleOut is the spec of a scale out of six pods to eight, edited by edit.
	scaleOut := func(edit func(s *Desired)) Desired {
		s := specFor(8)
		s.StatefulSetReplicas = 6
		if edit != nil {
			edit(&s)
		}
		return s
	}
	cases := map[string]nextStepCase{
		"a healthy, current cluster: idle, look again in half a node timeout": {
			spec: specFor(6), snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
			check: func(t *testing.T, s Step) { expect(t, s.After == 2500*time.Millisecond, "after %s", s.After) },
		},
		"paused: wait, whatever the cluster needs": {
			spec: func() Desired { s := specFor(6); s.Paused = true; return s }(), snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Snap, want: StepWait,
		},
		"an unsupported version and no pod yet: nothing is created, the reason says why": {
			spec: func() Desired {
				s := specFor(0)
				s.MembersRecorded = false
				s.Refused = "spec.version names Redis 3.2"
				return s
			}(),
			snap: observe.Snapshot{Now: fakesnapshot.Now, Members: map[string]string{}}, want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, s.Reason == "spec.version names Redis 3.2", "reason %q", s.Reason)
			},
		},
		"an unsupported version with pods running: they are still looked after": {
			spec: func() Desired { s := specFor(6); s.Refused = "spec.version names Redis 6.2"; return s }(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"nodes refuse the password: nothing is judged, not even the record": {
			spec: func() Desired { s := specFor(6); s.MembersRecorded = false; return s }(),
			snap: fakesnapshot.Six().Current().Silence(2, errors.New("WRONGPASS invalid username-password pair")).Snap, want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "refuse the password"), "reason %q", s.Reason)
			},
		},
		"no member record yet: write it first": {
			spec: func() Desired { s := specFor(6); s.MembersRecorded = false; return s }(), snap: fakesnapshot.Six().Current().Snap, want: StepRecordMembers,
			check: func(t *testing.T, s Step) { expect(t, len(s.Members) == 6, "members %v", s.Members) },
		},
		"a pod joined since the record: record it before anything else": {
			spec: specFor(6),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				delete(c.Snap.Members, "rc-4")
				return c.Snap
			}(), want: StepRecordMembers,
			check: func(t *testing.T, s Step) { expect(t, s.Members["rc-4"] == "eeeeeeee", "members %v", s.Members) },
		},

		// Forming.
		"six new, empty pods and no record: form 3 masters and 3 replicas": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = ""; return s }(), snap: sixNewPods(), want: StepForm,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Create.Masters) == 3 && s.Operation == OpCreating, "%d masters, operation %s", len(s.Create.Masters), s.Operation)
				expect(t, s.Create.NoReadyWait, "the Form step waits for cluster_state:ok, which the next look judges")
			},
		},
		"a restore: form with the backup's slot map, uneven as it is": {
			spec: restoring(specFor(6), nil, ""), snap: sixNewPods(), want: StepForm,
			check: func(t *testing.T, s Step) {
				got := []string{}
				for _, m := range s.Create.Masters {
					got = append(got, nodes.FormatSlotRanges(m.Slots))
				}
				expect(t, strings.Join(got, " ") == "0-99 100-8000,9000-9100 8001-8999,9101-16383", "slots %v", got)
			},
		},
		"a restore whose backup does not fit: wait, saying how to make it fit": {
			spec: func() Desired { s := restoring(specFor(8), nil, ""); s.StatefulSetReplicas = 8; return s }(),
			snap: func() observe.Snapshot {
				s := sixNewPods()
				s.Nodes = append(s.Nodes, s.Nodes[0], s.Nodes[1])
				return uniqueAddrs(s)
			}(), want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "set spec.replicas to 6"), "reason %q", s.Reason)
			},
		},
		"a restore with an unreadable backup: wait, forming nothing": {
			spec: restoring(specFor(6), nil, "the manifest is missing"), snap: sixNewPods(), want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, s.Reason == "cannot restore: the manifest is missing", "reason %q", s.Reason)
			},
		},
		"a restored cluster formed: load every shard into its master at once": {
			spec: restoringSix(specFor(6)), snap: fakesnapshot.Six().Current().Snap, want: StepRestoreShard,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Loads) == 3 && s.Loads[0].Shard == 0 && s.Loads[0].NodeID == "aaaaaaaa" && s.Loads[2].Pod == "rc-2" &&
					nodes.FormatSlotRanges(s.Loads[1].Slots) == "5461-10922" && s.Operation == OpCreating, "loads %+v", s.Loads)
				// Each load names its master's replica (the restore turns its AOF off too).
				masterOf := map[string]string{}
				snap := fakesnapshot.Six().Current().Snap
				for _, o := range snap.Answering() {
					if self, ok := o.Self(); ok {
						masterOf[o.Addr] = self.MasterID
					}
				}
				for _, l := range s.Loads {
					expect(t, len(l.Replicas) == 1 && masterOf[l.Replicas[0]] == l.NodeID, "load of shard %d into %s: replicas %v", l.Shard, l.NodeID, l.Replicas)
				}
			},
		},
		"a restore with two shards loaded: the third": {
			spec: restoringSix(specFor(6), "aaaaaaaa", "bbbbbbbb"), snap: fakesnapshot.Six().Current().Snap, want: StepRestoreShard,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Loads) == 1 && s.Loads[0].Shard == 2 && s.Loads[0].Pod == "rc-2", "loads %+v", s.Loads)
			},
		},
		"a restore with every shard loaded: check every node's AOF before it ends": {
			spec: restoringSix(specFor(6), "aaaaaaaa", "bbbbbbbb", "cccccccc"), snap: fakesnapshot.Six().Current().Snap, want: StepRestoreShard,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Loads) == 0 && len(s.Addrs) == 6 && strings.Contains(s.Reason, "AOF"), "loads %+v, addrs %v, reason %q", s.Loads, s.Addrs, s.Reason)
			},
		},
		"a restore while a master is down: recover first": {
			spec: restoringSix(specFor(6)), snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap, want: StepRecover,
		},
		// Reloading lost slots from a backup.
		"a lost shard and the reload annotation: record the lost slots first": {
			spec: func() Desired { s := specFor(6); s.ReloadFrom = "nightly"; return s }(), snap: fakesnapshot.LostShard(20 * time.Second).Snap, want: StepRecordReload,
			check: func(t *testing.T, s Step) {
				expect(t, nodes.FormatSlotRanges(s.Slots) == "0-5460" && s.Operation == OpHealing, "slots %s", nodes.FormatSlotRanges(s.Slots))
				// The reload from the archive chooses the timelines that served then.
				expect(t, s.LostAt.Equal(fakesnapshot.Now.Add(-20*time.Second)), "lost at %s, want 20 s before the look", s.LostAt)
			},
		},
		"a lost shard with its reload recorded: give it up, as an accepted loss": {
			spec: reloading(specFor(6), [][]nodes.SlotRange{{{Start: 0, End: 5460}}, {{Start: 5461, End: 16383}}}), snap: fakesnapshot.LostShard(20 * time.Second).Snap, want: StepRecover,
			check: func(t *testing.T, s Step) {
				expect(t, s.Action.Kind == recovery.ActionAbandon, "action %s", s.Action.Kind)
			},
		},
		"the lost slots served again: load the backup's shard that holds them": {
			spec: reloading(specFor(6), [][]nodes.SlotRange{{{Start: 0, End: 3000}}, {{Start: 3001, End: 16383}}}), snap: fakesnapshot.Six().Current().Snap, want: StepReloadShard,
			check: func(t *testing.T, s Step) {
				expect(t, s.Shard == 0 && nodes.FormatSlotRanges(s.Slots) == "0-3000" && s.NodeID == "aaaaaaaa", "shard %d slots %s into %s", s.Shard, nodes.FormatSlotRanges(s.Slots), s.NodeID)
			},
		},
		"the first shard loaded: the rest of the lost slots from the second": {
			spec: func() Desired {
				s := reloading(specFor(6), [][]nodes.SlotRange{{{Start: 0, End: 3000}}, {{Start: 3001, End: 16383}}})
				s.Reload.Loaded = []int{0}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepReloadShard,
			check: func(t *testing.T, s Step) {
				expect(t, s.Shard == 1 && nodes.FormatSlotRanges(s.Slots) == "3001-5460", "shard %d slots %s", s.Shard, nodes.FormatSlotRanges(s.Slots))
				// Loaded says [0] as status.reload.loadedShards does: the next one is "shard 1" there and here.
				expect(t, strings.Contains(s.Reason, "from backup nightly's shard 1 into"), "reason %q", s.Reason)
			},
		},
		"every shard holding lost slots loaded: finish": {
			spec: func() Desired {
				s := reloading(specFor(6), [][]nodes.SlotRange{{{Start: 0, End: 3000}}, {{Start: 3001, End: 16383}}})
				s.Reload.Loaded = []int{0, 1}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepFinishReload,
		},
		"a reload that cannot go on, and the loss accepted: give the reload up": {
			spec: func() Desired {
				s := reloading(specFor(6), [][]nodes.SlotRange{{{Start: 0, End: 16383}}})
				s.Reload.Problem = "RedisBackup nightly does not exist"
				s.AcceptDataLoss, s.AcceptAnnotation = true, "accept"
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepAbandonReload,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "accept is set") && strings.Contains(s.Reason, "0-5460 from backup nightly is given up"), "reason %q", s.Reason)
			},
		},
		"the loss accepted with no reload under way: the annotation is spent": {
			spec: func() Desired { s := specFor(6); s.AcceptDataLoss, s.AcceptAnnotation = true, "accept"; return s }(),
			snap: fakesnapshot.Six().Current().Snap, want: StepDropAcceptance,
		},
		"five of six pods answer: wait for the sixth before forming": {
			spec: specFor(6),
			snap: func() observe.Snapshot {
				s := sixNewPods()
				s.Nodes[5].Err, s.Nodes[5].View = fakesnapshot.ErrDown, nil
				return s
			}(), want: StepWait,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "(5 answer)"), "reason %q", s.Reason) },
		},
		"the StatefulSet has 6 pods but only 5 exist: wait": {
			spec: specFor(6), snap: func() observe.Snapshot { s := sixNewPods(); s.Nodes = s.Nodes[:5]; return s }(), want: StepWait,
		},

		// Lost data.
		"every member back empty, just restarted: wait before calling it lost": {
			spec: specFor(6), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				for i := range c.Snap.Nodes {
					c.Snap.Nodes[i].View = []nodes.Node{fakesnapshot.Line(fakesnapshot.Node{ID: fmt.Sprintf("new%d", i)}, fakesnapshot.Addr(i), true)}
					c.Snap.Nodes[i].PodStarted = fakesnapshot.Now.Add(-10 * time.Second)
				}
				return c.Snap
			}(), want: StepWait,
		},
		"every member silent for over a minute: lost, never formed again without the user": {
			spec: func() Desired { s := specFor(6); s.NotReadySince = fakesnapshot.Now.Add(-2 * time.Minute); return s }(), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				for i := range c.Snap.Nodes {
					c.Silence(i, fakesnapshot.ErrDown)
				}
				return c.Snap
			}(), want: StepLost,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "kubectl annotate rediscluster rc redis.middleware-operator.io/accept-data-loss=true"), "reason %q", s.Reason)
			},
		},
		"a lost cluster whose loss is accepted: clear the record": {
			spec: accept(specFor(6)), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				for i := range c.Snap.Nodes {
					c.Snap.Nodes[i].View = []nodes.Node{fakesnapshot.Line(fakesnapshot.Node{ID: fmt.Sprintf("new%d", i)}, fakesnapshot.Addr(i), true)}
				}
				return c.Snap
			}(), want: StepAcceptLostCluster,
		},
		"a whole shard lost: report it, give no slot up": {
			spec: func() Desired { s := specFor(6); s.Coverage = "no"; return s }(), snap: fakesnapshot.LostShard(time.Minute).Current().Snap, want: StepLost,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "5461 slots have no copy left"), "reason %q", s.Reason)
				expect(t, strings.Contains(s.Reason, "the other shards keep serving their slots") && !strings.Contains(s.Reason, "serves nothing"),
					"with cluster-require-full-coverage no the other shards serve, but the reason says %q", s.Reason)
			},
		},
		"a whole shard lost under cluster-require-full-coverage yes: nothing is served": {
			spec: func() Desired { s := specFor(6); s.Coverage = "yes"; return s }(), snap: fakesnapshot.LostShard(time.Minute).Current().Snap, want: StepLost,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "refuses every command"), "reason %q", s.Reason)
			},
		},
		"a whole shard lost and accepted: forget its master": {
			spec: accept(specFor(6)), snap: fakesnapshot.LostShard(time.Minute).Current().Snap, want: StepRecover,
			check: func(t *testing.T, s Step) {
				expect(t, s.Action.Kind == recovery.ActionAbandon, "action %s", s.Action.Kind)
			},
		},
		"a formed cluster with the acceptance still set: spend it": {
			spec: accept(specFor(6)), snap: fakesnapshot.Six().Current().Snap, want: StepDropAcceptance,
		},

		"a generated CA two thirds through its life: start a rotation": {
			spec: generatedCA(fakesnapshot.Now.Add(-time.Second), "", ""), snap: fakesnapshot.Six().Current().Snap, want: StepStartCARotation,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "two thirds"), "reason %q", s.Reason) },
		},
		"a new rotate-ca value starts a rotation of a young CA": {
			spec: generatedCA(fakesnapshot.Now.Add(time.Hour), "2", "1"), snap: fakesnapshot.Six().Current().Snap, want: StepStartCARotation,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, `"2"`), "reason %q", s.Reason) },
		},
		"a young CA whose rotate-ca value was rotated for: nothing to do": {
			spec: generatedCA(fakesnapshot.Now.Add(time.Hour), "1", "1"), snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"a rotation under way starts no other, however old the CA": {
			spec: func() Desired {
				s := rotating("Trust", false, fakesnapshot.Now.Add(time.Second))
				s.GeneratedCA = &GeneratedCA{RenewAt: fakesnapshot.Now.Add(-time.Hour), Token: "3"}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"a CA rotation's stage has lasted its overlap and every node serves its certificate: end the stage": {
			spec: rotating("Trust", false, fakesnapshot.Now.Add(-time.Second)),
			snap: fakesnapshot.Six().Current().Snap, want: StepRotateCA,
			check: func(t *testing.T, s Step) { expect(t, s.CAStage == "Trust", "ends stage %q", s.CAStage) },
		},
		"a CA rotation due, but no node's certificate was checked (no TLS Secret read): the stage goes on": {
			spec: func() Desired {
				s := rotating("Switch", true, fakesnapshot.Now.Add(-time.Second))
				s.CARotation.Checked = false
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"a CA rotation's stage before its overlap has passed: nothing to do yet": {
			spec: rotating("Switch", true, fakesnapshot.Now.Add(time.Second)),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"a CA rotation due while a node still serves the previous stage's certificate: reload it first": {
			spec: rotating("Switch", true, fakesnapshot.Now.Add(-time.Second)),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[3].StaleCertificate = true
				return c.Snap
			}(),
			want: StepReloadCertificates,
		},
		"a CA rotation due while a member does not answer: it may come back with older files, so the stage goes on": {
			spec: rotating("Trust", false, fakesnapshot.Now.Add(-time.Second)),
			snap: fakesnapshot.Six().Current().Silence(4, fakesnapshot.ErrDown).Snap, want: StepWait,
		},
		"a CA rotation due while a node's certificate could not be checked (a handshake timed out): the stage goes on": {
			spec: rotating("Switch", true, fakesnapshot.Now.Add(-time.Second)),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[4].CertificateUnknown = true
				return c.Snap
			}(),
			want: StepIdle,
		},
		"a node serves an old certificate: reload it before any recovery": {
			spec: specFor(6), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[2].StaleCertificate = true
				v := &c.Snap.Nodes[4].View[1]
				v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
				return c.Snap
			}(), want: StepReloadCertificates,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Addrs) == 1 && s.Addrs[0] == fakesnapshot.Addr(2), "reloads %v", s.Addrs)
			},
		},

		// Recoveries and interrupted moves.
		"a member knows a peer at an old address: recover (introduce) first": {
			spec: specFor(6), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				v := &c.Snap.Nodes[4].View[1]
				v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
				return c.Snap
			}(), want: StepRecover,
			check: func(t *testing.T, s Step) {
				expect(t, s.Action.Kind == recovery.ActionMeet && s.Operation == OpHealing, "%s %s", s.Action.Kind, s.Operation)
			},
		},
		"a slot left migrating by an interrupted move: fix it before any other move": {
			spec: specFor(6), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[0].View[0].Migrating = map[int]string{7: "bbbbbbbb"}
				return c.Snap
			}(), want: StepFixSlots,
		},
		"a master's own view gives one of its slots to another master that does not claim it (seen after a cut scale in): FixSlots gives it back": {
			spec: specFor(6), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				self, b := &c.Snap.Nodes[0].View[0], &c.Snap.Nodes[0].View[1] // rc-0's own line and its line for bbbbbbbb
				self.Slots, b.Slots = []nodes.SlotRange{{Start: 0, End: 99}, {Start: 101, End: 5460}}, []nodes.SlotRange{{Start: 100, End: 100}, {Start: 5461, End: 10922}}
				return c.Snap
			}(), want: StepFixSlots,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpHealing && strings.Contains(s.Reason, "1 slots (100)"), "%s: %s", s.Operation, s.Reason)
			},
		},
		"the same slot routed by one view to a master that does not answer: a failover's case, not FixSlots (planFixSlots comes before this wait)": {
			spec: specFor(6), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				self := &c.Snap.Nodes[0].View[0]
				self.Slots = []nodes.SlotRange{{Start: 0, End: 99}, {Start: 101, End: 5460}}
				c.Snap.Nodes[0].View = append(c.Snap.Nodes[0].View, nodes.Node{ID: "gggggggg", Addr: "127.1.9.9:6379", Role: nodes.RoleMaster,
					Flags: []string{"master"}, Slots: []nodes.SlotRange{{Start: 100, End: 100}}})
				return c.Snap
			}(), want: StepWait,
		},
		"a recorded replica does not answer: wait for it before joining anyone": {
			spec: specFor(7), snap: fakesnapshot.Six().Current().Silence(4, fakesnapshot.ErrDown).Fresh("rc-6", "gggggggg", "n1").Snap, want: StepWait,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "rc-4"), "reason %q", s.Reason) },
		},
		"a new pod that is Pending for good does not stop the others": {
			spec: func() Desired { s := specFor(8); return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1")
				c.Snap.Nodes = append(c.Snap.Nodes, observe.Observation{Pod: "rc-7", Err: errors.New("the pod has no IP")})
				return c.Snap
			}(), want: StepJoin,
			check: func(t *testing.T, s Step) { expect(t, s.Pod == "rc-6", "joins %s", s.Pod) },
		},

		// Scale out.
		"scale out by a replica: it joins the master with the fewest replicas, not on its host": {
			spec: specFor(7), snap: fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1").Snap, want: StepJoin,
			check: func(t *testing.T, s Step) {
				// Every master has one replica; cccccccc is on n3 and aaaaaaaa on n1.
				expect(t, s.MasterID == "bbbbbbbb" && s.Seed == fakesnapshot.Addr(0) && s.Addr == fakesnapshot.Addr(6), "replica of %s through %s at %s", s.MasterID, s.Seed, s.Addr)
			},
		},
		"scale out by a shard: the new pod joins as a master first": {
			spec: specFor(8), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1").Fresh("rc-7", "hhhhhhhh", "n2")
				c.Snap.Masters = 4
				return c.Snap
			}(), want: StepJoin,
			check: func(t *testing.T, s Step) {
				expect(t, s.MasterID == "" && s.Pod == "rc-6", "%s replica of %q", s.Pod, s.MasterID)
			},
		},
		"a replica joins in another zone than its master when hosts cannot tell": {
			spec: specFor(7), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n9")
				zones := []string{"z1", "z2", "z2", "z1", "z2", "z1", "z2"}
				for i := range c.Snap.Nodes {
					c.Snap.Nodes[i].Zone = zones[i]
				}
				return c.Snap
			}(), want: StepJoin,
			check: func(t *testing.T, s Step) {
				expect(t, s.MasterID == "aaaaaaaa", "replica of %s, want the master in z1", s.MasterID)
			},
		},
		"an empty new master (AutoReceive): rebalance slots onto it": {
			spec: specFor(7), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().WithNewMaster()
				c.Snap.Masters = 4
				return c.Snap
			}(),
			want: StepRebalance,
			check: func(t *testing.T, s Step) {
				expect(t, s.UseEmptyMasters && s.SlotsLeft > 3000 && s.SlotsLeft < 5000, "use empty %t, %d slots left", s.UseEmptyMasters, s.SlotsLeft)
			},
		},
		"giant slots held: the rebalance onto a new master plans around them": {
			spec: func() Desired {
				s := specFor(7)
				s.HeldSlots = []layout.HeldSlot{{Slot: 0, Source: "aaaaaaaa", Giant: true}, {Slot: 5461, Source: "bbbbbbbb", Giant: true}}
				return s
			}(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().WithNewMaster()
				c.Snap.Masters = 4
				return c.Snap
			}(),
			want: StepRebalance,
			check: func(t *testing.T, s Step) {
				expect(t, slices.Equal(s.Pinned, []int{0, 5461}), "pinned %v, want the held slots", s.Pinned)
			},
		},
		"the new master is full (a slot filled it): no more slots go to it": {
			spec: specFor(7), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().WithNewMaster().Used(97, 97, 97, 50, 50, 50, 96)
				c.Snap.Masters = 4
				return c.Snap
			}(),
			want: StepIdle,
		},
		"AssignReceive with a new empty master: record it as the target first": {
			spec: func() Desired {
				s := specFor(7)
				s.Assign = &Assignment{Strategies: []Strategy{{Slots: 100, From: []string{"aaaaaaaa"}}}}
				return s
			}(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().WithNewMaster()
				c.Snap.Masters = 4
				return c.Snap
			}(),
			want: StepRecordTargets,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Targets) == 1 && s.Targets[0] == "gggggggg", "targets %v", s.Targets)
			},
		},
		"AssignReceive with its targets recorded: move exactly the strategy's slots": {
			spec: func() Desired {
				s := specFor(7)
				s.Assign = &Assignment{Strategies: []Strategy{{Slots: 100, From: []string{"aaaaaaaa"}}}, Targets: []string{"gggggggg"}, Recorded: true}
				return s
			}(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().WithNewMaster()
				c.Snap.Masters = 4
				return c.Snap
			}(),
			want: StepAssign,
			check: func(t *testing.T, s Step) {
				expect(t, s.Reshard.Slots == 100 && s.Reshard.To == "gggggggg" && s.Reshard.From[0] == "aaaaaaaa", "reshard %+v", s.Reshard)
			},
		},
		"AssignReceive resumed after a restart: only the slots still missing": {
			spec: assigning(Strategy{Slots: 100, From: []string{"aaaaaaaa"}}, Strategy{Slots: 50, From: []string{"bbbbbbbb"}}),
			snap: assigned(120), want: StepAssign,
			check: func(t *testing.T, s Step) {
				expect(t, s.Reshard.Index == 1 && s.Reshard.Slots == 30, "reshard %+v, want the 30 slots strategy 1 lacks", s.Reshard)
			},
		},
		"AssignReceive done: nothing more moves, the next spec change starts anew": {
			spec: assigning(Strategy{Slots: 100, From: []string{"aaaaaaaa"}}), snap: assigned(100), want: StepIdle,
		},

		// Scale in.
		"scale in by a shard: drain the leaving master first": {
			spec: func() Desired { s := specFor(6); s.StatefulSetReplicas = 8; return s }(),
			snap: func() observe.Snapshot { c := fakesnapshot.Eight(); return c.Leaving(6).Snap }(), want: StepRebalance,
			check: func(t *testing.T, s Step) {
				w, ok := s.Weights["gggggggg"]
				expect(t, ok && w == 0 && len(s.Weights) == 1, "weights %v", s.Weights)
			},
		},
		"scale in, leaving master drained: remove its replica first": {
			spec: func() Desired { s := specFor(6); s.StatefulSetReplicas = 8; return s }(),
			snap: drained().Snap,
			want: StepRemoveNode,
			check: func(t *testing.T, s Step) {
				expect(t, s.Pod == "rc-7" && s.NodeID == "hhhhhhhh" && s.Seed == fakesnapshot.Addr(0), "removes %s (%s) through %s", s.Pod, s.NodeID, s.Seed)
			},
		},
		"a finished scale in with spec.finalizers foreground: delete the claims it left": {
			spec: func() Desired {
				s := specFor(6)
				s.Volumes.DeleteLeft = true
				s.Volumes.Left = []Claim{{Name: "data-rc-6", Pod: "rc-6", UID: "u6"}, {Name: "data-rc-7", Pod: "rc-7", UID: "u7"}}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepDeleteClaims,
			check: func(t *testing.T, s Step) {
				expect(t, slices.Equal(s.Claims, []string{"data-rc-6", "data-rc-7"}) && s.Operation == OpNone, "claims %v, operation %q", s.Claims, s.Operation)
			},
		},
		"a finished scale in without foreground keeps the claims it left": {
			spec: func() Desired {
				s := specFor(6)
				s.Volumes.Left = []Claim{{Name: "data-rc-6", Pod: "rc-6", UID: "u6"}}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"claims left to delete wait behind a heal": {
			spec: func() Desired {
				s := specFor(6)
				s.Volumes.DeleteLeft = true
				s.Volumes.Left = []Claim{{Name: "data-rc-6", Pod: "rc-6", UID: "u6"}}
				return s
			}(),
			snap: repointing(), want: StepRecover,
		},
		"scale in, every leaving node out of the cluster: shrink the StatefulSet": {
			spec: func() Desired { s := specFor(6); s.StatefulSetReplicas = 8; return s }(),
			snap: func() observe.Snapshot {
				return fakesnapshot.Six().Current().Fresh("rc-6", "x1", "n1").Fresh("rc-7", "x2", "n2").Leaving(6).Snap
			}(),
			want:  StepShrink,
			check: func(t *testing.T, s Step) { expect(t, s.Replicas == 6, "replicas %d", s.Replicas) },
		},
		"a generated certificate that works and is not due: nothing to renew": {
			spec: func() Desired {
				s := specFor(6)
				s.GeneratedCert = &GeneratedCert{RenewAt: fakesnapshot.Now.Add(time.Hour)}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"a generated certificate two thirds through its life is renewed": {
			spec: func() Desired {
				s := specFor(6)
				s.GeneratedCert = &GeneratedCert{RenewAt: fakesnapshot.Now.Add(-time.Minute)}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepRenewCertificate,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "two thirds"), "reason %q", s.Reason) },
		},
		"a generated certificate of a CA rotation's earlier stage is renewed, before a heal": {
			spec: func() Desired {
				s := specFor(6)
				s.GeneratedCert = &GeneratedCert{RenewAt: fakesnapshot.Now.Add(time.Hour), StaleCA: true}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap, want: StepRenewCertificate,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "CA rotation"), "reason %q", s.Reason)
			},
		},
		"a generated certificate due while a shard is lost: renewed first, the loss still waits for the user": {
			spec: func() Desired {
				s := specFor(6)
				s.Coverage, s.GeneratedCert = "no", &GeneratedCert{RenewAt: fakesnapshot.Now.Add(-time.Minute)}
				return s
			}(),
			snap: fakesnapshot.LostShard(time.Minute).Current().Snap, want: StepRenewCertificate,
		},
		"a generated certificate that lacks an external host is renewed": {
			spec: func() Desired {
				s := specFor(6)
				s.GeneratedCert = &GeneratedCert{RenewAt: fakesnapshot.Now.Add(time.Hour), Unnamed: []string{"10.0.0.7"}}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepRenewCertificate,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "10.0.0.7"), "reason %q", s.Reason) },
		},
		"new ACL rules no node was asked about: a node is asked first, the growth waits": {
			spec: scaleOut(func(s *Desired) {
				s.ACLRulesUnchecked, s.TemplateHeld = true, "the new ACL rules were not checked on a node yet"
			}),
			snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap, want: StepCheckACLRules,
		},
		"new ACL rules and no node answers: nothing to ask, the heals go on": {
			spec: func() Desired {
				s := specFor(6)
				s.ACLRulesUnchecked, s.TemplateHeld = true, "the new ACL rules were not checked on a node yet"
				return s
			}(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				for i := range 6 {
					c.Silence(i, fakesnapshot.ErrDown)
				}
				return c.Snap
			}(), want: StepWait,
		},
		"scale out: the StatefulSet grows to spec.replicas first": {
			spec: scaleOut(nil),
			snap: fakesnapshot.Six().Current().Snap, want: StepGrow,
			check: func(t *testing.T, s Step) {
				expect(t, s.Replicas == 8 && s.Operation == OpScaling, "replicas %d, operation %q", s.Replicas, s.Operation)
			},
		},
		"scale out while a master is failed: the new pods are not held back": {
			spec: scaleOut(nil),
			snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap, want: StepGrow,
		},
		"a StatefulSet scaled to 0 by hand grows back to spec.replicas": {
			spec: func() Desired { s := specFor(6); s.StatefulSetReplicas = 0; return s }(),
			snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Snap, want: StepGrow,
		},
		"no StatefulSet yet: the prepare stage makes it, nothing to grow": {
			spec: func() Desired { s := specFor(6); s.StatefulSetReplicas, s.StatefulSetMissing = 0, true; return s }(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
		"scale in done but the template held: the StatefulSet is not shrunk, the wait says why": heldShrink(func(s *Desired) {
			s.TemplateHeld = "spec.acl.users[0].rules: Redis refused +nosuchcommand"
		}, "+nosuchcommand"),
		"scale in done but the version unsupported: the StatefulSet is not shrunk (a write would carry the refused image)": heldShrink(func(s *Desired) {
			s.Refused = "spec.version names Redis 6.2"
		}, "Redis 6.2"),
		"scale out with ACL rules a node refused: the StatefulSet is not written, the wait says why": {
			spec: scaleOut(func(s *Desired) { s.TemplateHeld = "spec.acl.users[0].rules: Redis refused +nosuchcommand" }),
			snap: fakesnapshot.Six().Current().Snap, want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpScaling && strings.Contains(s.Reason, "8 pods") && strings.Contains(s.Reason, "+nosuchcommand"), "%s: %q", s.Operation, s.Reason)
			},
		},
		"scale out of an unsupported version: the StatefulSet is not written, the wait says why": {
			spec: scaleOut(func(s *Desired) { s.Refused = "spec.version names Redis 6.2" }),
			snap: fakesnapshot.Six().Current().Snap, want: StepWait,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "Redis 6.2"), "reason %q", s.Reason) },
		},
		"a held scale out does not hold a heal back": {
			spec: scaleOut(func(s *Desired) { s.TemplateHeld = "spec.acl.users[0].rules: Redis refused +nosuchcommand" }),
			snap: fakesnapshot.Six().Current().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap, want: StepRecover,
		},
		"scale in, a leaving member silent: wait for it before removing anyone": {
			spec: func() Desired { s := specFor(6); s.StatefulSetReplicas = 8; return s }(),
			snap: drained().Silence(7, fakesnapshot.ErrDown).Snap, want: StepWait,
			check: func(t *testing.T, s Step) { expect(t, strings.Contains(s.Reason, "rc-7"), "reason %q", s.Reason) },
		},

		// Upgrade.
		"an upgrade replaces a replica first": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; return s }(), snap: fakesnapshot.Six().Current().Snap, want: StepReplacePod,
			check: func(t *testing.T, s Step) {
				expect(t, s.Pod == "rc-3" && s.Operation == OpUpgrading, "replaces %s (%s)", s.Pod, s.Operation)
			},
		},
		"an upgrade with only masters left: a replica takes over first": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				for i := 3; i < 6; i++ {
					c.Snap.Nodes[i].Revision = "r2"
				}
				return c.Snap
			}(), want: StepFailover,
			check: func(t *testing.T, s Step) {
				expect(t, s.Pod == "rc-0" && s.Addr == fakesnapshot.Addr(3), "%s taken over by %s", s.Pod, s.Addr)
			},
		},
		"an upgrade while a pod terminates: wait": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[3].Terminating = true
				return c.Snap
			}(), want: StepWait,
			check: func(t *testing.T, s Step) { expect(t, s.Operation == OpUpgrading, "operation %s", s.Operation) },
		},
		"an upgrade while the pod replaced last runs, serves, but is not Ready to Kubernetes yet: wait": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[3].Revision = "r2"
				c.Snap.Nodes[3].Unready = true
				return c.Snap
			}(), want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpUpgrading && strings.Contains(s.Reason, "rc-3 to be Ready"), "operation %s, reason %q", s.Operation, s.Reason)
			},
		},
		"an upgrade while the cluster is not Ready: wait": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[4].Replication["master_link_status"] = "down"
				return c.Snap
			}(), want: StepWait,
		},
		"a step of no operation during an upgrade is shown as part of the upgrade, its reason kept": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; s.MembersRecorded = false; return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[5].Revision = "r2"
				return c.Snap
			}(), want: StepRecordMembers,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpUpgrading && s.Reason == "5 of 6 pods run an old template; recording 6 members",
					"operation %q, reason %q", s.Operation, s.Reason)
			},
		},
		"a heal during an upgrade is shown as the heal": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r2"; return s }(),
			snap: repointing(), want: StepRecover,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpHealing && !strings.Contains(s.Reason, "old template"), "operation %q, reason %q", s.Operation, s.Reason)
			},
		},
		"a side step during an upgrade: what is behind it is shown as the upgrade, the side step unchanged": {
			spec: func() Desired {
				s := specFor(6)
				s.UpdateRevision, s.Coverage, s.MembersRecorded = "r2", "no", false
				return s
			}(),
			snap: fakesnapshot.Six().Current().Stale(0).Snap, want: StepSetCoverage,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpNone && !strings.Contains(s.Reason, "old template") && s.Behind != nil && s.Behind.Kind == StepRecordMembers &&
					s.Shown().Operation == OpUpgrading && s.Shown().Reason == "6 of 6 pods run an old template; recording 6 members",
					"operation %q, reason %q, shown %q %q", s.Operation, s.Reason, s.Shown().Operation, s.Shown().Reason)
			},
		},
		"an idle cluster whose pods all run the update revision shows no operation": {
			spec: func() Desired { s := specFor(6); s.UpdateRevision = "r1"; return s }(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
			check: func(t *testing.T, s Step) {
				expect(t, s.Operation == OpNone && s.Reason == "", "operation %q, reason %q", s.Operation, s.Reason)
			},
		},
		"an upgrade of masters without replicas: replace the master itself": {
			spec: func() Desired { s := specFor(3); s.UpdateRevision = "r2"; return s }(),
			snap: func() observe.Snapshot { c := fakesnapshot.ThreeShards(3, 0).Current(); return c.Snap }(), want: StepReplacePod,
			check: func(t *testing.T, s Step) { expect(t, s.Pod == "rc-0", "replaces %s", s.Pod) },
		},
		"an upgrade of a master whose replica is gone: wait for a connected one": {
			spec: func() Desired { s := specFor(4); s.UpdateRevision = "r2"; return s }(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.ThreeShards(3, 1, fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"}).Current()
				c.Snap.Nodes[3].Revision = "r2"
				c.Each("dddddddd", func(n *nodes.Node) { n.Failed = true })
				return c.Snap
			}(), want: StepWait,
		},
	}
	kinds := map[StepKind]bool{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := nextStepSeen(tc.spec, tc.snap, health.Assess(tc.snap))
			if got.Kind != tc.want {
				t.Fatalf("step %s (%s), want %s", got.Kind, got.Reason, tc.want)
			}
			if got.Kind != StepIdle && got.Reason == "" {
				t.Errorf("step %s has no reason", got.Kind)
			}
			if got.After <= 0 {
				t.Errorf("step %s says to look again after %s", got.Kind, got.After)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
		kinds[tc.want] = true
	}
	for _, k := range []StepKind{StepIdle, StepWait, StepLost, StepRecordMembers, StepAcceptLostCluster, StepDropAcceptance, StepForm,
		StepRecover, StepFixSlots, StepJoin, StepRecordTargets, StepAssign, StepRebalance, StepRemoveNode, StepShrink, StepGrow, StepRenewCertificate, StepCheckACLRules, StepFailover, StepReplacePod,
		StepReloadCertificates, StepRotateCA, StepRestoreShard, StepRecordReload, StepReloadShard, StepFinishReload, StepAbandonReload} {
		if !kinds[k] {
			t.Errorf("no case chooses %s", k)
		}
	}
}

// TestNextStepAutoscale checks where the autoscaler sits in NextStep: it acts only when
// nothing else is to be done, its decision rides on every step (keeping its clocks), and a
// memory rebalance's weights steer the slot moves only while they name every master.
func TestNextStepAutoscale(t *testing.T) {
	a := &autoscale.Settings{TargetPercent: 70, MinMasters: 3, MaxMasters: 5, Sustain: 5 * time.Minute, CoolDown: 10 * time.Minute}
	above := func(s Desired) Desired {
		s.Autoscale, s.AutoscaleState = a, autoscale.State{AboveSince: fakesnapshot.Now.Add(-time.Hour)}
		return s
	}
	full := func(c *fakesnapshot.Cluster) observe.Snapshot { return c.Used(80, 75, 72, 80, 75, 72).Snap }
	cases := map[string]struct {
		spec  Desired
		snap  observe.Snapshot
		want  StepKind
		phase autoscale.Phase
		check func(t *testing.T, s Step)
	}{
		"full for long and nothing else to do: the autoscale step adds a shard": {
			spec: above(specFor(6)), snap: full(fakesnapshot.Six().Current()), want: StepAutoscale, phase: autoscale.PhaseScalingOut,
			check: func(t *testing.T, s Step) {
				expect(t, s.Autoscale.Masters == 4 && s.Operation == OpScaling && s.After == LookSoon, "masters %d, operation %s, after %s", s.Autoscale.Masters, s.Operation, s.After)
			},
		},
		"no autoscale: idle however full": {
			spec: specFor(6), snap: full(fakesnapshot.Six().Current()), want: StepIdle,
			check: func(t *testing.T, s Step) { expect(t, s.Autoscale == nil, "decision %+v", s.Autoscale) },
		},
		"full, but a pod to join first: the join, and the autoscaler waits with its clock": {
			spec: above(specFor(7)), snap: full(fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1")), want: StepJoin, phase: autoscale.PhaseWaiting,
			check: func(t *testing.T, s Step) {
				expect(t, s.Autoscale.State.AboveSince.Equal(fakesnapshot.Now.Add(-time.Hour)), "the clock was reset: %+v", s.Autoscale.State)
				expect(t, strings.Contains(s.Autoscale.Reason, "Join"), "reason %q", s.Autoscale.Reason)
			},
		},
		"full, but a backup under way: idle, the autoscaler waits": {
			spec: func() Desired { s := above(specFor(6)); s.Busy = "backup nightly is under way"; return s }(), snap: full(fakesnapshot.Six().Current()), want: StepIdle, phase: autoscale.PhaseWaiting,
		},
		"below the target: idle": {
			spec: above(specFor(6)), snap: fakesnapshot.Six().Current().Used(30, 30, 30, 30, 30, 30).Snap, want: StepIdle, phase: autoscale.PhaseBelowTarget,
		},
		"weights naming every master steer the slot moves": {
			spec: func() Desired {
				s := specFor(6)
				s.SlotWeights = map[string]float64{"aaaaaaaa": 1, "bbbbbbbb": 2, "cccccccc": 2}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepRebalance,
			check: func(t *testing.T, s Step) {
				expect(t, s.Weights["aaaaaaaa"] == 1 && s.Weights["bbbbbbbb"] == 2, "weights %v", s.Weights)
			},
		},
		"weights that miss a master are stale: even slots, nothing to move": {
			spec: func() Desired {
				s := specFor(6)
				s.SlotWeights = map[string]float64{"aaaaaaaa": 1, "bbbbbbbb": 2}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			step := nextStepSeen(tc.spec, tc.snap, health.Assess(tc.snap))
			if step.Kind != tc.want {
				t.Fatalf("step %s (%s), want %s", step.Kind, step.Reason, tc.want)
			}
			if tc.phase != "" && (step.Autoscale == nil || step.Autoscale.Phase != tc.phase) {
				t.Errorf("autoscale decision %+v, want phase %s", step.Autoscale, tc.phase)
			}
			if tc.check != nil {
				tc.check(t, step)
			}
		})
	}
}

func expect(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}

// sixNewPods is six new, empty, running pods on hosts n1..n3 and nothing recorded.
func sixNewPods() observe.Snapshot {
	c := &fakesnapshot.Cluster{Snap: observe.Snapshot{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: 5 * time.Second, Now: fakesnapshot.Now, Members: map[string]string{}}}
	for i := range 6 {
		c.Fresh(fmt.Sprintf("rc-%d", i), fmt.Sprintf("%08d", i), fmt.Sprintf("n%d", i%3+1))
	}
	return c.Snap
}

// drained is fakesnapshot.Eight() scaling in to six pods, with the leaving master
// gggggggg's slots spread over the three staying masters.
func drained() *fakesnapshot.Cluster {
	c := fakesnapshot.Eight().Leaving(6)
	c.Each("gggggggg", func(n *nodes.Node) { n.Slots = nil })
	c.Each("aaaaaaaa", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: 0, End: 5460}} })
	c.Each("bbbbbbbb", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: 5461, End: 10922}} })
	c.Each("cccccccc", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: 10923, End: 16383}} })
	return c
}

// assigning is the spec of an AssignReceive scale out to seven pods with strategies, its
// target gggggggg recorded.
func assigning(strategies ...Strategy) Desired {
	s := specFor(7)
	s.Assign = &Assignment{Strategies: strategies, Targets: []string{"gggggggg"}, Recorded: true}
	return s
}

// assigned is six() with the new master gggggggg joined, holding aaaaaaaa's first moved slots.
func assigned(moved int) observe.Snapshot {
	c := fakesnapshot.Six().WithNewMaster()
	c.Snap.Masters = 4
	if moved > 0 {
		c.Each("aaaaaaaa", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: moved, End: 5460}} })
		c.Each("gggggggg", func(n *nodes.Node) { n.Slots = []nodes.SlotRange{{Start: 0, End: moved - 1}} })
	}
	return c.Snap
}

// nextStepCase is a row of TestNextStep: the step NextStep plans for spec and snap.
type nextStepCase struct {
	spec Desired
	snap observe.Snapshot
	want StepKind
	// check, when set, looks at the step beyond its kind.
	check func(t *testing.T, s Step)
}

// heldShrink is a row of a scale in from 8 to 6 pods whose leaving nodes are out of the
// cluster while hold keeps the StatefulSet from being written: a wait whose reason names
// the hold (says).
func heldShrink(hold func(*Desired), says string) nextStepCase {
	spec := specFor(6)
	spec.StatefulSetReplicas = 8
	hold(&spec)
	return nextStepCase{
		spec: spec, want: StepWait,
		snap: fakesnapshot.Six().Current().Fresh("rc-6", "x1", "n1").Fresh("rc-7", "x2", "n2").Leaving(6).Snap,
		check: func(t *testing.T, s Step) {
			expect(t, strings.Contains(s.Reason, says), "reason %q, want it to name %q", s.Reason, says)
		},
	}
}
