package archiver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// Stop ends the shard's loop, its follower writing its open segment first.
func (sh *Shard) Stop() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.stopped {
		sh.stopped = true
		if sh.follower != nil {
			sh.follower.Stop()
		}
	}
}

// isStopped reports whether Stop was called.
func (sh *Shard) isStopped() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.stopped
}

// Update tells the shard's loop where its shard is followed now and how to log in.
func (sh *Shard) Update(src health.ShardSource, conn Conn) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.source, sh.conn = src, conn
}

// SetSchedule tells the shard's loop when to take bases and how long to keep them.
func (sh *Shard) SetSchedule(schedule Schedule) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.schedule = schedule
}

// current is where the shard is followed now.
func (sh *Shard) current() (health.ShardSource, rdbstream.Options) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.source, rdbstream.Options{Addr: sh.source.Addr, Username: sh.conn.Login.User, Password: sh.conn.Login.Password, TLS: sh.conn.TLS}
}

// Report is the shard's status, the events not yet sent, whether its follower runs, and
// its last failure.
func (sh *Shard) Report() (redisv1alpha1.ArchiveShardStatus, []Event, bool, string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := redisv1alpha1.ArchiveShardStatus{Shard: sh.name, Slots: nodes.FormatSlotRanges(sh.slots), Timeline: int32(sh.timeline), //nolint:gosec // timelines are few
		Source: sh.source.Pod, LastError: sh.lastErr}
	if sh.timeline > 0 {
		st.BaseOffset = sh.base.ReplicationOffset
		captured := metav1.NewTime(sh.base.CapturedAt).Rfc3339Copy() // what the API keeps: see status.Patch
		st.BaseCapturedAt = &captured
		st.ArchivedOffset = sh.base.ReplicationOffset
	}
	if !sh.oldest.IsZero() {
		oldest := metav1.NewTime(sh.oldest).Rfc3339Copy()
		st.OldestBase = &oldest
	}
	running, p := false, sh.last
	if sh.follower != nil {
		p = sh.follower.Progress()
		running = !sh.starting && p.LastError == "" // connected, or not failed since it last was
	}
	if p.Archived > 0 {
		st.ArchivedOffset = p.Archived
		if !p.LastArchived.IsZero() {
			t := metav1.NewMicroTime(p.LastArchived)
			st.ArchivedUpTo = &t
		}
	}
	if p.LastError != "" && sh.follower != nil {
		st.LastError = p.LastError
	}
	if p.LastFlushOffset > sh.lastFlushOffset {
		sh.lastFlush, sh.lastFlushOffset = p.LastFlush, p.LastFlushOffset
		sh.events = append(sh.events, Event{Kind: corev1.EventTypeNormal, Reason: ReasonFlush, At: p.LastFlush,
			Message: fmt.Sprintf("%s at %s (offset %d)", sh.name, p.LastFlush.Format(time.RFC3339Nano), p.LastFlushOffset)})
	}
	if !sh.lastFlush.IsZero() {
		at := metav1.NewMicroTime(sh.lastFlush)
		st.LastFlush = &at
	}
	events := sh.events
	sh.events = nil
	return st, events, running, sh.lastErr
}

