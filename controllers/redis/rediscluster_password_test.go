package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterRotatesThePassword: the user changes the password in the cluster's
// Secret while a writer runs with the old one. The operator rotates it without downtime:
// every node first accepts both passwords (a second writer with the new one starts then
// and never fails for long), then, after the grace period, only the new one. Every key the
// old writer had acknowledged reads back with the new password through every node; the
// old password works nowhere; a pod restarted afterwards starts with the new one; the old
// password never appears in the operator's logs or events.
func TestRedisClusterRotatesThePassword(t *testing.T) {
	t.Parallel()
	ns, key, rc, oldPw := formed(t, "rotate", 6, 3)
	entry := rc.Status.Nodes[0].Instance
	before := redistest.StartWriter(entry, oldPw)
	before.WaitWritten(t, 300)
	if got := exporterPassword(t.Context(), ns, "rotate"); got != oldPw {
		t.Errorf("before the rotation the exporter's password file holds %q, want the nodes' password", got)
	}
	newPw := "rotated-" + strings.Repeat("x", 8) + fmt.Sprint(time.Now().UnixNano())
	testenv.Update(t, env.Client, client.ObjectKey{Namespace: ns, Name: "rotate-password"}, &corev1.Secret{}, func(s *corev1.Secret) {
		s.Data["password"] = []byte(newPw)
	})
	changed := time.Now()
	condition := func(ctx context.Context) *metav1.Condition {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return nil
		}
		return meta.FindStatusCondition(cur.Status.Conditions, report.ConditionPasswordApplied)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		c := condition(ctx)
		return c != nil && c.Reason == report.ReasonPasswordRotating && strings.Contains(c.Message, "accepts both"),
			fmt.Sprintf("condition %v", c)
	})
	t.Logf("every node accepts both passwords %s after the Secret changed", time.Since(changed).Round(100*time.Millisecond))
	// Only now that every node accepts it does the exporter's password file move to it.
	if got := exporterPassword(t.Context(), ns, "rotate"); got != newPw {
		t.Errorf("once every node accepts both, the exporter's password file holds %q, want the new password", got)
	}
	after := redistest.StartWriter(entry, newPw)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		c := condition(ctx)
		return c != nil && c.Status == metav1.ConditionTrue && hasEvent(ctx, ns, "PasswordRotated"), fmt.Sprintf("condition %v", c)
	})
	t.Logf("the previous password was retired %s after the Secret changed", time.Since(changed).Round(100*time.Millisecond))
	time.Sleep(time.Second)
	written, outage := after.Stop()
	t.Logf("the writer with the new password wrote %d keys; its longest failing stretch %s", written, outage.Round(time.Millisecond))
	if outage > 2*time.Second {
		t.Errorf("the writer with the new password failed for %s during the rotation", outage)
	}
	for _, n := range rc.Status.Nodes {
		if ok, err := conn.Accepts(t.Context(), n.Instance, nil, conn.Login{Password: oldPw}); err != nil || ok {
			t.Errorf("%s still accepts the old password (%v)", n.Name, err)
		}
		if ok, err := conn.Accepts(t.Context(), n.Instance, nil, conn.Login{Password: newPw}); err != nil || !ok {
			t.Errorf("%s refuses the new password (%v)", n.Name, err)
		}
	}
	// A pod that restarts now starts with the new password from its Secret volume. The old
	// writer (its connections authenticated before the retirement still write) stops first,
	// and the node has written every acknowledged write to its append-only file: a SIGKILL'd
	// master loses what it acknowledged but had not replicated (a fresh-machine run lost one
	// key so) or not yet written (a CI run lost 3, the AOF write postponed behind a slow
	// fsync, and its replica resynchronised from it), which is not what this step is about.
	before.Stop()
	restarted := rc.Status.Nodes[1]
	redistest.WaitAOFWritten(t, restarted.Instance, newPw)
	if err := kubelet.Crash(ns, restarted.Name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		ok, err := conn.Accepts(ctx, restarted.Instance, nil, conn.Login{Password: newPw})
		return ok, fmt.Sprintf("%s after its restart: accepts the new password %t (%v)", restarted.Name, ok, err)
	})
	admin := execute.NewAdmin(newPw, time.Second)
	defer func() { _ = admin.Close() }()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		for _, n := range rc.Status.Nodes {
			info, err := admin.ClusterInfo(ctx, n.Instance)
			if err != nil || info["cluster_state"] != "ok" {
				return false, fmt.Sprintf("%s: cluster_state %q (%v)", n.Name, info["cluster_state"], err)
			}
		}
		return true, ""
	})
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	redistest.CliCheck(t, entry, newPw)
	before.Verify(t, env.Client, rc, newPw)
	after.Verify(t, env.Client, rc, newPw)
	if strings.Contains(logs.String(), oldPw) || strings.Contains(logs.String(), newPw) {
		t.Error("a password appears in the operator's logs")
	}
	evs := &corev1.EventList{}
	if err := env.Client.List(t.Context(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, oldPw) || strings.Contains(e.Message, newPw) {
			t.Errorf("event %s shows a password", e.Reason)
		}
	}
}

