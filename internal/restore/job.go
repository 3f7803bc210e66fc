package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// MaxRecordFlag is the operator flag that sets the largest record a load reads
// (Job.MaxRecord).
const MaxRecordFlag = "restore-max-record"

// Job is one shard load: the shard of Source that Step names, loaded into its master.
type Job struct {
	// Cluster names the cluster loaded into, for the log.
	Cluster string
	// Node is how to reach the master (Step.Addr) as the operator.
	Node rdbstream.Options
	// Source is the backup or archive read for the load, Step the planner's load.
	Source *Source
	Step   plan.ShardLoad
	// Restoring: the load is part of a new cluster's restore (spec.restore, never a reload
	// of lost slots), whose masters admit no client until it completes. Its slots are
	// emptied before the load and again when it fails, so a master holds nothing of them but
	// what a whole, verified file put there, and the file is read once, its size and
	// SHA-256 checked as it ends (a reload into a serving cluster reads it whole first).
	Restoring bool
	// Fence, when set, is checked before the load's slots are emptied: a process that lost
	// the lead while its load ran (frozen, cut off) empties nothing the new leader loaded.
	Fence func(context.Context) error
	// Retry: an earlier attempt at this load failed or may have run in another operator
	// process, so a replay from an archive empties the load's slots first.
	Retry bool
	// ACL: the cluster runs ACL users, so the emptying and the replay run as
	// redisarchive.ReplayUser (the operator's own user may run none of the application's
	// commands).
	ACL bool
	// MaxRecord is the largest RDB record loaded (rdbload.DefaultMaxRecord when 0).
	MaxRecord int64
}

// Result is what a load did: the keys of the shard's file it restored and, from an archive,
// how far the replay after them reached.
type Result struct {
	rdbload.Result
	Replay redisarchive.ReplayResult
	// AppendOnlyPaused is true when the shard's nodes loaded with their AOF off and
	// rewrote it after (see Job.pauseAppendOnly).
	AppendOnlyPaused bool
}

// Run loads the keys of the job's slots from its shard. A reload into a serving cluster
// first reads the whole file once and checks its size and SHA-256 against the manifest, so a
// corrupted or truncated object loads nothing beside the clients' keys; then it streams the
// file again into the master as RESTOREs (or SETs). A restore (Restoring) streams it once
// into slots it emptied first, and empties them again when the load fails, a damaged file
// included (its checksum is known at its end): a restoring cluster admits no client, so what
// is emptied is the failed attempt's alone. From an archive, the load's slots are emptied
// first too: a load tried again (after a failed replay, or by an operator restarted during
// one) would otherwise replay onto what the failed attempt applied, and count an INCR or an
// RPUSH of a key the base lacks twice. A reload of lost slots from the archive empties them
// only on a retry: the slots are served again meanwhile, and clients' new keys in them
// stay, as with a reload from a backup. A restore of a large shard loads with the AOF of its
// nodes off and returns once each has rewritten it (pauseAppendOnly).
func (j Job) Run(ctx context.Context) (Result, error) {
	archive := j.Source.Archive
	clearFirst := j.Restoring || (archive != nil && j.Retry)
	writer := j.Node // who empties slots and replays: the operator, or the replay user with ACL users
	if j.ACL && (archive != nil || j.Restoring) {
		var done func(context.Context) error
		var err error
		if writer, done, err = redisarchive.WithReplayUser(ctx, j.Node); err != nil {
			return Result{}, fmt.Errorf("before loading %s into %s: %w", nodes.ShardName(j.Step.Shard), j.Step.Pod, err)
		}
		defer j.undo(ctx, "cannot switch the replay user off", done)
	}
	if clearFirst {
		if _, err := j.empty(ctx, writer); err != nil {
			return Result{}, fmt.Errorf("while emptying the slots of %s on %s before its load: %w", nodes.ShardName(j.Step.Shard), j.Step.Pod, err)
		}
	}
	var resumeAOF func(context.Context) error
	if j.Restoring {
		// The file's checksum is known at its end: the node checks each payload meanwhile.
		undo, err := rdbload.SanitizePayloads(ctx, writer)
		if err != nil {
			return Result{}, err
		}
		defer j.undo(ctx, "cannot set sanitize-dump-payload back", undo)
		if resumeAOF, err = j.pauseAppendOnly(ctx, writer); err != nil {
			return Result{}, err
		}
	}
	out := Result{AppendOnlyPaused: resumeAOF != nil}
	var err error
	out.Result, err = j.loadFile(ctx)
	if err == nil && archive != nil {
		out.Replay, err = j.replay(ctx, writer)
	}
	switch {
	case resumeAOF != nil && err == nil:
		// A load is done only once its keys are on every node's disk.
		if aofErr := resumeAOF(ctx); aofErr != nil {
			err = fmt.Errorf("after loading %s into %s: %w", nodes.ShardName(j.Step.Shard), j.Step.Pod, aofErr)
			defer j.undo(ctx, "cannot turn the AOF on again after a failed load", resumeAOF)
		}
	case resumeAOF != nil:
		// After the slots are emptied below; the next attempt pauses the AOF again.
		defer j.undo(ctx, "cannot turn the AOF on again after a failed load", resumeAOF)
	}
	if err != nil && j.Restoring {
		err = j.emptyAfter(ctx, writer, err)
	}
	return out, err
}

