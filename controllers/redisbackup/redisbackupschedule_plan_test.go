package redisbackup

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

func TestPlanSchedule(t *testing.T) {
	daily, err := cron.ParseStandard("0 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	at := func(days int, hour int) time.Time {
		return day.AddDate(0, 0, days).Add(time.Duration(hour) * time.Hour)
	}
	done := func(name string, days int) scheduledBackup {
		return scheduledBackup{name: name, phase: redisv1alpha1.BackupCompleted, created: at(days, 3), completed: at(days, 3).Add(time.Minute)}
	}
	going := func(b scheduledBackup) scheduledBackup { b.deleting = true; return b }
	cases := map[string]struct {
		look   scheduleLook
		create time.Time
		delete []string
		next   time.Time
	}{
		"before the first run: nothing, next at 03:00": {
			look: scheduleLook{now: at(0, 2), since: at(0, 1)}, next: at(0, 3)},
		"the run is due: create it": {
			look: scheduleLook{now: at(0, 4), since: at(0, 1)}, create: at(0, 3), next: at(1, 3)},
		"three runs missed: only the latest": {
			look: scheduleLook{now: at(3, 4), since: at(0, 1)}, create: at(3, 3), next: at(4, 3)},
		"suspended: no run, and no next run to show": {
			look: scheduleLook{now: at(0, 4), since: at(0, 1), suspend: true}},
		"keep 2 of 4, one of them being deleted already: it is not deleted again, nor kept": {
			look: scheduleLook{now: at(3, 5), since: at(3, 3), keep: &redisv1alpha1.BackupRetention{Count: ptr.To[int32](2)},
				backups: []scheduledBackup{done("b0", 0), going(done("b1", 1)), done("b2", 2), done("b3", 3)}},
			delete: []string{"b0"}, next: at(4, 3)},
		"a backup under way: the due run waits": {
			look: scheduleLook{now: at(1, 4), since: at(0, 3), backups: []scheduledBackup{{name: "b0", phase: redisv1alpha1.BackupRunning}}},
			next: at(2, 3)},
		"keep 2 of 4: the 2 oldest go": {
			look: scheduleLook{now: at(3, 5), since: at(3, 3), keep: &redisv1alpha1.BackupRetention{Count: ptr.To[int32](2)},
				backups: []scheduledBackup{done("b0", 0), done("b1", 1), done("b2", 2), done("b3", 3)}},
			delete: []string{"b0", "b1"}, next: at(4, 3)},
		"older than 36h: gone, but the newest is always kept": {
			look: scheduleLook{now: at(10, 5), since: at(10, 3), keep: &redisv1alpha1.BackupRetention{MaxAge: &metav1.Duration{Duration: 36 * time.Hour}},
				backups: []scheduledBackup{done("b0", 0), done("b1", 1)}},
			delete: []string{"b0"}, next: at(11, 3)},
		"a failed backup older than the newest completed one goes; a newer one stays": {
			look: scheduleLook{now: at(3, 5), since: at(3, 3), backups: []scheduledBackup{
				{name: "f0", phase: redisv1alpha1.BackupFailed, created: at(0, 3)}, done("b1", 1),
				{name: "f2", phase: redisv1alpha1.BackupFailed, created: at(2, 3)}}},
			delete: []string{"f0"}, next: at(4, 3)},
		"no retention: everything stays": {
			look: scheduleLook{now: at(3, 5), since: at(3, 3), backups: []scheduledBackup{done("b0", 0), done("b1", 1)}}, next: at(4, 3)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.look.schedule = daily
			d := planSchedule(tc.look)
			if !d.create.Equal(tc.create) || !slices.Equal(d.delete, tc.delete) || !d.next.Equal(tc.next) {
				t.Fatalf("create %s delete %v next %s, want %s %v %s", d.create, d.delete, d.next, tc.create, tc.delete, tc.next)
			}
		})
	}
}

// TestParseScheduleFloor: a schedule whose runs can come closer than MinScheduleInterval is
// refused, whichever form it has; the message names the field and the fix.
func TestParseScheduleFloor(t *testing.T) {
	cases := map[string]time.Duration{ // the interval; 0: refused
		"@every 5m":             5 * time.Minute,
		"@every 1h30m":          90 * time.Minute,
		"@every 1s":             0,
		"@every 4m59s":          0,
		"@hourly":               time.Hour,
		"@daily":                time.Hour,
		"0 3 * * *":             time.Hour,
		"*/5 * * * *":           5 * time.Minute,
		"*/15 2-4 * * 1-5":      15 * time.Minute,
		"0,30 * * * *":          30 * time.Minute,
		"* * * * *":             0,
		"*/2 * * * *":           0,
		"*/7 * * * *":           0, // 56, then 0: 4 minutes
		"*/11 * * * *":          5 * time.Minute,
		"0-4 * * * *":           0,
		"10-50/20 * * * *":      20 * time.Minute,
		"0,58 3 * * *":          0, // 3:58 and 4:00 never both run, but the floor reads the minutes alone
		"1,3,30 * * * *":        0,
		"0 3 31 2 *":            time.Hour, // never runs: parsed, not refused
		"CRON_TZ=UTC 0 3 * * *": time.Hour,
	}
	for spec, want := range cases {
		t.Run(spec, func(t *testing.T) {
			parsed, msg := parseSchedule(spec)
			if want == 0 {
				if parsed != nil || !strings.Contains(msg, "spec.schedule") || !strings.Contains(msg, "more often than every 5m0s") {
					t.Fatalf("parsed %v, message %q; want refused with a message naming spec.schedule and the floor", parsed, msg)
				}
				return
			}
			if parsed == nil {
				t.Fatalf("refused: %s", msg)
			}
			if got := scheduleInterval(parsed); got < want {
				t.Errorf("interval %s, want at least %s", got, want)
			}
		})
	}
	if _, msg := parseSchedule("61 * * * *"); !strings.Contains(msg, "cannot be parsed") {
		t.Errorf("minute 61: %q, want cannot be parsed", msg)
	}
}
