package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
)

// How soon the controller looks again after a step, by what it waits for.
const (
	// LookSoon: a step acted, or Redis servers are starting (a server answering is not a
	// Kubernetes event).
	LookSoon = time.Second
	// lookNext: a side step whose effect the operator records as it acts (a setting it
	// remembers per node process), so the step it stood in front of can come at once: a new
	// cluster's Form, 0.9 s sooner than after LookSoon. The act falls back to LookSoon when
	// a node was left out (setCoverage).
	lookNext = 100 * time.Millisecond
	// lookForPods: pods that do not answer (Pending, starting, held by their start guard).
	lookForPods = 5 * time.Second
	// LookIdle: a formed cluster's nodes are read again this often: a failover or a crashed
	// node is not a Kubernetes event.
	LookIdle = 10 * time.Second
	// LookSteady: a cluster found Ready with nothing to do is read whole again this often,
	// while the prober finds every node's CLUSTER INFO unchanged between (what only a full
	// look reads, memory, key counts, replication offsets, is then up to this old). With
	// spec.autoscale the memory it scales on is read every LookIdle instead.
	LookSteady = time.Minute
	// lostAfter is how long every recorded member must stay silent or empty after its pod
	// started before the cluster is called lost (pods restarting together are not).
	lostAfter = time.Minute
)

// IdleLook is how soon a cluster with nothing to do is read again: half cluster-node-timeout
// (2.5 s with the shipped 5000 ms), at most LookIdle. Redis flags a cut-off master failing
// after one node timeout and fails it over about half a node timeout later; a look in
// between says so before a second master claims its slots (docs/rediscluster.md, Network
// partitions).
func IdleLook(nodeTimeout time.Duration) time.Duration {
	if nodeTimeout <= 0 {
		return LookIdle
	}
	return min(LookIdle, nodeTimeout/2)
}

// Operation names the lifecycle operation a step belongs to; the status shows it as the
// phase. Its values are the RedisCluster phases of the same name.
type Operation string

// The operations of NextStep.
const (
	OpNone      Operation = ""
	OpCreating  Operation = "Creating"
	OpScaling   Operation = "Scaling"
	OpUpgrading Operation = "Upgrading"
	OpHealing   Operation = "Healing"
)

// StepKind names what one step does.
type StepKind string

// The steps NextStep chooses from. Every acting step is one bounded thing; after it the
// controller looks again.
const (
	// StepIdle: the topology is what the spec asks; nothing to do but look again later.
	StepIdle StepKind = "Idle"
	// StepWait: something must happen first (pods must start, a node must answer); Reason
	// says what.
	StepWait StepKind = "Wait"
	// StepLost: the data of the cluster, or of some of its slots, is gone and the user has
	// not accepted the loss; Reason says what is lost and how to accept it.
	StepLost StepKind = "Lost"
	// StepRecordMembers writes Members as the member record.
	StepRecordMembers StepKind = "RecordMembers"
	// StepAcceptLostCluster clears the member record of a lost cluster the user accepted to
	// lose, so that a new, empty one can be formed.
	StepAcceptLostCluster StepKind = "AcceptLostCluster"
	// StepDropAcceptance removes the accept-data-loss annotation once it is spent.
	StepDropAcceptance StepKind = "DropAcceptance"
	// StepForm forms the cluster with Create.
	StepForm StepKind = "Form"
	// StepRecover runs Action (a recovery of recovery.Recover, or recovery.Abandon's once accepted,
	// which also spends the annotation).
	StepRecover StepKind = "Recover"
	// StepFixSlots finishes or rolls back slot moves an interruption left open.
	StepFixSlots StepKind = "FixSlots"
	// StepJoin adds the node Pod at Addr through Seed, as a replica of MasterID ("" for a
	// master).
	StepJoin StepKind = "Join"
	// StepRecordTargets records Targets, the empty masters an AssignReceive scale out fills,
	// in the status before any slot moves.
	StepRecordTargets StepKind = "RecordTargets"
	// StepAssign moves a batch of Reshard's slots (AssignReceive).
	StepAssign StepKind = "Assign"
	// StepRebalance moves a batch of slots by Rebalance's weights.
	StepRebalance StepKind = "Rebalance"
	// StepRemoveNode removes the node NodeID of Pod from the cluster, through Seed.
	StepRemoveNode StepKind = "RemoveNode"
	// StepShrink scales the StatefulSet down to Replicas once the leaving nodes are out.
	StepShrink StepKind = "Shrink"
	// StepGrow scales the StatefulSet up to Replicas, the pods spec.replicas asks for (a
	// scale out's new pods; they join once they answer).
	StepGrow StepKind = "Grow"
	// StepFailover makes the replica at Addr take over from the master of Pod, before Pod
	// is replaced.
	StepFailover StepKind = "Failover"
	// StepReplacePod deletes Pod, which runs an old template, so it comes back on the new one.
	StepReplacePod StepKind = "ReplacePod"
	// StepRestoreShard loads each of Loads (a backup's shard into the master serving its
	// slots) at once. Was: the backup's shard Shard (its slots Slots) into the master
	// NodeID at Addr, which serves them.
	StepRestoreShard StepKind = "RestoreShard"
	// StepRecordReload records Slots, the lost slots, as the ones to reload from the backup
	// Desired.ReloadFrom names, before they are given up.
	StepRecordReload StepKind = "RecordReload"
	// StepReloadShard loads the keys of the backup's shard Shard that are in Slots (lost
	// slots) into the master NodeID at Addr, which serves them again.
	StepReloadShard StepKind = "ReloadShard"
	// StepFinishReload ends a reload of lost slots: every shard of the backup holding some
	// of them is loaded.
	StepFinishReload StepKind = "FinishReload"
	// StepAbandonReload gives up a reload under way because the user set the
	// accept-data-loss annotation (a backup that cannot be read, a FLUSHALL in the archive's
	// window): the lost slots stay as they are, served, with what was loaded of them.
	StepAbandonReload StepKind = "AbandonReload"
	// StepReloadCertificates makes the nodes at Addrs, which serve an old certificate, read
	// their certificate files again.
	StepReloadCertificates StepKind = "ReloadCertificates"
	// StepAutoscale carries out Autoscale's decision to add or remove a shard, or to move
	// slots by memory: the controller records it (the number of masters, the slot
	// weights) and the steps of a scale follow from the next look.
	StepAutoscale StepKind = "Autoscale"
)

