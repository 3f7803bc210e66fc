package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestBackupGrammarFieldsAreCheckedAtAdmission applies RedisBackups, RedisBackupSchedules and
// restoring RedisClusters with each grammar field malformed (and a schedule below the 5
// minute floor) to the API server: each is refused with a message naming the field; the
// valid forms next to them are accepted.
func TestBackupGrammarFieldsAreCheckedAtAdmission(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dest := func(endpoint string) redisv1alpha1.ObjectStore {
		return redisv1alpha1.ObjectStore{Endpoint: endpoint, Bucket: "backups", CredentialsSecret: "creds"}
	}
	backupOf := func(d redisv1alpha1.ObjectStore) client.Object {
		return &redisv1alpha1.RedisBackup{Spec: redisv1alpha1.RedisBackupSpec{Cluster: "cache", Destination: d}}
	}
	scheduleOf := func(schedule string, keep *redisv1alpha1.BackupRetention) client.Object {
		return &redisv1alpha1.RedisBackupSchedule{Spec: redisv1alpha1.RedisBackupScheduleSpec{Cluster: "cache", Schedule: schedule,
			Destination: dest("https://s3.example.com"), Keep: keep}}
	}
	restoreFrom := func(d redisv1alpha1.ObjectStore) client.Object {
		rc := redistest.NewCluster(ns, "", 6)
		rc.Spec.Pause = true
		rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Source: &d}
		return rc
	}
	maxAge := func(s string) *redisv1alpha1.BackupRetention {
		return &redisv1alpha1.BackupRetention{MaxAge: &metav1.Duration{Duration: mustDuration(t, s)}}
	}
	cases := map[string]struct {
		obj  client.Object
		want []string // none: accepted
	}{
		"an endpoint with a path":            {obj: backupOf(dest("https://s3.example.com/bucket")), want: []string{"spec.destination.endpoint", "https://host[:port]"}},
		"an endpoint with a user":            {obj: backupOf(dest("https://key:secret@s3.example.com")), want: []string{"spec.destination.endpoint", "without user"}},
		"an endpoint of another scheme":      {obj: backupOf(dest("ftp://s3.example.com")), want: []string{"spec.destination.endpoint"}},
		"an endpoint's port out of range":    {obj: backupOf(dest("https://s3.example.com:70000")), want: []string{"spec.destination.endpoint", "between 1 and 65535"}},
		"an endpoint's port of zero":         {obj: backupOf(dest("https://s3.example.com:0")), want: []string{"spec.destination.endpoint", "between 1 and 65535"}},
		"an IPv6 endpoint":                   {obj: backupOf(dest("https://[fd00::1]:9000"))},
		"an endpoint with a port":            {obj: backupOf(dest("https://minio.backup.svc:9000/"))},
		"a restore source with a query":      {obj: restoreFrom(dest("https://s3.example.com?x=1")), want: []string{"spec.restore.source.endpoint"}},
		"a restore source's bad port":        {obj: restoreFrom(dest("https://s3.example.com:99999")), want: []string{"spec.restore.source.endpoint", "between 1 and 65535"}},
		"a schedule of six fields":           {obj: scheduleOf("0 0 3 * * *", nil), want: []string{"spec.schedule", "five cron fields"}},
		"a schedule with a time zone":        {obj: scheduleOf("CRON_TZ=Europe/Paris 0 3 * * *", nil), want: []string{"spec.schedule", "five cron fields"}},
		"a schedule of words":                {obj: scheduleOf("every day", nil), want: []string{"spec.schedule", "five cron fields"}},
		"@every without a unit":              {obj: scheduleOf("@every 300", nil), want: []string{"spec.schedule", "five cron fields"}},
		"@every second":                      {obj: scheduleOf("@every 1s", nil), want: []string{"spec.schedule", "more often than every 5 minutes", "@every 5m"}},
		"@every 4m59s":                       {obj: scheduleOf("@every 4m59s", nil), want: []string{"spec.schedule", "more often than every 5 minutes"}},
		"@every 5m":                          {obj: scheduleOf("@every 5m", nil)},
		"every minute":                       {obj: scheduleOf("* * * * *", nil), want: []string{"spec.schedule", "more often than every 5 minutes", "*/15"}},
		"every 2 minutes":                    {obj: scheduleOf("*/2 * * * *", nil), want: []string{"spec.schedule", "more often than every 5 minutes"}},
		"every 7 minutes, 4 across the hour": {obj: scheduleOf("*/7 * * * *", nil), want: []string{"spec.schedule", "more often than every 5 minutes"}},
		"minutes 0 and 58":                   {obj: scheduleOf("0,58 3 * * *", nil), want: []string{"spec.schedule", "more often than every 5 minutes"}},
		"a range of minutes":                 {obj: scheduleOf("0-4 * * * *", nil), want: []string{"spec.schedule", "more often than every 5 minutes"}},
		"every 15 minutes":                   {obj: scheduleOf("*/15 * * * 1-5", nil)},
		"twice an hour":                      {obj: scheduleOf("0,30 * * * *", nil)},
		"daily":                              {obj: scheduleOf("0 3 * * *", nil)},
		"a stepped range, for the operator":  {obj: scheduleOf("10-50/20 * * * *", nil)},
		"a maxAge of zero":                   {obj: scheduleOf("@daily", maxAge("0s")), want: []string{"spec.keep.maxAge", "positive duration"}},
		"a maxAge of a week":                 {obj: scheduleOf("@daily", maxAge("168h"))},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			tc.obj.SetNamespace(ns)
			tc.obj.SetName(fmt.Sprintf("grammar-%d", i))
			assertAdmission(t, env.Client.Create(t.Context(), tc.obj), tc.want)
		})
	}
}

// mustDuration parses a Go duration.
func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestScheduleBelowTheFloorIsRefusedByTheOperator: a minute field the API server's rules
// cannot judge (a stepped range) that runs every 2 minutes is refused by the operator: the
// condition Scheduled is False with a message naming spec.schedule and the floor, and no
// backup is created.
func TestScheduleBelowTheFloorIsRefusedByTheOperator(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sch := &redisv1alpha1.RedisBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stepped"},
		Spec: redisv1alpha1.RedisBackupScheduleSpec{Cluster: "cache", Schedule: "1-59/2 * * * *",
			Destination: redisv1alpha1.ObjectStore{Endpoint: "https://s3.example.com", Bucket: "backups", CredentialsSecret: "creds"}}}
	if err := env.Client.Create(t.Context(), sch); err != nil {
		t.Fatalf("the API server refused a form its rules leave to the operator: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sch), sch); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(sch.Status.Conditions, redisbackup.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == redisbackup.ReasonScheduleInvalid &&
			strings.Contains(c.Message, "spec.schedule") && strings.Contains(c.Message, "more often than every 5m0s"), fmt.Sprintf("condition %+v", c)
	})
	backups := &redisv1alpha1.RedisBackupList{}
	if err := env.Client.List(t.Context(), backups, client.InNamespace(ns)); err != nil || len(backups.Items) != 0 {
		t.Errorf("%d backups (%v), want none", len(backups.Items), err)
	}
}