// exporterPassword is the password in the exporter's password file of cluster ns/name (the
// applied-password Secret's key the exporter sidecar mounts), or what went wrong.
func exporterPassword(ctx context.Context, ns, name string) string {
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-password-applied"}, secret); err != nil {
		return err.Error()
	}
	var file map[string]string
	if err := json.Unmarshal(secret.Data[resources.RedisExporterPasswordFileKey], &file); err != nil {
		return "not JSON: " + err.Error()
	}
	return file[resources.RedisExporterAddr]
}

// TestRedisClusterAddsTheExporterFileToAnOldRecord: an applied-password record written by an
// operator from before the exporter's password file (no such key) gets it, so the exporter
// sidecars of the new pod template can mount it.
func TestRedisClusterAddsTheExporterFileToAnOldRecord(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := smallCluster(ns, "oldrecord")
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, client.ObjectKeyFromObject(rc))
	pw := redistest.Password(t, env.Client, ns, "oldrecord")
	testenv.Update(t, env.Client, client.ObjectKey{Namespace: ns, Name: "oldrecord-password-applied"}, &corev1.Secret{}, func(s *corev1.Secret) {
		delete(s.Data, resources.RedisExporterPasswordFileKey)
	})
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		got := exporterPassword(ctx, ns, "oldrecord")
		return got == pw, fmt.Sprintf("the exporter's password file holds %q", got)
	})
}

// TestRedisClusterPasswordSecretWithANewline: the user's password Secret was made the usual
// way, kubectl create secret generic --from-file=password=./pw from a file echo wrote, so
// its value ends in a newline. The cluster forms, PasswordApplied is True, and a client
// logs in with the password without the newline (the nodes' start script and the operator
// drop it alike); the value with it is refused.
func TestRedisClusterPasswordSecretWithANewline(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const password = "typed-by-hand"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "from-file", Namespace: ns}, Data: map[string][]byte{"password": []byte(password + "\n")}}
	if err := env.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	rc := redistest.NewCluster(ns, "newline", 6)
	rc.Spec.PasswordSecret = secret.Name
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	if c := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionPasswordApplied); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PasswordApplied %v, want True", c)
	}
	for _, n := range rc.Status.Nodes {
		if ok, err := conn.Accepts(t.Context(), n.Instance, nil, conn.Login{Password: password}); err != nil || !ok {
			t.Errorf("%s refuses the password without the newline (%v)", n.Name, err)
		}
		if ok, err := conn.Accepts(t.Context(), n.Instance, nil, conn.Login{Password: password + "\n"}); err != nil || ok {
			t.Errorf("%s accepts the password with the newline (%v)", n.Name, err)
		}
	}
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, password)
}

// TestRedisClusterWaitsForAMissingPasswordSecret names a password Secret that does not exist
// yet: a reconcile reports it in Degraded and looks again after a bounded delay rather than
// failing into the error backoff, since no watch event can announce a Secret the operator
// has not labelled. Created later without the label, the Secret is found at such a look,
// labelled caching.WatchLabel, and the cluster forms.
func TestRedisClusterWaitsForAMissingPasswordSecret(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := smallCluster(ns, "later")
	rc.Spec.PasswordSecret = "not-yet"
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	r := &rediscontrollers.RedisClusterReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: env.Scheme,
		Recorder: events.NewFakeRecorder(100), NewAdmin: clusterconn.DefaultAdminFactory, OperatorNamespace: operatorNamespace}
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		return err == nil && res.RequeueAfter > 0 && res.RequeueAfter <= plan.LookIdle,
			fmt.Sprintf("a reconcile without the Secret: %+v, %v; want a requeue within %s and no error", res, err, plan.LookIdle)
	})
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionDegraded)
		return c != nil && strings.Contains(c.Message, `Secret "not-yet" not found`), fmt.Sprintf("Degraded %v", c)
	})

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-yet", Namespace: ns}, Data: map[string][]byte{"password": []byte("arrived-later")}}
	if err := env.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	redistest.WaitShape(t, env.Client, key, 3, 3)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	if secret.Labels[caching.WatchLabel] != caching.WatchLabelValue {
		t.Errorf("the Secret has labels %v, want %s=%s", secret.Labels, caching.WatchLabel, caching.WatchLabelValue)
	}
}