// Step is the one thing NextStep decides to do next, with what it needs to do it and why.
type Step struct {
	Kind StepKind
	// Operation is the lifecycle operation the step belongs to (OpNone for none).
	Operation Operation
	// Reason says, for the status and the log, why this step, or what a wait waits for.
	Reason string
	// After is when to look again.
	After time.Duration

	// Members is StepRecordMembers' record.
	Members map[string]string
	// Create is StepForm's plan.
	Create layout.Plan
	// Action is StepRecover's recovery.
	Action recovery.Action
	// Pod, Addr, Seed, MasterID and NodeID: the node a join, removal, failover or
	// replacement is about (see each kind).
	Pod, Addr, Seed, MasterID, NodeID string
	// Targets are StepRecordTargets' empty masters.
	Targets []string
	// Reshard is StepAssign's batch.
	Reshard Reshard
	// Weights, UseEmptyMasters, Pinned and SlotsLeft describe StepRebalance's moves.
	Weights         map[string]float64
	UseEmptyMasters bool
	Pinned          []int
	SlotsLeft       int
	// Moves are StepRebalance's and StepAssign's slot moves as planned from the snapshot
	// (held slots pinned, full targets skipped): the controller executes exactly these
	// (Admin.MoveSlots), a budget's worth a step.
	Moves []layout.Move
	// DrainHeld, on a Wait of a scale in, are the held slots that keep a leaving master
	// from emptying (drainBlocked): the scale in stays where it is until they fit somewhere.
	DrainHeld []layout.HeldSlot
	// Replicas is StepShrink's and StepGrow's StatefulSet size.
	Replicas int
	// Credential indexes Desired.Rotation.Credentials for a rotation step; Record is what
	// StepWriteRecord writes; Addrs the nodes StepAddPassword and StepKeepOnlyPassword
	// change, and the nodes whose AOF StepRestoreShard checks at the restore's end.
	Credential int
	Record     AppliedRecord
	Addrs      []string
	// Shard and Slots are StepReloadShard's shard index and its slots; Loads
	// StepRestoreShard's shards.
	Shard int
	Slots []nodes.SlotRange
	Loads []ShardLoad
	// LostAt is, for StepRecordReload, when the lost masters were last heard from (the
	// earliest of them; zero when unknown).
	LostAt time.Time
	// Rotation is the state of password rotations whatever the step: RotationCurrent, what
	// a rotation under way waits for, or "" when they were not looked at.
	Rotation string
	// Memory is what StepSetMemory sets on the nodes at Addrs, Coverage what
	// StepSetCoverage sets.
	Memory   Memory
	Coverage string
	// WriteSafety is what StepSetWriteSafety sets on the nodes at Addrs.
	WriteSafety WriteSafety
	// Hostname is what StepAnnounce announces.
	Hostname string
	// CAStage is the stage StepRotateCA ends.
	CAStage string
	// Claims are the claims StepGrowClaims grows to Desired.Volumes.Want, or those
	// StepDeleteClaims deletes.
	Claims []string
	// Behind is, for a side step that comes first (StepSetCoverage), the step the planners
	// would take next: what is under way, which the status reports (see Shown).
	Behind *Step
	// Autoscale is the autoscaler's decision whatever the step (nil without
	// Desired.Autoscale): StepAutoscale carries out a scale or a rebalance; with any other
	// step it is a wait, keeping its clocks.
	Autoscale *autoscale.Decision
	// Steady is how long the next full look may wait while quiet looks find nothing changed
	// (0: the next look is full); see steady.
	Steady time.Duration
}

// Shown is the step the status reports: Behind for a side step, else the step itself.
func (s Step) Shown() Step {
	if s.Behind != nil {
		return *s.Behind
	}
	return s
}

// Acts reports whether the step changes anything (Idle, Wait and Lost do not).
func (s Step) Acts() bool { return s.Kind != StepIdle && s.Kind != StepWait && s.Kind != StepLost }

// Reshard is a move of Slots slots from the masters From to the master To, for
// spec.updateStrategy.assignStrategies[Index].
type Reshard struct {
	Index, Slots int
	From         []string
	To           string
}

// Desired is the desired cluster, the planner's input besides the Snapshot and its Health:
// what the user asks of a cluster (the RedisCluster's spec and annotations) and what the
// operator recorded of it (its status, the StatefulSet, the claims), in the planner's terms.
// It is not the RedisCluster's spec. The Snapshot has the nodes; Desired the rest.
type Desired struct {
	// Name is the RedisCluster's name, for the messages that tell a user what to run.
	Name string
	// Paused: the operator changes nothing.
	Paused bool
	// Refused, when not empty, is why the cluster must not be created (an unsupported Redis
	// version): with no pod yet, nothing is done; running pods are still looked after.
	Refused string
	// Replicas is spec.replicas; pods at higher ordinals are leaving (Observation.Leaving).
	Replicas int
	// StatefulSetReplicas is the StatefulSet's replicas now (above Replicas during a scale in,
	// below it until StepGrow); StatefulSetMissing: there is none (the prepare stage makes it).
	StatefulSetReplicas int
	StatefulSetMissing  bool
	// GeneratedCert is the generated certificate of the nodes, nil without one (no TLS, a
	// user's or cert-manager's certificate).
	GeneratedCert *GeneratedCert
	// TemplateHeld, when not empty, is why the StatefulSet must not be written now (new ACL
	// rules a node refused, or not checked yet): no StepGrow until it is mended.
	TemplateHeld string
	// ACLRulesUnchecked: the spec's ACL rules differ from the StatefulSet template's and no
	// node was asked about them yet (StepCheckACLRules).
	ACLRulesUnchecked bool
	// UpdateRevision is the StatefulSet's update revision ("" while unknown).
	UpdateRevision string
	// Assign is the AssignReceive strategy, nil with AutoReceive.
	Assign *Assignment
	// AcceptDataLoss: the user set the accept-data-loss annotation, named AcceptAnnotation.
	AcceptDataLoss   bool
	AcceptAnnotation string
	// NotReadySince is since when the cluster has not been Ready (zero while it was Ready
	// at the last look).
	NotReadySince time.Time
	// MembersRecorded: the member record exists (it may be empty).
	MembersRecorded bool
	// Rotation is what the password rotations need.
	Rotation Rotation
	// Memory is the memory configuration the nodes should run with (see planMemory),
	// Coverage their cluster-require-full-coverage ("" when not known: nothing is set).
	Memory   Memory
	Coverage string
	// WriteSafety is the min-replicas-to-write and min-replicas-max-lag the nodes should
	// run with (see planWriteSafety).
	WriteSafety WriteSafety
	// Restore is spec.restore while it is not done, nil otherwise.
	Restore *Restore
	// ReloadFrom is the backup the user named to reload lost shards from (the annotation
	// ReloadAnnotation), "" when none; Reload the reload under way, nil when none.
	ReloadFrom, ReloadAnnotation string
	Reload                       *Reload
	// Autoscale is the memory autoscaler's configuration (nil when off) and AutoscaleState
	// what it remembers; Busy says why the cluster must not be scaled now besides what
	// NextStep itself sees (a backup under way), "" when nothing.
	Autoscale      *autoscale.Settings
	AutoscaleState autoscale.State
	Busy           string
	// SlotWeights are the slot weights by master ID a rebalance by memory set (nil: every
	// master weighs the same); they count only while they name every staying master.
	SlotWeights map[string]float64
	// HeldSlots are slots a rebalance found too big for any target (MoveStats.Held, kept in
	// status.heldSlots): the rebalance plans around them.
	HeldSlots []layout.HeldSlot
	// CARotation is the rotation of the generated CA under way, nil when none is;
	// GeneratedCA the generated CA while none is (nil without one, or during one).
	CARotation  *CARotation
	GeneratedCA *GeneratedCA
	// Volumes are the pods' claims and the size the spec asks of them (planVolumes).
	Volumes Volumes
	// Announce is what the nodes announce to outside clients (planAnnounce), nil when the
	// operator leaves it alone.
	Announce *Announce
	// Archived: the cluster archives its write stream (spec.archive), whose status only a
	// full look writes (Steady).
	Archived bool
}