// note records an event for the next reconcile.
func (sh *Shard) note(kind, reason, format string, args ...any) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.events = append(sh.events, Event{Kind: kind, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// Run follows the shard until ctx ends: from the end of its timeline's archive (Resume),
// or from a new base when there is none or the history broke (a GapError: the next
// timeline). A failure is tried again after a growing wait.
func (sh *Shard) Run(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil && !sh.isStopped() {
		err := sh.follow(ctx)
		if ctx.Err() != nil || sh.isStopped() {
			return
		}
		sh.mu.Lock()
		if sh.follower != nil {
			sh.last = sh.follower.Progress()
		}
		sh.follower, sh.starting = nil, true
		if err != nil {
			failures++
			sh.lastErr = err.Error()
			if errors.Is(err, redisarchive.ErrFenced) {
				log.FromContext(ctx).Info("the archive's write was refused", "shard", sh.name, "error", err.Error())
			}
		} else {
			failures = 0
		}
		sh.mu.Unlock()
		wait := min(time.Duration(1<<min(failures, 5))*time.Second/2, retryMax)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// follow takes the shard's timeline (a new base when needed) and runs a follower on it
// until it fails; a gap takes the next timeline's base at once.
func (sh *Shard) follow(ctx context.Context) error {
	cur, err := sh.startTimeline(ctx)
	if err != nil || cur == nil {
		return err
	}
	for {
		err := sh.runFollower(ctx, cur)
		var gap *redisarchive.GapError
		if (errors.As(err, &gap) || errors.Is(err, redisarchive.ErrNoMasterLink)) && sh.retryAtMaster() {
			return fmt.Errorf("%w; its master is asked next", err)
		}
		sh.mu.Lock()
		sh.askedMaster = false
		sh.mu.Unlock()
		if !errors.As(err, &gap) {
			return err
		}
		// Once per timeline: a new base that fails (its node lost its master too) meets the
		// same gap again at the next try.
		if sh.gapNoted != sh.timeline {
			sh.gapNoted = sh.timeline
			sh.note(corev1.EventTypeWarning, ReasonGap, "%s (slots %s) timeline %d ends at offset %d: %v; timeline %d starts from a new base",
				sh.name, nodes.FormatSlotRanges(sh.slots), sh.timeline, gap.From.Offset, err, sh.timeline+1)
		}
		if cur, err = sh.newBase(ctx, sh.timeline+1); err != nil {
			return err
		}
		if !sh.adopt(ctx, cur) {
			return nil
		}
	}
}

// startTimeline starts the shard's follower: where the archive of its timeline ends, or on
// a new timeline (findTimeline). Nil when the shard was stopped meanwhile.
func (sh *Shard) startTimeline(ctx context.Context) (*runningFollower, error) {
	if sh.timeline == 0 {
		cur, err := sh.findTimeline(ctx)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			if !sh.adopt(ctx, cur) {
				return nil, nil
			}
			return cur, nil
		}
	}
	from, ok, err := redisarchive.Resume(ctx, sh.sink, sh.cluster, sh.name, sh.timeline)
	if err != nil {
		return nil, fmt.Errorf("while reading where the archive ends: %w", err)
	}
	if !ok {
		from = redisarchive.Position{ReplID: sh.base.ReplicationID, Offset: sh.base.ReplicationOffset}
	}
	_, conn := sh.current()
	f, err := redisarchive.NewFollower(redisarchive.Options{Conn: conn, Master: sh.address, Cluster: sh.cluster, Shard: sh.name,
		Timeline: sh.timeline, From: from, Sink: sh.sink})
	if err != nil {
		return nil, err
	}
	if sh.isStopped() {
		return nil, nil
	}
	cur := startFollower(ctx, f)
	if !sh.adopt(ctx, cur) {
		return nil, nil
	}
	return cur, nil
}

// adopt makes cur the shard's follower and prunes the archive, or, when the shard was
// stopped meanwhile, stops cur and says so (false).
func (sh *Shard) adopt(ctx context.Context, cur *runningFollower) bool {
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		_ = cur.stopAndWait()
		return false
	}
	sh.follower, sh.starting, sh.lastErr = cur.Follower, false, ""
	sh.mu.Unlock()
	sh.prune(ctx)
	return true
}

// retryAtMaster, after a gap, says whether the history may still continue at the shard's
// master (the gap came from a replica, and the master was not asked yet), and if so sends
// the next connection there.
func (sh *Shard) retryAtMaster() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.askedMaster || sh.source.MasterAddr == "" || !sh.source.Replica {
		return false
	}
	sh.askMaster = true
	return true
}

// address is where the follower connects: the shard's node as the last reconcile saw it, or
// its master once after a replica could not continue the history.
func (sh *Shard) address(context.Context) (string, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.askMaster && sh.source.MasterAddr != "" {
		sh.askMaster, sh.askedMaster = false, true
		return sh.source.MasterAddr, nil
	}
	if sh.source.Addr == "" {
		return "", errors.New("no node of the shard is known")
	}
	return sh.source.Addr, nil
}

// findTimeline takes the shard's last timeline in the archive, or starts one from a new
// base when there is none or its base holds other slots, and then returns its follower
// (nil when the archive's timeline goes on).
func (sh *Shard) findTimeline(ctx context.Context) (*runningFollower, error) {
	all, err := redisarchive.BaseTimelines(ctx, sh.sink, sh.cluster)
	if err != nil {
		return nil, fmt.Errorf("while listing the archive's timelines: %w", err)
	}
	last := 0
	var base backup.Shard
	for _, tl := range all {
		if tl.Shard == sh.name && tl.Timeline > last {
			last, base = tl.Timeline, tl.Base
		}
	}
	if last > 0 && slices.Equal(backupstore.Ranges(base.Slots), sh.slots) {
		sh.mu.Lock()
		sh.timeline, sh.base = last, base
		sh.mu.Unlock()
		return nil, nil
	}
	return sh.newBase(ctx, last+1)
}

// newBase takes a snapshot of the shard into the archive as the base of timeline, follows
// the shard from it until its follower has caught up with the node (catchUp), and makes
// timeline the shard's; it returns that follower, running. Nothing goes on before it (a
// first base, a gap, new slots): a restore to a time before the catch-up replays the
// timeline before up to its end, and is refused when that ends before the target (see
// redisarchive.Timeline.Uncovered).
func (sh *Shard) newBase(ctx context.Context, timeline int) (*runningFollower, error) {
	base, src, err := sh.takeBase(ctx, timeline)
	if err != nil {
		return nil, err
	}
	_, node := sh.current()
	mark := func() (int64, error) { return redisarchive.ReplicationOffset(ctx, node) }
	next, servesFrom, err := sh.catchUp(ctx, timeline, base, mark, false)
	if err != nil {
		return nil, err
	}
	sh.useBase(timeline, base, src, fmt.Sprintf(" (it serves restores from %s, when its reader had caught up with the node)",
		servesFrom.UTC().Format(time.RFC3339Nano)))
	return next, nil
}

// takeBase takes a snapshot of the shard into the archive as the base of timeline. The
// timeline is not visible to restores until describeBase.
func (sh *Shard) takeBase(ctx context.Context, timeline int) (backup.Shard, health.ShardSource, error) {
	src, opts := sh.current()
	opts.ViaDisk = true
	file := redisarchive.BaseRDBName(sh.cluster, sh.name, timeline)
	if err := sh.sink.Check(ctx); err != nil {
		return backup.Shard{}, src, err
	}
	res, _, err := backup.StreamShard(ctx, opts, sh.sink.Client, file)
	if err != nil {
		return backup.Shard{}, src, fmt.Errorf("while taking the base of timeline %d: %w", timeline, err)
	}
	return backupstore.ShardEntry(src, res, file), src, nil
}

// describeBase writes the description of timeline's base (servesFrom and previousWhole as
// EncodeBase says),
// which makes the timeline visible to restores.
func (sh *Shard) describeBase(ctx context.Context, timeline int, base backup.Shard, servesFrom, previousWhole time.Time) error {
	data, err := redisarchive.EncodeBase(base, servesFrom, previousWhole)
	if err == nil {
		err = sh.sink.Put(ctx, redisarchive.BaseName(sh.cluster, sh.name, timeline), data)
	}
	if err != nil {
		return fmt.Errorf("while writing the base of timeline %d: %w", timeline, err)
	}
	return nil
}

// useBase makes timeline, from base, the shard's, and says so in an event (why: "" after a
// gap or at the start, else what scheduled it).
func (sh *Shard) useBase(timeline int, base backup.Shard, src health.ShardSource, why string) {
	sh.mu.Lock()
	sh.timeline, sh.base, sh.last, sh.baseRetryAt = timeline, base, redisarchive.Progress{}, time.Time{}
	if sh.oldest.IsZero() {
		sh.oldest = base.CapturedAt
	}
	sh.mu.Unlock()
	sh.note(corev1.EventTypeNormal, ReasonTimelineStarted, "%s (slots %s) timeline %d starts from a base of %d keys at offset %d taken from %s%s",
		sh.name, nodes.FormatSlotRanges(sh.slots), timeline, base.Keys, base.ReplicationOffset, src.Pod, why)
}

// nextBaseAt is when the shard's next scheduled base is due: its timeline's base plus
// baseEvery, or later after a scheduled base failed.
func (sh *Shard) nextBaseAt() time.Time {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := sh.base.CapturedAt.Add(sh.schedule.BaseEvery)
	if sh.baseRetryAt.After(at) {
		at = sh.baseRetryAt
	}
	return at
}

// runningFollower is a follower whose Run goes on in a goroutine of its own.
type runningFollower struct {
	*redisarchive.Follower
	ended chan struct{} // closed when Run has returned
	err   error         // Run's error, once ended is closed
}

// startFollower runs f in a goroutine of its own.
func startFollower(ctx context.Context, f *redisarchive.Follower) *runningFollower {
	r := &runningFollower{Follower: f, ended: make(chan struct{})}
	go func() {
		r.err = f.Run(ctx)
		close(r.ended)
	}()
	return r
}

// stopAndWait stops the follower (its open segment written) and waits for its Run to end.
func (r *runningFollower) stopAndWait() error {
	r.Stop()
	<-r.ended
	return r.err
}

// runFollower runs cur, then each follower that takes over from it, until one ends, and
// moves the shard to its next timeline whenever a scheduled base is due (nextBaseAt): see
// rebase.
func (sh *Shard) runFollower(ctx context.Context, cur *runningFollower) error {
	for {
		timer := time.NewTimer(max(time.Until(sh.nextBaseAt()), 0))
		select {
		case <-cur.ended:
			timer.Stop()
			return cur.err
		case <-timer.C:
		}
		next, err := sh.rebase(ctx, cur)
		if err != nil {
			if ctx.Err() != nil {
				return cur.stopAndWait()
			}
			sh.mu.Lock()
			sh.baseRetryAt = time.Now().Add(min(sh.schedule.BaseEvery, time.Minute))
			timeline := sh.timeline
			sh.mu.Unlock()
			sh.note(corev1.EventTypeWarning, ReasonFailing, "%s: the scheduled base failed (%v); timeline %d goes on, and the base is tried again",
				sh.name, err, timeline)
			continue
		}
		if err := cur.stopAndWait(); err != nil {
			log.FromContext(ctx).Info("the archive's follower ended with an error after the next timeline started", "shard", sh.name, "error", err.Error())
		}
		cur = next
		sh.prune(ctx)
	}
}

// rebase starts the shard's next timeline while cur follows the current one, so that every
// second stays restorable: it takes the base; starts a second follower on the new timeline
// from the base's offset, which catches up through the master's backlog; once that one has
// received everything cur had when it started, writes the base's description with that
// time as servesFrom (restores to earlier times replay the current timeline, whose receive
// times are the writes' own, and cur goes on until then); then makes the new timeline and
// its follower the shard's, and returns that follower, still running: the caller stops cur.
// On an error the new timeline's objects are deleted and cur goes on.
func (sh *Shard) rebase(ctx context.Context, cur *runningFollower) (*runningFollower, error) {
	sh.mu.Lock()
	timeline, every := sh.timeline+1, sh.schedule.BaseEvery
	sh.mu.Unlock()
	base, src, err := sh.takeBase(ctx, timeline)
	if err != nil {
		return nil, err
	}
	mark := func() (int64, error) { return cur.Progress().Received, nil }
	next, servesFrom, err := sh.catchUp(ctx, timeline, base, mark, true)
	if err != nil {
		return nil, err
	}
	sh.useBase(timeline, base, src, fmt.Sprintf(" (spec.archive.BaseEvery %s; it serves restores from %s, when it had caught up with timeline %d)",
		every, servesFrom.UTC().Format(time.RFC3339Nano), timeline-1))
	sh.mu.Lock()
	sh.follower = next.Follower
	stopped := sh.stopped // stop came while the base was taken: it stopped cur only
	sh.mu.Unlock()
	if stopped {
		next.Stop()
	}
	return next, nil
}

// catchUp starts a follower on timeline from base's offset, waits until it has received the
// stream up to mark (read once it runs), then writes the base's description with that
// moment as servesFrom (and as the moment the timeline before was still followed, when it
// goes on until then: previousWhole), and returns the follower, running, with that moment.
// On an error the follower is stopped and the timeline's objects are deleted.
func (sh *Shard) catchUp(ctx context.Context, timeline int, base backup.Shard, mark func() (int64, error), previousWhole bool) (*runningFollower, time.Time, error) {
	_, conn := sh.current()
	f, err := redisarchive.NewFollower(redisarchive.Options{Conn: conn, Master: sh.address, Cluster: sh.cluster, Shard: sh.name,
		Timeline: timeline, From: redisarchive.Position{ReplID: base.ReplicationID, Offset: base.ReplicationOffset}, Sink: sh.sink})
	if err != nil {
		return nil, time.Time{}, errors.Join(err, redisarchive.DeleteTimeline(ctx, sh.sink, sh.cluster, sh.name, timeline))
	}
	next := startFollower(ctx, f)
	to, err := mark()
	if err == nil {
		err = waitCaughtUp(ctx, next, to)
	}
	servesFrom := time.Now()
	if err == nil {
		whole := time.Time{}
		if previousWhole {
			whole = servesFrom
		}
		err = sh.describeBase(ctx, timeline, base, servesFrom, whole)
	}
	if err != nil {
		if runErr := next.stopAndWait(); runErr != nil {
			err = fmt.Errorf("%w: %w", err, runErr)
		}
		return nil, time.Time{}, errors.Join(fmt.Errorf("timeline %d: %w", timeline, err), redisarchive.DeleteTimeline(ctx, sh.sink, sh.cluster, sh.name, timeline))
	}
	return next, servesFrom, nil
}

// catchUpMax bounds how long a scheduled base's follower may take to catch up with
// the current timeline's.
const catchUpMax = 2 * time.Minute

// waitCaughtUp waits until next has received the stream up to offset mark, or fails when
// its Run ends or catchUpMax passes.
func waitCaughtUp(ctx context.Context, next *runningFollower, mark int64) error {
	deadline := time.NewTimer(catchUpMax)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for next.Progress().Received < mark {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next.ended:
			return errors.New("its follower stopped before catching up")
		case <-deadline.C:
			return fmt.Errorf("its follower did not catch up with offset %d in %s (it is at %d)", mark, catchUpMax, next.Progress().Received)
		case <-tick.C:
		}
	}
	return nil
}

