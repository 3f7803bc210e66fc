package autoscale

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// Settings is an opt-in memory autoscaler in the planner's terms: keep the fullest
// master's used memory below TargetPercent of its maxmemory by adding a shard (a master with
// its replicas), between MinMasters and MaxMasters masters.
type Settings struct {
	// TargetPercent is the share of maxmemory the fullest master should stay below.
	TargetPercent int
	// MinMasters and MaxMasters bound the number of masters.
	MinMasters, MaxMasters int
	// Sustain is how long the masters must stay past a threshold before anything is done,
	// so a burst is not a reason to scale.
	Sustain time.Duration
	// CoolDown is how long after a change (a shard added or removed, a rebalance) nothing
	// else is changed: the slot moves and the new nodes' memory settle first.
	CoolDown time.Duration
	// ScaleIn opts in to removing a shard when the data would fit in one master fewer with
	// room to spare (below ScaleInPercent of the target once spread over one master fewer).
	ScaleIn bool
}

// scaleInPercent is how far below the target the masters must stay, once their data is
// spread over one master fewer, for a scale in: the gap keeps a scale in from being
// followed by a scale out.
const scaleInPercent = 80

// unevenPercent: when the average master is below this share of the target while the
// fullest is past it, the shards are uneven (a hot master): rebalancing slots by memory
// relieves it without a new shard.
const unevenPercent = 75

// State is what the autoscaler remembers between looks (the status holds it).
type State struct {
	// AboveSince is since when the fullest master has been past the target (zero: it is not).
	AboveSince time.Time
	// BelowSince is since when the masters would fit in one fewer (zero: they would not).
	BelowSince time.Time
	// LastChange is when the autoscaler last changed the cluster.
	LastChange time.Time
	// Held are the slots slot moves held as too big to move (MoveStats.Held), as recorded
	// in the status; Decide reads them and does not write them back.
	Held []layout.HeldSlot
}

// Kind is what the autoscaler decides.
type Kind string

// The autoscaler's decisions.
const (
	// None: nothing to do (Reason says why, for the status).
	None Kind = "None"
	// Wait: the cluster is busy (Reason says with what); the clocks keep running.
	Wait Kind = "Wait"
	// Out: ask for Masters masters, one shard more.
	Out Kind = "ScaleOut"
	// In: ask for Masters masters, one shard fewer.
	In Kind = "ScaleIn"
	// Rebalance: move slots by Weights (by master ID), so each master's share of
	// the data follows its weight.
	Rebalance Kind = "Rebalance"
)

// Phase is where the autoscaler stands after a look, for the status; its values
// are the RedisCluster's status.autoscale.phase values.
type Phase string

// The autoscaler's phases.
const (
	PhaseBelowTarget Phase = "BelowTarget"
	PhaseAboveTarget Phase = "AboveTarget"
	PhaseCoolingDown Phase = "CoolingDown"
	PhaseAtMaximum   Phase = "AtMaximum"
	PhaseAtMinimum   Phase = "AtMinimum"
	PhaseWaiting     Phase = "Waiting"
	PhaseNoMaxMemory Phase = "NoMaxMemory"
	PhaseScalingOut  Phase = "ScalingOut"
	PhaseScalingIn   Phase = "ScalingIn"
	PhaseRebalancing Phase = "Rebalancing"
	// PhaseSlotTooBig: the fullest master is past the target with held slots that alone
	// keep it there: neither a new shard nor a rebalance can relieve it.
	PhaseSlotTooBig Phase = "SlotTooBig"
)

// Decision is one look's decision and the state to remember after it.
type Decision struct {
	Kind Kind
	// Phase is where the autoscaler stands, for the status.
	Phase Phase
	// Masters is the number of masters to ask for (the current number unless scaling).
	Masters int
	// Weights are Rebalance's slot weights by master ID.
	Weights map[string]float64
	// Reason says why, for the event and the status.
	Reason string
	// State is what to remember after this look.
	State State
}

// masterMemory is one master serving slots, with its memory.
type masterMemory struct {
	id     string
	pod    string
	slots  int
	memory observe.NodeMemory
}