// ReloadFromArchive is the value of the reload annotation that reloads lost slots from the
// cluster's own archive (spec.archive) up to the loss, rather than from a RedisBackup (a
// name never starts with @).
const ReloadFromArchive = "@archive"

// ReloadSource names what a reload annotation's value reloads from, for messages.
func ReloadSource(value string) string {
	if value == ReloadFromArchive {
		return "the archive"
	}
	return "backup " + value
}

// Reload is a reload of lost slots from a backup, under way.
type Reload struct {
	// Source is what the keys come from: a RedisBackup's name, or ReloadFromArchive.
	Source string
	// Slots are the lost slots.
	Slots []nodes.SlotRange
	// Shards are the slot ranges of each of the backup's shards, and Loaded the indexes of
	// those whose keys in Slots are loaded.
	Shards [][]nodes.SlotRange
	Loaded []int
	// Problem says why the reload cannot go on ("" when it can).
	Problem string
}

// ShardLoad is the load of a backup's shard Shard (its slots Slots) into the master NodeID
// of Pod at Addr, which serves them.
type ShardLoad struct {
	Shard        int
	Slots        []nodes.SlotRange
	Addr, NodeID string
	Pod          string
	// Replicas are the addresses of the answering replicas of the master, for a restore
	// (whose load turns their AOF off too, see rdbload.PauseAppendOnly).
	Replicas []string
}

// Restore is a new cluster's restore from a backup, in the planner's terms.
type Restore struct {
	// Shards are the slot ranges of each of the backup's shards, in slot order.
	Shards [][]nodes.SlotRange
	// Loaded are the node IDs of the masters whose shard is loaded.
	Loaded []string
	// Problem says why the restore cannot go on ("" when it can): the backup is not
	// readable, or does not fit the spec.
	Problem string
}

// Assignment is an AssignReceive scale out: its strategies and the empty masters recorded
// as their targets.
type Assignment struct {
	Strategies []Strategy
	// Targets are the recorded target masters; Recorded is true when they were recorded for
	// the current spec (no new assignment starts before the spec changes again).
	Targets  []string
	Recorded bool
}

// Strategy is one spec.updateStrategy.assignStrategies entry.
type Strategy struct {
	Slots int
	From  []string
}

// NextStep decides the one next step for a cluster from the desired cluster, the snapshot
// and its health (Assess of the snapshot). It is pure. The order matters: nothing is judged while
// the nodes refuse the password; new ACL rules are checked on a node before the template
// may carry them, and a scale out's StatefulSet grows, before anything else; password
// rotations come next (planRotation: a new
// cluster's applied-password record must exist before its pods can start, as the exporter
// sidecar mounts it); then the member record, as the pods' start guards read it; lost data
// is reported before anything could paper over it; a new cluster is formed only from
// nothing; then certificate reloads, recoveries, open slots, and, only while every member
// answers, joins, slot moves, removals and pod replacements.
func NextStep(spec Desired, s observe.Snapshot, h health.Health) Step {
	if spec.Paused {
		return Step{Kind: StepWait, After: LookIdle, Reason: "paused"}
	}
	if spec.Refused != "" && len(s.Nodes) == 0 {
		return Step{Kind: StepWait, After: LookIdle, Reason: spec.Refused}
	}
	if len(h.AuthFailed) > 0 {
		return Step{Kind: StepWait, After: LookIdle, Reason: fmt.Sprintf("%d nodes refuse the password", len(h.AuthFailed))}
	}
	rotate, note, rotates := planRotation(spec, s)
	planRotate := func(Desired, observe.Snapshot, health.Health) (Step, bool) { return rotate, rotates }
	step := Step{Kind: StepIdle, After: IdleLook(s.NodeTimeout)}
	for _, plan := range []func(Desired, observe.Snapshot, health.Health) (Step, bool){
		planCheckACLRules, planGrow, planRotate, planRecord, planRenewCertificate, planLostCluster, planLostShards, planForm, planDropAcceptance, planReloadCertificates, planStartCARotation, planRotateCA, planMemory, planWriteSafety, planRecover, planFixSlots,
		planRestore, planWaitForMembers, planJoin, planMoveSlots, planRemove, planVolumes, planUpgrade, planReload, planDeleteClaims,
	} {
		if next, ok := plan(spec, s, h); ok {
			step = next
			break
		}
	}
	if step.Kind == StepIdle {
		step = heldGrowth(spec, step)
	}
	step.Rotation = note
	if spec.Autoscale != nil {
		step = planAutoscale(spec, s, h, step)
	}
	if side, ok := planCoverage(spec, s, h); ok {
		// A side step, before anything else (a lost shard's Lost included: the other shards
		// serve only once they run "no"), that leaves what is under way as it was.
		behind := step
		side.Behind, side.Rotation, side.Autoscale = &behind, behind.Rotation, behind.Autoscale
		step = side
	}
	step = showUpgrade(spec, s, planAnnounce(spec, s, step))
	step.Steady = steady(spec, s, h, step)
	return step
}

// showUpgrade shows an upgrade under way whatever step comes first: while pods run an old
// template, the shown step (Step.Shown) of no operation, a heal or a wait before the next
// replacement, belongs to the upgrade (OpUpgrading), its reason led by how many pods are
// left. A lost cluster is shown lost.
func showUpgrade(spec Desired, s observe.Snapshot, step Step) Step {
	shown := &step
	if step.Behind != nil {
		shown = step.Behind // a copy of its own, made by the side step's planner
	}
	if spec.UpdateRevision == "" || shown.Operation != OpNone || shown.Kind == StepLost {
		return step
	}
	outdated := 0
	for i := range s.Nodes {
		if s.Nodes[i].Revision != spec.UpdateRevision {
			outdated++
		}
	}
	if outdated == 0 {
		return step
	}
	progress := fmt.Sprintf("%d of %d pods run an old template", outdated, len(s.Nodes))
	shown.Operation, shown.Reason = OpUpgrading, joinReasons(progress, shown.Reason)
	return step
}

// joinReasons joins the reasons that are not empty with "; ".
func joinReasons(reasons ...string) string {
	return strings.Join(slices.DeleteFunc(reasons, func(r string) bool { return r == "" }), "; ")
}

// planAutoscale asks the autoscaler (autoscale.Decide) what to do once NextStep chose step:
// only when nothing else is to be done (step is Idle, no rotation under way) may it scale;
// otherwise its decision is a wait for what step is about, which keeps its clocks.
func planAutoscale(spec Desired, s observe.Snapshot, h health.Health, step Step) Step {
	busy := spec.Busy
	switch {
	case step.Kind != StepIdle:
		busy = fmt.Sprintf("the cluster is busy (%s: %s)", step.Kind, step.Reason)
	case step.Rotation != RotationCurrent && step.Rotation != "":
		busy = "a password rotation is under way (" + step.Rotation + ")"
	}
	d := autoscale.Decide(*spec.Autoscale, spec.AutoscaleState, s, h, busy)
	step.Autoscale = &d
	if step.Kind == StepIdle && (d.Kind == autoscale.Out || d.Kind == autoscale.In || d.Kind == autoscale.Rebalance) {
		step.Kind, step.Operation, step.Reason, step.After = StepAutoscale, OpScaling, d.Reason, LookSoon
	}
	return step
}