// pauseAppendOnly turns the AOF of the shard's master and replicas off for the load when
// its file is large enough for that to pay (rdbload.WorthPausingAppendOnly), and returns
// what turns it on again; nil when it stays on.
func (j Job) pauseAppendOnly(ctx context.Context, writer rdbstream.Options) (func(context.Context) error, error) {
	if j.Fence != nil { // a process that lost its lease pauses nothing
		if err := j.Fence(ctx); err != nil {
			return nil, err
		}
	}
	size := j.Source.Manifest.Shards[j.Step.Shard].Bytes
	worth, err := rdbload.WorthPausingAppendOnly(ctx, writer, size)
	if err != nil || !worth {
		return nil, err
	}
	return rdbload.PauseAppendOnly(ctx, writer, j.replicas())
}

// replicas are how the job reaches the master's replicas: as the operator reaches the
// master.
func (j Job) replicas() []rdbstream.Options {
	out := make([]rdbstream.Options, len(j.Step.Replicas))
	for i, addr := range j.Step.Replicas {
		out[i] = j.Node
		out[i].Addr = addr
	}
	return out
}

// undo runs a setting's undo once the load ended, whatever ended it (its own 10 s, past
// the load's context), and logs as failure what went wrong.
func (j Job) undo(ctx context.Context, failure string, undo func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := undo(ctx); err != nil {
		log.FromContext(ctx).Info(failure, "cluster", j.Cluster, "pod", j.Step.Pod, "error", err)
	}
}

// empty deletes the keys of the job's slots on its master, and with Restoring its function
// libraries (a new cluster holds none but the load's), once the fence lets it.
func (j Job) empty(ctx context.Context, writer rdbstream.Options) (int64, error) {
	if j.Fence != nil {
		if err := j.Fence(ctx); err != nil {
			return 0, err
		}
	}
	removed, err := rdbload.ClearSlots(ctx, writer, j.slots())
	if err != nil || !j.Restoring {
		return removed, err
	}
	return removed, rdbload.FlushFunctions(ctx, writer)
}

// emptyAfter empties the job's slots and function libraries after a restore's load failed
// with failed, and says so in the error it returns (a failure to empty them, too: the next
// attempt empties them first).
func (j Job) emptyAfter(ctx context.Context, writer rdbstream.Options, failed error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), emptyTimeout)
	defer cancel()
	removed, err := j.empty(ctx, writer)
	if err != nil {
		return fmt.Errorf("%w; emptying its slots again failed too (the next attempt empties them first): %w", failed, err)
	}
	log.FromContext(ctx).Info("emptied the slots of a failed restore load", "cluster", j.Cluster, "shard", j.Step.Shard, "keys", removed)
	return fmt.Errorf("%w; its slots were emptied again (%d keys)", failed, removed)
}