// Decide decides whether to add or remove a shard, or rebalance, from the memory of
// the masters in s (INFO memory as observed), what was remembered (st) and busy (why the
// cluster must not change now: a backup, an upgrade, a rotation, a recovery; "" when
// nothing is under way). It is pure: its only clock is s.Now.
//
// Past the target for Sustain, and CoolDown after the last change: if the other masters
// have room (their average is below unevenPercent of the target), the slots are
// rebalanced by memory; else a shard is added, never beyond MaxMasters. With ScaleIn, when
// the data would stay below scaleInPercent of the target with one master fewer for
// Sustain, one is removed, never below MinMasters. Nothing changes while the cluster is
// busy or not healthy, or while the masters are not what the spec asks (a scale under way).
func Decide(a Settings, st State, s observe.Snapshot, h health.Health, busy string) Decision {
	masters := mastersMemory(s)
	d := Decision{Kind: None, Masters: s.Masters, State: st}
	switch {
	case busy != "":
		d.Kind, d.Phase, d.Reason = Wait, PhaseWaiting, "not scaling while "+busy
		return d
	case !h.Ready() || len(h.Silent) > 0:
		d.Kind, d.Phase, d.Reason = Wait, PhaseWaiting, "not scaling while the cluster is not healthy"
		return d
	case len(masters) != s.Masters:
		d.Kind, d.Phase, d.Reason = Wait, PhaseWaiting, fmt.Sprintf("not scaling while %d masters serve slots and the spec asks for %d", len(masters), s.Masters)
		return d
	}
	var used, capacity int64
	fullest := masters[0]
	for _, m := range masters {
		if m.memory.MaxMemory <= 0 {
			d.State, d.Phase, d.Reason = State{LastChange: st.LastChange}, PhaseNoMaxMemory, "master "+m.pod+" has no maxmemory: nothing to scale on"
			return d
		}
		used, capacity = used+m.memory.Used, capacity+m.memory.MaxMemory
		if share(m.memory) > share(fullest.memory) {
			fullest = m
		}
	}
	target := float64(a.TargetPercent) / 100
	top := share(fullest.memory)
	average := float64(used) / float64(capacity)
	// Spread over one master fewer (each with the average maxmemory).
	fewer := 2.0
	if n := len(masters); n > 1 {
		fewer = float64(used) / (float64(capacity) * float64(n-1) / float64(n))
	}
	cooling := !st.LastChange.IsZero() && s.Now.Sub(st.LastChange) < a.CoolDown

	if top < target {
		d.State.AboveSince = time.Time{}
	} else if d.State.AboveSince.IsZero() {
		d.State.AboveSince = s.Now
	}
	if !a.ScaleIn || fewer >= target*scaleInPercent/100 {
		d.State.BelowSince = time.Time{}
	} else if d.State.BelowSince.IsZero() {
		d.State.BelowSince = s.Now
	}

	stuck := stuckOn(s, fullest, target, st.Held)
	switch {
	case !d.State.AboveSince.IsZero():
		over := s.Now.Sub(d.State.AboveSince)
		what := fmt.Sprintf("master %s uses %.0f%% of its maxmemory, past the target %d%%", fullest.pod, top*100, a.TargetPercent)
		switch {
		case over < a.Sustain:
			d.Phase, d.Reason = PhaseAboveTarget, fmt.Sprintf("%s for %s; acting after %s", what, over.Round(time.Second), a.Sustain)
		case cooling:
			d.Phase, d.Reason = PhaseCoolingDown, fmt.Sprintf("%s; cooling down until %s after the last change", what, st.LastChange.Add(a.CoolDown).UTC().Format(time.RFC3339))
		case stuck != "":
			d.Phase, d.Reason = PhaseSlotTooBig, what+", but "+stuck
		case average < target*unevenPercent/100:
			d.Kind, d.Phase, d.Weights = Rebalance, PhaseRebalancing, memoryWeights(masters)
			d.Reason = fmt.Sprintf("%s while the masters average %.0f%%: moving slots away from it by memory", what, average*100)
			d.State = State{LastChange: s.Now}
		case len(masters) >= a.MaxMasters:
			d.Phase, d.Reason = PhaseAtMaximum, fmt.Sprintf("%s, but the cluster has the maximum of %d masters", what, a.MaxMasters)
		default:
			d.Kind, d.Phase, d.Masters = Out, PhaseScalingOut, len(masters)+1
			d.Reason = fmt.Sprintf("%s for %s: adding a shard (%d masters)", what, over.Round(time.Second), d.Masters)
			d.State = State{LastChange: s.Now}
		}
	case !d.State.BelowSince.IsZero():
		under := s.Now.Sub(d.State.BelowSince)
		what := fmt.Sprintf("the data would use %.0f%% of maxmemory on one master fewer", fewer*100)
		switch {
		case len(masters) <= a.MinMasters:
			d.Phase, d.Reason = PhaseAtMinimum, fmt.Sprintf("%s, but the cluster has the minimum of %d masters", what, a.MinMasters)
		case under < a.Sustain:
			d.Phase, d.Reason = PhaseBelowTarget, fmt.Sprintf("%s for %s; acting after %s", what, under.Round(time.Second), a.Sustain)
		case cooling:
			d.Phase, d.Reason = PhaseCoolingDown, fmt.Sprintf("%s; cooling down until %s after the last change", what, st.LastChange.Add(a.CoolDown).UTC().Format(time.RFC3339))
		default:
			d.Kind, d.Phase, d.Masters = In, PhaseScalingIn, len(masters)-1
			d.Reason = fmt.Sprintf("%s for %s: removing a shard (%d masters)", what, under.Round(time.Second), d.Masters)
			d.State = State{LastChange: s.Now}
		}
	default:
		d.Phase, d.Reason = PhaseBelowTarget, fmt.Sprintf("the fullest master (%s) uses %.0f%% of its maxmemory, below the target %d%%", fullest.pod, top*100, a.TargetPercent)
	}
	return d
}