// planRecord keeps the member record current (observe.MemberRecord).
func planRecord(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	want := observe.MemberRecord(s)
	if spec.MembersRecorded && maps.Equal(want, s.Members) {
		return Step{}, false
	}
	return Step{Kind: StepRecordMembers, Members: want, After: LookSoon, Reason: fmt.Sprintf("recording %d members", len(want))}, true
}

// whileUncovered says what clients get while some slots have no master, by the nodes'
// cluster-require-full-coverage: with "yes" every command is refused; otherwise (the
// operator's default, "no") only the keys in the uncovered slots are.
func whileUncovered(coverage string) string {
	if coverage == "yes" {
		return "the cluster refuses every command while slots are uncovered (cluster-require-full-coverage yes)"
	}
	return "the other shards keep serving their slots (cluster-require-full-coverage no); commands on keys in the lost slots fail with CLUSTERDOWN"
}

// planLostCluster refuses to form a new cluster over a formed one whose every node is
// silent or back empty; once the user accepts the loss, the record is cleared so one can be.
func planLostCluster(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	if !health.Lost(s) {
		return Step{}, false
	}
	if spec.AcceptDataLoss {
		return Step{Kind: StepAcceptLostCluster, Operation: OpCreating, After: LookSoon,
			Reason: fmt.Sprintf("%s is set: clearing the record of the lost cluster's %d members", spec.AcceptAnnotation, len(s.Members))}, true
	}
	since := s.Now
	if !spec.NotReadySince.IsZero() {
		since = spec.NotReadySince
	}
	for _, o := range s.Nodes {
		if o.PodStarted.After(since) {
			since = o.PodStarted
		}
	}
	if s.Now.Sub(since) < lostAfter || len(s.Nodes) == 0 {
		return Step{Kind: StepWait, After: lookForPods,
			Reason: fmt.Sprintf("none of the %d recorded members answers with its cluster state yet", len(s.Members))}, true
	}
	return Step{Kind: StepLost, After: LookIdle, Reason: fmt.Sprintf("none of the %d recorded members of the cluster has answered with its cluster state for over %s: "+
		"if their volumes were lost, so is the data. The operator forms no new cluster over it; to accept the loss and start an empty one, "+
		"run: kubectl annotate rediscluster %s %s=true", len(s.Members), lostAfter, spec.Name, spec.AcceptAnnotation)}, true
}

// planLostShards reports masters whose slots have no copy left (recovery.LostShards); once the user
// accepts the loss, every member forgets them (recovery.Abandon) and recoveries serve the slots
// again, empty.
func planLostShards(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	shards := recovery.LostShards(s)
	if len(shards) == 0 {
		return Step{}, false
	}
	var names []string
	slots := 0
	for _, sh := range shards {
		names = append(names, fmt.Sprintf("%s (last at %s, slots %s)", nodes.ShortID(sh.ID), sh.Addr, nodes.FormatSlotRanges(sh.Slots)))
		slots += nodes.CountSlots(sh.Slots)
	}
	if spec.ReloadFrom != "" && spec.Reload == nil {
		var lost []nodes.SlotRange
		var lostAt time.Time
		for _, sh := range shards {
			lost = append(lost, sh.Slots...)
			if !sh.LastHeard.IsZero() && (lostAt.IsZero() || sh.LastHeard.Before(lostAt)) {
				lostAt = sh.LastHeard
			}
		}
		lost = nodes.MergeSlots(lost)
		return Step{Kind: StepRecordReload, Operation: OpHealing, Slots: lost, LostAt: lostAt, After: LookSoon,
			Reason: fmt.Sprintf("%d slots have no copy left (master %s): recording them to reload from %s", slots, strings.Join(names, ", "), ReloadSource(spec.ReloadFrom))}, true
	}
	if !spec.AcceptDataLoss && spec.Reload == nil {
		return Step{Kind: StepLost, After: LookIdle, Reason: fmt.Sprintf("%d slots have no copy left: master %s and every replica of it came back without data or never answered; "+
			"%s. The operator gives no slot up by itself; to reload their keys from a backup "+
			"(a Completed RedisBackup of this cluster), run: kubectl annotate rediscluster %s %s=<backup name> (or ="+ReloadFromArchive+" to reload them from the cluster's spec.archive, up to the loss); "+
			"to accept the loss of the keys in those slots and serve them again, empty, run: kubectl annotate rediscluster %s %s=true",
			slots, strings.Join(names, ", "), whileUncovered(spec.Coverage), spec.Name, spec.ReloadAnnotation, spec.Name, spec.AcceptAnnotation)}, true
	}
	action, ok := recovery.Abandon(s)
	if !ok {
		return Step{Kind: StepWait, After: lookForPods, Reason: "waiting for the members of the lost shards to settle before forgetting them"}, true
	}
	return Step{Kind: StepRecover, Operation: OpHealing, Action: action, After: LookSoon, Reason: action.Message}, true
}

// planForm forms the cluster when every pod runs, answers and is new and empty, and no
// cluster was ever recorded, as `redis-cli --cluster create` would. Once any node belongs to
// a cluster, or the record names any pod, it never forms again: new nodes join instead.
func planForm(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	if len(s.Joined()) > 0 {
		return Step{}, false
	}
	if len(s.Members) > 0 {
		return Step{Kind: StepWait, After: lookForPods,
			Reason: fmt.Sprintf("every answering node is empty but the member record names %d members: refusing to form a new cluster over a lost one", len(s.Members))}, true
	}
	answering := s.Answering()
	if len(s.Nodes) != spec.StatefulSetReplicas || len(answering) != spec.StatefulSetReplicas {
		return Step{Kind: StepWait, After: LookSoon,
			Reason: fmt.Sprintf("waiting for %d Redis nodes to run before forming the cluster (%d answer)", spec.StatefulSetReplicas, len(answering))}, true
	}
	endpoints := make([]layout.Endpoint, len(answering))
	for i, o := range answering {
		endpoints[i] = layout.Endpoint{Addr: o.Addr, Host: o.Host}
	}
	plan, err := layout.Create(endpoints, s.ReplicasPerMaster)
	if err != nil {
		return Step{Kind: StepWait, After: LookIdle, Reason: "cannot plan the cluster: " + err.Error()}, true
	}
	if r := spec.Restore; r != nil {
		if r.Problem == "" && len(plan.Masters) != len(r.Shards) {
			return Step{Kind: StepWait, After: LookIdle, Reason: fmt.Sprintf("cannot restore: the backup has %d shards but spec.replicas %d makes %d masters; "+
				"set spec.replicas to %d (%d masters with %d replicas each) to restore it",
				len(r.Shards), len(answering), len(plan.Masters), len(r.Shards)*(1+s.ReplicasPerMaster), len(r.Shards), s.ReplicasPerMaster)}, true
		}
		if r.Problem != "" {
			return Step{Kind: StepWait, After: LookIdle, Reason: "cannot restore: " + r.Problem}, true
		}
		for i := range plan.Masters {
			plan.Masters[i].Slots = r.Shards[i]
		}
	}
	plan.NoReadyWait = true // the next look judges readiness (Assess); the step holds no worker for it
	return Step{Kind: StepForm, Operation: OpCreating, Create: plan, After: LookSoon,
		Reason: fmt.Sprintf("forming a cluster of %d masters and %d replicas", len(plan.Masters), len(answering)-len(plan.Masters))}, true
}

