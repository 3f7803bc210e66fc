package redisbackup

import (
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// maxMissedRuns bounds the search for the latest missed run of a schedule (a per-second
// schedule left alone for a long time), as the CronJob controller does.
const maxMissedRuns = 10000

// scheduledBackup is one RedisBackup a schedule created, as the plan needs it.
type scheduledBackup struct {
	name      string
	phase     redisv1alpha1.BackupPhase
	created   time.Time
	completed time.Time // zero unless Completed
	// deleting: the backup is being deleted already (a deletionTimestamp, its files going).
	deleting bool
}

// scheduleLook is what one reconcile saw of a schedule.
type scheduleLook struct {
	now      time.Time
	schedule cron.Schedule
	// since is when the last backup was scheduled, or the schedule's creation.
	since   time.Time
	suspend bool
	keep    *redisv1alpha1.BackupRetention
	backups []scheduledBackup
}

// scheduleDecision is what to do: create the backup of the run at create (when not zero),
// delete the backups named, and look again at next (zero while the schedule is suspended:
// there is no next run to show).
type scheduleDecision struct {
	create time.Time
	delete []string
	next   time.Time
	// waiting says why a due run was not created ("" when none was due or it was).
	waiting string
}

// planSchedule decides a schedule's next moves. It is pure. A run is due when its time has
// passed since the last one; of several missed runs only the latest is made. A run due while
// a backup of the schedule is still under way waits for it. Retention keeps the newest
// completed backup always, then deletes the completed ones beyond keep.count or older than
// keep.maxAge, and failed ones older than the newest completed one; a backup being deleted
// already is neither kept nor deleted again.
func planSchedule(l scheduleLook) scheduleDecision {
	var d scheduleDecision
	due := time.Time{}
	for t, i := l.schedule.Next(l.since), 0; !t.After(l.now) && i < maxMissedRuns; t, i = l.schedule.Next(t), i+1 {
		due = t
	}
	busy := slices.ContainsFunc(l.backups, func(b scheduledBackup) bool {
		return b.phase != redisv1alpha1.BackupCompleted && b.phase != redisv1alpha1.BackupFailed
	})
	switch {
	case due.IsZero() || l.suspend:
	case busy:
		d.waiting = "a run is due but a backup of the schedule is still under way: it starts when that one ends"
	default:
		d.create = due
	}
	if !l.suspend {
		d.next = l.schedule.Next(l.now)
	}
	d.delete = expired(l)
	return d
}

// parseSchedule parses spec.schedule, or says why it cannot run it: its grammar, or runs
// closer than redisv1alpha1.MinScheduleInterval (which the API server's rules cannot tell of
// every minute field). It is pure.
func parseSchedule(spec string) (cron.Schedule, string) {
	parsed, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Sprintf("spec.schedule %q cannot be parsed: %v; use five cron fields (0 3 * * *), @daily or @every 6h", spec, err)
	}
	if every := scheduleInterval(parsed); every < redisv1alpha1.MinScheduleInterval {
		return nil, fmt.Sprintf("spec.schedule %q runs every %s, more often than every %s, the shortest interval the operator takes backups at: "+
			"name minutes at least 5 apart, across the hour too (for example 0,30 or */15), or @every %s or longer",
			spec, every, redisv1alpha1.MinScheduleInterval, redisv1alpha1.MinScheduleInterval)
	}
	return parsed, ""
}

// scheduleInterval is the shortest time between two runs of sch, as the floor
// (redisv1alpha1.MinScheduleInterval) judges it: the delay of @every, else the smallest gap
// between two minutes of the minute field, taken across the hour too (58 and 1 are 3 apart,
// though the hour field may never let one run follow the other). It is pure.
func scheduleInterval(sch cron.Schedule) time.Duration {
	switch s := sch.(type) {
	case cron.ConstantDelaySchedule:
		return s.Delay
	case *cron.SpecSchedule:
		var minutes []int
		for m := range 60 {
			if s.Minute&(1<<uint(m)) != 0 {
				minutes = append(minutes, m)
			}
		}
		if len(minutes) == 0 {
			return time.Hour
		}
		gap := 60 - minutes[len(minutes)-1] + minutes[0] // across the hour
		for i := 1; i < len(minutes); i++ {
			gap = min(gap, minutes[i]-minutes[i-1])
		}
		return time.Duration(gap) * time.Minute
	}
	return 0
}

// expired are the backups retention deletes.
func expired(l scheduleLook) []string {
	l.backups = slices.DeleteFunc(slices.Clone(l.backups), func(b scheduledBackup) bool { return b.deleting })
	var completed []scheduledBackup
	for _, b := range l.backups {
		if b.phase == redisv1alpha1.BackupCompleted {
			completed = append(completed, b)
		}
	}
	slices.SortFunc(completed, func(a, b scheduledBackup) int { return b.completed.Compare(a.completed) })
	var out []string
	for i, b := range completed {
		tooMany := l.keep != nil && l.keep.Count != nil && i >= int(*l.keep.Count)
		tooOld := l.keep != nil && l.keep.MaxAge != nil && l.now.Sub(b.completed) > l.keep.MaxAge.Duration
		if i > 0 && (tooMany || tooOld) {
			out = append(out, b.name)
		}
	}
	for _, b := range l.backups {
		if b.phase == redisv1alpha1.BackupFailed && len(completed) > 0 && b.created.Before(completed[0].completed) {
			out = append(out, b.name)
		}
	}
	slices.Sort(out)
	return out
}