// prune deletes the shard's timelines spec.archive.Retention no longer needs
// (redisarchive.Expired) and records its oldest timeline kept.
func (sh *Shard) prune(ctx context.Context) {
	sh.mu.Lock()
	keep := sh.schedule.Retention
	sh.mu.Unlock()
	all, err := redisarchive.BaseTimelines(ctx, sh.sink, sh.cluster)
	if err != nil {
		sh.note(corev1.EventTypeWarning, ReasonPruneFailed, "%s: cannot list the archive's timelines: %v", sh.name, err)
		return
	}
	gone := redisarchive.Expired(all, sh.name, time.Now(), keep)
	deleted := map[int]bool{}
	var names []string
	for _, tl := range gone {
		if err := redisarchive.DeleteTimeline(ctx, sh.sink, sh.cluster, sh.name, tl.Timeline); err != nil {
			sh.note(corev1.EventTypeWarning, ReasonPruneFailed, "%s: %v", sh.name, err)
			break
		}
		deleted[tl.Timeline] = true
		names = append(names, strconv.Itoa(tl.Timeline))
	}
	if len(names) > 0 {
		sh.note(corev1.EventTypeNormal, ReasonPruned, "%s: deleted timelines %s (spec.archive.Retention %s: a restore to any later time needs none of them)",
			sh.name, strings.Join(names, ", "), keep)
	}
	for _, tl := range all { // by timeline: the first one left is the oldest
		if tl.Shard == sh.name && !deleted[tl.Timeline] {
			sh.mu.Lock()
			sh.oldest = tl.ServesFrom
			sh.mu.Unlock()
			return
		}
	}
}