// planRestore loads a restoring cluster's shards, every one not loaded yet at once, each
// into the master that serves its slots, once the new cluster serves every slot (so a
// loaded key is where its clients will look for it).
func planRestore(spec Desired, s observe.Snapshot, h health.Health) (Step, bool) {
	r := spec.Restore
	if r == nil {
		return Step{}, false
	}
	if !h.Ready() {
		return Step{Kind: StepWait, Operation: OpCreating, After: LookSoon,
			Reason: "waiting for the new cluster to serve every slot before loading the backup: " + strings.Join(h.Problems, "; ")}, true
	}
	owners := s.Joined()[0].Routes()
	ids := s.ByID()
	var loads []ShardLoad
	var pods []string
	for i, slots := range r.Shards {
		owner := owners[slots[0].Start]
		if slices.Contains(r.Loaded, owner) {
			continue
		}
		o := ids[owner]
		if o == nil {
			return Step{Kind: StepWait, Operation: OpCreating, After: LookSoon, Reason: fmt.Sprintf("waiting for master %s of %s to answer", nodes.ShortID(owner), nodes.ShardName(i))}, true
		}
		replicas, _ := s.AnsweringWhere(func(r *observe.Observation) bool { self, ok := r.Self(); return ok && self.MasterID == owner })
		loads = append(loads, ShardLoad{Shard: i, Slots: slots, Addr: o.Addr, NodeID: owner, Pod: o.Pod, Replicas: replicas})
		pods = append(pods, o.Pod)
	}
	all, _ := s.AnsweringWhere(func(*observe.Observation) bool { return true })
	if len(loads) == 0 {
		return Step{Kind: StepRestoreShard, Operation: OpCreating, Addrs: all, After: LookSoon,
			Reason: "every shard is loaded; checking that every node's AOF is on before the restore ends"}, true
	}
	return Step{Kind: StepRestoreShard, Operation: OpCreating, Loads: loads, Addrs: all, After: LookSoon,
		Reason: fmt.Sprintf("restoring %d of %d shards at once into %s", len(loads), len(r.Shards), strings.Join(pods, ", "))}, true
}

// planReload loads, once the cluster is whole again (the lost slots served, empty, and the
// emptied pods back as members: it comes last), the keys of the lost slots from the
// backup: one step per backup shard that holds some, into the master that now serves them;
// then it ends the reload.
func planReload(spec Desired, s observe.Snapshot, h health.Health) (Step, bool) {
	r := spec.Reload
	if r == nil {
		return Step{}, false
	}
	if spec.AcceptDataLoss {
		return Step{Kind: StepAbandonReload, Operation: OpHealing, After: LookSoon,
			Reason: fmt.Sprintf("%s is set: the reload of the lost slots %s from %s is given up (%d of its shards loaded); they stay served as they are",
				spec.AcceptAnnotation, nodes.FormatSlotRanges(r.Slots), ReloadSource(r.Source), len(r.Loaded))}, true
	}
	if r.Problem != "" {
		return Step{Kind: StepWait, Operation: OpHealing, After: LookIdle, Reason: "cannot reload the lost slots: " + r.Problem}, true
	}
	if !h.Ready() {
		return Step{Kind: StepWait, Operation: OpHealing, After: LookSoon,
			Reason: "waiting for the lost slots to be served again before reloading them from the backup: " + strings.Join(h.Problems, "; ")}, true
	}
	owners := s.Joined()[0].Routes()
	for i, shard := range r.Shards {
		slots := intersectSlots(shard, r.Slots)
		if len(slots) == 0 || slices.Contains(r.Loaded, i) {
			continue
		}
		owner := owners[slots[0].Start]
		for _, rg := range slots {
			for slot := rg.Start; slot <= rg.End; slot++ {
				if owners[slot] != owner {
					return Step{Kind: StepWait, Operation: OpHealing, After: LookIdle,
						Reason: fmt.Sprintf("the lost slots %s are served by more than one master: cannot reload them in one load", nodes.FormatSlotRanges(slots))}, true
				}
			}
		}
		o := s.ByID()[owner]
		if o == nil {
			return Step{Kind: StepWait, Operation: OpHealing, After: LookSoon, Reason: fmt.Sprintf("waiting for master %s to answer", nodes.ShortID(owner))}, true
		}
		return Step{Kind: StepReloadShard, Operation: OpHealing, Shard: i, Slots: slots, Addr: o.Addr, NodeID: owner, Pod: o.Pod, After: LookSoon,
			Reason: fmt.Sprintf("reloading the lost slots %s from %s's %s into %s", nodes.FormatSlotRanges(slots), ReloadSource(r.Source), nodes.ShardName(i), o.Pod)}, true
	}
	return Step{Kind: StepFinishReload, Operation: OpHealing, After: LookSoon,
		Reason: fmt.Sprintf("the lost slots %s are reloaded from %s", nodes.FormatSlotRanges(r.Slots), ReloadSource(r.Source))}, true
}

// intersectSlots returns the slots both a and b hold (each sorted, without overlaps).
func intersectSlots(a, b []nodes.SlotRange) []nodes.SlotRange {
	var out []nodes.SlotRange
	for _, x := range a {
		for _, y := range b {
			if lo, hi := max(x.Start, y.Start), min(x.End, y.End); lo <= hi {
				out = append(out, nodes.SlotRange{Start: lo, End: hi})
			}
		}
	}
	return nodes.MergeSlots(out)
}

// planDropAcceptance spends the accept-data-loss annotation once a cluster is formed and
// no shard is lost, so it cannot accept a later loss unseen.
func planDropAcceptance(spec Desired, _ observe.Snapshot, _ health.Health) (Step, bool) {
	if !spec.AcceptDataLoss || spec.Reload != nil {
		return Step{}, false // a reload under way is given up first (planReload)
	}
	return Step{Kind: StepDropAcceptance, After: LookSoon, Reason: "the cluster is formed: " + spec.AcceptAnnotation + " is spent"}, true
}

// planReloadCertificates makes the nodes that serve an old certificate read theirs again
// (without a restart). Until the kubelet has refreshed a pod's Secret volume the node reads
// the old files again, so this repeats until every node serves the new one.
func planReloadCertificates(_ Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	addrs, pods := s.AnsweringWhere(func(o *observe.Observation) bool { return o.StaleCertificate })
	if len(addrs) == 0 {
		return Step{}, false
	}
	return Step{Kind: StepReloadCertificates, Addrs: addrs, After: LookSoon,
		Reason: "reloading the certificate on " + strings.Join(pods, ", ")}, true
}

// planRecover runs the next recovery recovery.Recover finds.
func planRecover(_ Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	action, ok := recovery.Recover(s)
	if !ok {
		return Step{}, false
	}
	return Step{Kind: StepRecover, Operation: OpHealing, Action: action, After: LookSoon, Reason: action.Message}, true
}