// share is used memory as a share of maxmemory.
func share(m observe.NodeMemory) float64 {
	if m.MaxMemory <= 0 {
		return 0
	}
	return float64(m.Used) / float64(m.MaxMemory)
}

// mastersMemory are the answering masters that serve slots, with their memory.
func mastersMemory(s observe.Snapshot) []masterMemory {
	var out []masterMemory
	for _, o := range s.Joined() {
		self, ok := o.Self()
		if !ok || !self.IsMaster() || len(self.Slots) == 0 {
			continue
		}
		out = append(out, masterMemory{id: self.ID, pod: o.Pod, slots: nodes.CountSlots(self.Slots), memory: observe.MemoryOf(o)})
	}
	return out
}

// memoryWeights weighs each master by how many slots' worth of data its maxmemory holds at
// its current density (slots per byte used, times maxmemory): a master whose slots hold more
// data gets fewer of them, so that every master ends near the same share.
func memoryWeights(masters []masterMemory) map[string]float64 {
	out := map[string]float64{}
	for _, m := range masters {
		used := max(m.memory.Used, 1)
		out[m.id] = float64(m.slots) / float64(used) * float64(m.memory.MaxMemory)
	}
	return out
}

// stuckOn says why no slot move can bring master m below target (a share of its
// maxmemory) when the giant held slots it serves alone hold at least that much; ""
// otherwise.
func stuckOn(s observe.Snapshot, m masterMemory, target float64, held []layout.HeldSlot) string {
	o := s.ByID()[m.id]
	if o == nil || len(held) == 0 {
		return ""
	}
	self, _ := o.Self()
	var bytes int64
	var names []string
	for _, h := range held {
		if h.Giant && nodes.OwnsSlot(self, h.Slot) {
			bytes += h.Size.Bytes
			names = append(names, fmt.Sprintf("%d (%d keys, about %s)", h.Slot, h.Size.Keys, layout.FormatBytes(h.Size.Bytes)))
		}
	}
	if len(names) == 0 || float64(bytes) < target*float64(m.memory.MaxMemory) {
		return ""
	}
	return fmt.Sprintf("its slots %s are too big to move and alone hold %.0f%% of its maxmemory: adding shards cannot relieve it; "+
		"a larger memory limit, a higher maxMemoryPercent or fewer keys under one hash tag would",
		strings.Join(names, ", "), float64(bytes)*100/float64(m.memory.MaxMemory))
}