// emptyTimeout bounds the emptying of a failed restore load's slots, which runs after the
// load's own context may have ended.
const emptyTimeout = 2 * time.Minute

// loadFile loads the keys of the job's slots from the shard's file into the master; a
// reload checks the whole file first (see Run).
func (j Job) loadFile(ctx context.Context) (rdbload.Result, error) {
	src, step := j.Source, j.Step
	sh := src.Manifest.Shards[step.Shard]
	want := objectstore.Digest{Size: sh.Bytes, SHA256: sh.SHA256}
	if !j.Restoring {
		if _, err := src.store.Get(ctx, sh.File, io.Discard, &want); err != nil {
			log.FromContext(ctx).Info("cannot read a shard's file", "cluster", j.Cluster, "shard", step.Shard, "error", objectstore.Detail(err))
			return rdbload.Result{}, fmt.Errorf("%s's file %s at %s: %w", nodes.ShardName(step.Shard), sh.File, src.Location, err)
		}
	}
	res, err := rdbload.LoadObject(ctx, rdbload.Options{Node: j.Node, Slots: j.slots(), MaxRecord: j.MaxRecord}, src.store, sh.File, want)
	if errors.Is(err, objectstore.ErrChecksum) {
		log.FromContext(ctx).Info("a shard's file is not the one its manifest names", "cluster", j.Cluster, "shard", step.Shard, "error", objectstore.Detail(err))
	}
	if errors.Is(err, rdbload.ErrTooLarge) {
		err = fmt.Errorf("%w (the operator's --%s raises the limit, within its memory limit)", err, MaxRecordFlag)
	}
	if err != nil {
		return res, fmt.Errorf("while loading %s into %s: %w", nodes.ShardName(step.Shard), step.Pod, err)
	}
	return res, nil
}

// replay replays the archive of the job's shard onto node, which holds its base, up to the
// restore's target.
func (j Job) replay(ctx context.Context, node rdbstream.Options) (redisarchive.ReplayResult, error) {
	a, step := j.Source.Archive, j.Step
	tl := a.Timelines[step.Shard]
	opts := redisarchive.ReplayOptions{Target: node, Cluster: a.Cluster, Shard: tl.Shard, Timeline: tl.Timeline, From: tl.Base.ReplicationOffset, Until: a.Target}
	if a.Reload {
		opts.Only = inRanges(step.Slots) // the reloading master serves other slots too
	}
	res, err := redisarchive.Replay(ctx, redisarchive.StoreSink{Client: j.Source.store}, opts)
	var foreign *redisarchive.ForeignSlotError
	if errors.As(err, &foreign) {
		return res, fmt.Errorf("the archive of %s timeline %d writes slot %d (the command ending at offset %d), outside the slots of its base (%s): %s",
			tl.Shard, tl.Timeline, foreign.Slot, foreign.Offset, nodes.FormatSlotRanges(backupstore.Ranges(tl.Base.Slots)), migrationInWindow)
	}
	if err != nil {
		return res, fmt.Errorf("while replaying the archive of %s timeline %d onto %s: %w", tl.Shard, tl.Timeline, step.Pod, err)
	}
	if err := tl.Uncovered(a.Target, res); err != nil && !a.Reload {
		return res, fmt.Errorf("the archive cannot restore %s: %w", a.TargetText, err)
	}
	return res, nil
}

// slots are the job's slots in rdbload's terms.
func (j Job) slots() []rdbload.SlotRange {
	slots := make([]rdbload.SlotRange, len(j.Step.Slots))
	for i, rg := range j.Step.Slots {
		slots[i] = rdbload.SlotRange{From: rg.Start, To: rg.End}
	}
	return slots
}

// inRanges reports whether a slot is in ranges.
func inRanges(ranges []nodes.SlotRange) func(int) bool {
	return func(slot int) bool {
		return slices.ContainsFunc(ranges, func(rg nodes.SlotRange) bool { return rg.Start <= slot && slot <= rg.End })
	}
}