// planFixSlots finishes or rolls back slot moves an interruption (an operator restart, a
// crashed node) left open, and gives back slots no master claims any longer
// (strayedSlots), before anything else changes the topology.
func planFixSlots(_ Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	for _, o := range s.Answering() {
		if self, _ := o.Self(); self.HasOpenSlots() {
			return Step{Kind: StepFixSlots, Operation: OpScaling, After: LookSoon,
				Reason: "finishing or rolling back the slot moves an interruption left open (first on " + o.Pod + ")"}, true
		}
	}
	if strayed := strayedSlots(s); len(strayed) > 0 {
		return Step{Kind: StepFixSlots, Operation: OpHealing, After: LookSoon,
			Reason: fmt.Sprintf("%d slots (%s) are claimed by no master while the cluster routes them to one: giving each to the master that holds its keys",
				len(strayed), nodes.FormatSlotRanges(nodes.RangesOf(strayed)))}, true
	}
	return Step{}, false
}

// planWaitForMembers stops the lifecycle steps (join, slot moves, removal, upgrade) while a
// recorded member does not answer or the cluster still lists a failed node: they need every
// slot owner and change nothing a recovery depends on. A new pod that never joined (Pending
// for good, say) does not stop them.
func planWaitForMembers(_ Desired, s observe.Snapshot, h health.Health) (Step, bool) {
	var silent []string
	for i := range s.Nodes {
		o := &s.Nodes[i]
		if _, recorded := s.Members[o.Pod]; recorded && !o.Answered() {
			silent = append(silent, o.Pod)
		}
	}
	switch {
	case len(silent) > 0:
		return Step{Kind: StepWait, After: lookForPods, Reason: fmt.Sprintf("waiting for %s to answer", strings.Join(silent, ", "))}, true
	case h.HasFailedNodes():
		return Step{Kind: StepWait, After: lookForPods, Reason: "waiting for the cluster to settle a failed node"}, true
	}
	return Step{}, false
}

// planJoin adds one new, empty, staying node: as a master until there are as many as the
// spec asks, then as a replica of the master with the fewest replicas, preferring one on
// another Kubernetes node (then zone).
func planJoin(_ Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	joined := s.Joined()
	if len(joined) == 0 {
		return Step{}, false
	}
	for _, o := range s.Answering() {
		if o.Joined() || o.Leaving {
			continue
		}
		step := Step{Kind: StepJoin, Operation: OpScaling, Pod: o.Pod, Addr: o.Addr, Seed: joined[0].Addr, After: LookSoon,
			Reason: "adding " + o.Pod + " to the cluster as a master"}
		if counts := stayingMasters(s); len(counts) >= s.Masters {
			step.MasterID = pickMaster(s, counts, o)
			step.Reason = fmt.Sprintf("adding %s to the cluster as a replica of %s", o.Pod, nodes.ShortID(step.MasterID))
		}
		return step, true
	}
	return Step{}, false
}

// stayingMasters maps every staying joined master's ID to its number of staying replicas.
func stayingMasters(s observe.Snapshot) map[string]int {
	counts := map[string]int{}
	for _, o := range s.Joined() {
		if self, _ := o.Self(); !o.Leaving && self.IsMaster() {
			counts[self.ID] += 0
		}
	}
	for _, o := range s.Joined() {
		if self, _ := o.Self(); !o.Leaving && !self.IsMaster() {
			if _, ok := counts[self.MasterID]; ok {
				counts[self.MasterID]++
			}
		}
	}
	return counts
}

// pickMaster is the master with the fewest replicas, preferring one on another Kubernetes
// node than the joining node, then one in another zone.
func pickMaster(s observe.Snapshot, counts map[string]int, joining *observe.Observation) string {
	byID := s.ByID()
	sameHost := func(id string) bool { o := byID[id]; return o != nil && o.Host == joining.Host }
	sameZone := func(id string) bool { o := byID[id]; return o != nil && o.Zone != "" && o.Zone == joining.Zone }
	ids := slices.Sorted(maps.Keys(counts))
	sort.SliceStable(ids, func(i, j int) bool {
		a, b := ids[i], ids[j]
		if counts[a] != counts[b] {
			return counts[a] < counts[b]
		}
		if sameHost(a) != sameHost(b) {
			return sameHost(b)
		}
		return sameZone(b) && !sameZone(a)
	})
	return ids[0]
}

// planMoveSlots moves slots, a bounded batch per step: off leaving masters and off staying
// masters beyond the spec's count; with AutoReceive until every master is within the
// rebalance threshold of its share (the plan is made again from the current slots each
// time, so an interruption resumes), except for held slots (Desired.HeldSlots), with
// the masters that have under fullPercent of their maxmemory left out of the balance when
// they would receive slots (fullMasters: they keep theirs, the others share the rest); with AssignReceive exactly the listed slots from the
// listed nodes to the empty masters recorded as targets first.
func planMoveSlots(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	weights := drainWeights(s)
	draining := drainPending(s, weights)
	assign := spec.Assign != nil
	if assign && !draining {
		if step, ok := planAssign(spec, s, weights); ok {
			return step, true
		}
		return Step{}, false
	}
	var masters []nodes.Node
	for _, o := range s.Joined() {
		if self, _ := o.Self(); self.IsMaster() {
			masters = append(masters, self)
		}
	}
	// Before the memory rebalance's weights join the drain weights: only drained masters.
	if blocked := drainBlocked(s, weights, spec.HeldSlots); len(blocked) > 0 {
		return drainHeldStep(s, blocked), true
	}
	addSlotWeights(weights, masters, spec.SlotWeights)
	pinned := layout.HeldSlotNumbers(spec.HeldSlots)
	moves, err := layout.Rebalance(masters, weights, layout.DefaultRebalanceThreshold, !assign, pinned, fullMasters(s))
	if draining && err == nil && len(moves) == 0 {
		// What the drain would move were no master full: only full masters could take it.
		if planned, _ := layout.Rebalance(masters, weights, layout.DefaultRebalanceThreshold, !assign, pinned, nil); len(planned) > 0 {
			return Step{Kind: StepWait, Operation: OpScaling, After: LookIdle,
				Reason: fmt.Sprintf("the scale in is held: the %d slots left on the leaving masters would go only to masters with under %d%% of their maxmemory left; "+
					"raise the memory limit (or maxMemoryPercent), delete keys, or keep the masters", layout.CountMoved(planned), fullPercent)}, true
		}
	}
	if err != nil || len(moves) == 0 {
		return Step{}, false //nolint:nilerr // nothing to plan (no slots yet, say): the status reports it
	}
	left := layout.CountMoved(moves)
	return Step{Kind: StepRebalance, Operation: OpScaling, Weights: weights, UseEmptyMasters: !assign, Pinned: pinned, SlotsLeft: left, Moves: moves,
		After: LookSoon, Reason: fmt.Sprintf("moving slots: %d left to move", left)}, true
}

// drainBlocked returns the held slots on the masters being drained (in weights, the drain
// weights of drainWeights) when they are all those masters still serve: no move can empty
// them, so the scale in cannot end until a held slot fits somewhere (a larger memory
// limit) or the master stays. Nil while a draining master has a slot that is not held.
func drainBlocked(s observe.Snapshot, weights map[string]float64, held []layout.HeldSlot) []layout.HeldSlot {
	byNumber := map[int]layout.HeldSlot{}
	for _, h := range held {
		byNumber[h.Slot] = h
	}
	var out []layout.HeldSlot
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if _, draining := weights[self.ID]; !draining || !self.IsMaster() {
			continue
		}
		for _, slot := range nodes.SlotList(self.Slots) {
			h, ok := byNumber[slot]
			if !ok {
				return nil
			}
			out = append(out, h)
		}
	}
	return out
}

// drainHeldStep is the Wait of a scale in that held slots keep from ending: its reason
// names each slot, its size and the room it would need, and what would help.
func drainHeldStep(s observe.Snapshot, blocked []layout.HeldSlot) Step {
	leaving := map[string]bool{}
	var named []string
	for _, h := range blocked {
		leaving[h.Source] = true
		named = append(named, fmt.Sprintf("slot %d (%d keys, about %s; %s has %s of room)", h.Slot, h.Size.Keys, layout.FormatBytes(h.Size.Bytes),
			nodes.ShortID(h.Target), layout.FormatBytes(h.Room.Bytes)))
	}
	if len(named) > maxNamedHeld {
		named = append(named[:maxNamedHeld], fmt.Sprintf("and %d more", len(named)-maxNamedHeld))
	}
	who := "the leaving master keeps"
	if len(leaving) > 1 {
		who = fmt.Sprintf("%d leaving masters keep", len(leaving))
	}
	return Step{Kind: StepWait, Operation: OpScaling, After: LookIdle, DrainHeld: blocked,
		Reason: fmt.Sprintf("the scale in is held: %s %s, which fit in no other master; "+
			"raise the memory limit (or maxMemoryPercent) so another master has room for them, or keep %d masters",
			who, strings.Join(named, ", "), s.Masters+len(leaving))}
}

// maxNamedHeld is how many held slots a reason names.
const maxNamedHeld = 8

// addSlotWeights adds the memory rebalance's slot weights to the drain weights of masters,
// when they name every master that stays (a master added or gone since makes them stale:
// every master then weighs the same).
func addSlotWeights(weights map[string]float64, masters []nodes.Node, slotWeights map[string]float64) {
	if len(slotWeights) == 0 {
		return
	}
	for _, m := range masters {
		if _, drained := weights[m.ID]; drained {
			continue
		}
		if _, ok := slotWeights[m.ID]; !ok {
			return
		}
	}
	for _, m := range masters {
		if _, drained := weights[m.ID]; !drained {
			weights[m.ID] = slotWeights[m.ID]
		}
	}
}

// planAssign is the next AssignReceive batch: strategy i's slots go to target i modulo the
// number of targets. The targets are recorded before any slot moves; how far each strategy
// got is read from the targets' slots (they started empty, and strategies run in order), so
// a restart (or a pause, which changes the spec) at any point moves exactly the rest.
func planAssign(spec Desired, s observe.Snapshot, weights map[string]float64) (Step, bool) {
	a := spec.Assign
	i, missing, target := 0, 0, ""
	if len(a.Targets) > 0 && len(a.Strategies) > 0 {
		i, missing, target = nextAssignment(s, a.Strategies, a.Targets)
	}
	if missing == 0 {
		var empty []string
		for _, o := range s.Joined() {
			self, _ := o.Self()
			if _, draining := weights[self.ID]; !o.Leaving && self.IsMaster() && len(self.Slots) == 0 && !draining {
				empty = append(empty, self.ID)
			}
		}
		// A new assignment starts only with a new spec (a scale out) that left empty masters.
		if len(empty) == 0 || len(a.Strategies) == 0 || a.Recorded {
			return Step{}, false
		}
		return Step{Kind: StepRecordTargets, Operation: OpScaling, Targets: empty, After: LookSoon,
			Reason: fmt.Sprintf("moving the slots of %d strategies to %d new masters", len(a.Strategies), len(empty))}, true
	}
	moves, err := assignMoves(s, spec.HeldSlots, missing, a.Strategies[i].From, target)
	switch {
	case err != nil:
		return Step{Kind: StepWait, Operation: OpScaling, After: LookIdle,
			Reason: fmt.Sprintf("assignStrategies[%d] cannot be carried out: %v", i, err)}, true
	case len(moves) == 0:
		// Only held slots are left to the strategy's sources: status.heldSlots names them.
		return Step{}, false
	}
	return Step{Kind: StepAssign, Operation: OpScaling, After: LookSoon, Moves: moves,
		Reshard: Reshard{Index: i, Slots: missing, From: a.Strategies[i].From, To: target},
		Reason:  fmt.Sprintf("assignStrategies[%d]: %d of %d slots left to move", i, missing, a.Strategies[i].Slots)}, true
}

// assignMoves plans an AssignReceive batch: n slots from the masters from to the master
// to, as layout.Reshard, except that held slots are never asked for: their masters give
// their other slots instead, and fewer than n when only held ones are left (none: nil
// moves and no error).
func assignMoves(s observe.Snapshot, held []layout.HeldSlot, n int, from []string, to string) ([]layout.Move, error) {
	pinned := layout.HeldSlotNumbers(held)
	var masters []nodes.Node
	sourced := len(from) == 0 || slices.Contains(from, "all")
	available, pinnedAtSources := 0, 0
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if !self.IsMaster() {
			continue
		}
		all := nodes.SlotList(self.Slots)
		free := slices.DeleteFunc(slices.Clone(all), func(slot int) bool { return slices.Contains(pinned, slot) })
		self.Slots = nodes.RangesOf(free)
		masters = append(masters, self)
		if self.ID != to && (sourced || slices.Contains(from, self.ID)) {
			available += len(free)
			pinnedAtSources += len(all) - len(free)
		}
	}
	if available < n && pinnedAtSources > 0 {
		if n = available; n == 0 {
			return nil, nil
		}
	}
	return layout.Reshard(masters, n, from, to)
}

// nextAssignment is the first strategy that still misses slots, how many, and its target.
// Each target's slots are handed out to its strategies in order.
func nextAssignment(s observe.Snapshot, strategies []Strategy, targets []string) (index, missing int, target string) {
	have := map[string]int{}
	for _, o := range s.Answering() {
		self, _ := o.Self()
		have[self.ID] = nodes.CountSlots(self.Slots)
	}
	for i, a := range strategies {
		t := targets[i%len(targets)]
		got := min(a.Slots, have[t])
		have[t] -= got
		if got < a.Slots {
			return i, a.Slots - got, t
		}
	}
	return 0, 0, ""
}

// drainWeights gives the weight 0 to every master that must give its slots away: the
// leaving ones, and the staying ones beyond the spec's count of masters (those with the
// fewest slots, then the highest ordinals).
func drainWeights(s observe.Snapshot) map[string]float64 {
	w := map[string]float64{}
	var staying []nodes.Node
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if !self.IsMaster() {
			continue
		}
		if o.Leaving {
			w[self.ID] = 0
		} else if len(self.Slots) > 0 {
			staying = append(staying, self)
		}
	}
	// s.Nodes is in ordinal order, so a stable sort keeps the lower ordinals first on ties.
	sort.SliceStable(staying, func(i, j int) bool { return nodes.CountSlots(staying[i].Slots) > nodes.CountSlots(staying[j].Slots) })
	for _, n := range staying[min(len(staying), s.Masters):] {
		w[n.ID] = 0
	}
	return w
}

// drainPending reports whether a master weighted 0 still has slots.
func drainPending(s observe.Snapshot, weights map[string]float64) bool {
	for _, o := range s.Answering() {
		self, _ := o.Self()
		if _, ok := weights[self.ID]; ok && len(self.Slots) > 0 {
			return true
		}
	}
	return false
}

// planRemove scales in once every slot is off the leaving masters: it removes one leaving
// node per step from the cluster (replicas first), and only when none is left in the
// cluster shrinks the StatefulSet.
func planRemove(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	var going []*observe.Observation
	stay := ""
	for _, o := range s.Joined() {
		if o.Leaving {
			going = append(going, o)
		} else if stay == "" {
			stay = o.Addr
		}
	}
	if len(going) > 0 {
		if drainPending(s, drainWeights(s)) {
			return Step{Kind: StepWait, Operation: OpScaling, After: LookSoon,
				Reason: fmt.Sprintf("removing %d nodes from the cluster once their slots are moved", len(going))}, true
		}
		// Replicas first, so no leaving replica is re-pointed only to be removed.
		sort.SliceStable(going, func(i, j int) bool {
			a, _ := going[i].Self()
			b, _ := going[j].Self()
			return !a.IsMaster() && b.IsMaster()
		})
		self, _ := going[0].Self()
		return Step{Kind: StepRemoveNode, Operation: OpScaling, Pod: going[0].Pod, NodeID: self.ID, Seed: stay, After: LookSoon,
			Reason: fmt.Sprintf("removing %s from the cluster (%d nodes leave)", going[0].Pod, len(going))}, true
	}
	if spec.StatefulSetReplicas <= spec.Replicas {
		return Step{}, false
	}
	// A leaving pod that does not answer but is still a member was waited for
	// (planWaitForMembers): every leaving pod here is out of the cluster.
	if held := templateHold(spec); held != "" {
		return Step{Kind: StepWait, Operation: OpScaling, After: LookIdle,
			Reason: "the leaving nodes are out of the cluster; the StatefulSet keeps their pods until it may be written again: " + held}, true
	}
	return Step{Kind: StepShrink, Operation: OpScaling, Replicas: spec.Replicas, After: LookSoon,
		Reason: fmt.Sprintf("scaling the StatefulSet to %d once the leaving nodes are out of the cluster", spec.Replicas)}, true
}

// planGrow scales the StatefulSet up to spec.replicas pods as soon as the spec asks for
// more (or someone scaled it down by hand), before a rotation, a heal or a lost cluster,
// which do not hold a scale out's pods back (they join once they answer, planJoin), unless
// the StatefulSet may not be written (Refused, TemplateHeld) or there is none yet (the
// prepare stage makes it with spec.replicas pods).
func planGrow(spec Desired, _ observe.Snapshot, _ health.Health) (Step, bool) {
	if !scaleOutWanted(spec) || templateHold(spec) != "" {
		return Step{}, false
	}
	return Step{Kind: StepGrow, Operation: OpScaling, Replicas: spec.Replicas, After: LookSoon,
		Reason: fmt.Sprintf("scaling the StatefulSet from %d to %d pods", spec.StatefulSetReplicas, spec.Replicas)}, true
}

// scaleOutWanted reports whether the spec asks for more pods than the StatefulSet has (one
// scaled down by hand included; none yet is the prepare stage's to make).
func scaleOutWanted(spec Desired) bool {
	return !spec.StatefulSetMissing && spec.StatefulSetReplicas < spec.Replicas
}

// templateHold is why the StatefulSet may not be written now (TemplateHeld, else Refused),
// "" when it may: every step that writes it (StepGrow, StepShrink, StepRecreateStatefulSet)
// waits on it, since a write carries the template the spec asks for.
func templateHold(spec Desired) string {
	return cmp.Or(spec.TemplateHeld, spec.Refused)
}

// heldGrowth turns idle into a wait that says why a scale out's pods do not come: the spec
// asks for more pods than the StatefulSet has, and it may not be written (Refused,
// TemplateHeld). Only an idle step: whatever else is to be done goes first.
func heldGrowth(spec Desired, idle Step) Step {
	held := templateHold(spec)
	if !scaleOutWanted(spec) || held == "" {
		return idle
	}
	return Step{Kind: StepWait, Operation: OpScaling, After: LookIdle,
		Reason: fmt.Sprintf("the scale out to %d pods waits until the StatefulSet may be written again: %s", spec.Replicas, held)}
}

// planUpgrade replaces pods that run an old template, one at a time, only while the cluster
// is Ready: replicas first; before a master's pod goes, a connected replica takes over
// (Failover), so at most one failover happens at a time and no acknowledged write is lost.
func planUpgrade(spec Desired, s observe.Snapshot, h health.Health) (Step, bool) {
	if spec.UpdateRevision == "" {
		return Step{}, false
	}
	var outdated []*observe.Observation
	answering := s.Answering()
	for _, o := range answering {
		if o.Revision != spec.UpdateRevision {
			outdated = append(outdated, o)
		}
	}
	if len(outdated) == 0 {
		return Step{}, false
	}
	return planReplace(spec, s, h, outdated, fmt.Sprintf("%d of %d pods run an old template", len(outdated), len(answering)))
}

// planReplace replaces one of the pods of outdated, which answer, once the cluster is Ready
// and every pod is: a replica first; a master only after a connected replica took over.
// progress starts every reason.
func planReplace(spec Desired, s observe.Snapshot, h health.Health, outdated []*observe.Observation, progress string) (Step, bool) {
	wait := func(why string) (Step, bool) {
		return Step{Kind: StepWait, Operation: OpUpgrading, After: LookSoon, Reason: progress + "; " + why}, true
	}
	if !h.Ready() {
		return wait("waiting for the cluster to be Ready before replacing the next pod")
	}
	// The pod replaced last may still answer while it terminates (its process stops after
	// the delete): replacing the next one then would take two down at once.
	for _, o := range s.Nodes {
		if o.Terminating || !o.Running {
			return wait("waiting for pod " + o.Pod + " to be replaced before the next one")
		}
		if o.Unready {
			return wait("waiting for pod " + o.Pod + " to be Ready before replacing the next one")
		}
	}
	if len(s.Nodes) < spec.Replicas {
		return wait(fmt.Sprintf("waiting for %d of %d pods to exist before replacing the next one", len(s.Nodes), spec.Replicas))
	}
	next := outdated[0]
	for _, o := range outdated {
		if self, _ := o.Self(); !self.IsMaster() {
			next = o
			break
		}
	}
	self, _ := next.Self()
	if self.IsMaster() {
		replica := connectedReplica(s, self.ID)
		if replica == nil && s.ReplicasPerMaster > 0 {
			// Without a replica to take over, its slots would be down until the pod is back.
			return wait("waiting for a connected replica of master " + next.Pod + " before replacing its pod")
		}
		if replica != nil {
			return Step{Kind: StepFailover, Operation: OpUpgrading, Pod: next.Pod, Addr: replica.Addr, After: LookSoon,
				Reason: progress + "; " + replica.Pod + " takes over from master " + next.Pod + " before its pod is replaced"}, true
		}
	}
	return Step{Kind: StepReplacePod, Operation: OpUpgrading, Pod: next.Pod, After: LookSoon,
		Reason: progress + "; replacing " + next.Pod}, true
}

// connectedReplica is a replica of master that is not flagged failed (Failover itself waits
// for its replication offset to catch up), or nil.
func connectedReplica(s observe.Snapshot, master string) *observe.Observation {
	for _, o := range s.Answering() {
		if self, _ := o.Self(); !self.IsMaster() && self.MasterID == master && !self.Failed {
			return o
		}
	}
	return nil
}
