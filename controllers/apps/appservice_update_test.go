package apps_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/controllers/apps"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// statusWrites counts, from when countStatusWrites made it, the updates of one AppService
// that leave its generation as it was: the operator's status writes (nothing else writes it
// in a test). A watch delivers after the API server answers a read, so a test that has just
// read a version asks Through that version, not Load.
type statusWrites struct {
	mu   sync.Mutex
	n    int64
	seen map[string]int64 // resourceVersion → writes counted up to and including it
}

// Load returns the writes counted so far.
func (w *statusWrites) Load() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Through waits until the watch has delivered the object's resourceVersion rv and returns the
// writes counted up to and including it.
func (w *statusWrites) Through(t *testing.T, rv string) int64 {
	t.Helper()
	var n int64
	testenv.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		var ok bool
		n, ok = w.seen[rv]
		return ok, "the watch has not delivered resourceVersion " + rv
	})
	return n
}

// countStatusWrites starts counting the status writes of the AppService key.
func countStatusWrites(t *testing.T, key client.ObjectKey) *statusWrites {
	t.Helper()
	wc, err := client.NewWithWatch(env.Cluster.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	app := mustGet(t, key)
	w, err := wc.Watch(t.Context(), &appsv1api.AppServiceList{}, client.InNamespace(key.Namespace),
		client.MatchingFields{"metadata.name": key.Name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: app.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	sw := &statusWrites{seen: map[string]int64{app.ResourceVersion: 0}}
	gen := app.Generation
	go func() {
		for ev := range w.ResultChan() {
			a, ok := ev.Object.(*appsv1api.AppService)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			sw.mu.Lock()
			if a.Generation == gen {
				sw.n++
			}
			sw.seen[a.ResourceVersion] = sw.n
			sw.mu.Unlock()
			gen = a.Generation
		}
	}()
	return sw
}

// appEvents counts the events of the AppService named name in ns by type and reason.
func appEvents(ctx context.Context, ns, name string) (map[string]int, error) {
	list := &corev1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "AppService" && e.InvolvedObject.Name == name {
			out[e.Type+"/"+e.Reason]++
		}
	}
	return out, nil
}

// availableApp creates the seed's AppService in a namespace of its own and waits for it to
// be Available.
func availableApp(t *testing.T, nodePort int32) (string, client.ObjectKey) {
	t.Helper()
	app := seedAppService(env.Namespace(t), nodePort)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	waitAvailable(t, key, 2)
	return app.Namespace, key
}

// TestAppServiceImageUpdateWritesItsStatusOnce: an image change costs the Deployment's
// update and one status write, the settled one; no event repeats what the status says.
func TestAppServiceImageUpdateWritesItsStatusOnce(t *testing.T) {
	t.Parallel()
	ns, key := availableApp(t, 30015)
	before, err := appEvents(t.Context(), ns, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	writes := countStatusWrites(t, key)
	updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.Image = "nginx:1.28" })
	waitDeployment(t, key, "the new image, rolled out", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.28" && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == 2 && d.Status.Replicas == 2 && d.Status.AvailableReplicas == 2
	})
	waitAvailable(t, key, 2)
	time.Sleep(2 * time.Second) // a late (wrong) write or event
	if n := writes.Load(); n != 1 {
		t.Errorf("%d status writes for an image change, want 1 (the settled status)", n)
	}
	after, err := appEvents(t.Context(), ns, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range after {
		if v != before[k] {
			t.Errorf("%d %s events for an image change (before it %d), want none: the status says it", v-before[k], k, before[k])
		}
	}
}

// TestAppServiceStalledRolloutIsReported: a rollout under way writes no status while it
// moves (not after StatusInterval either); once the Deployment is past its progress
// deadline the status says ProgressDeadlineExceeded, with one Warning, and when the rollout
// is fixed and over the status settles with nothing stale.
func TestAppServiceStalledRolloutIsReported(t *testing.T) {
	t.Parallel()
	ns, key := availableApp(t, 30016)
	writes := countStatusWrites(t, key)

	// kwok leaves pods with this annotation Pending: the new pods never get Ready.
	updateApp(t, key, func(a *appsv1api.AppService) {
		a.Spec.Image = "nginx:1.28"
		a.Spec.PodAnnotations = map[string]string{"kwok.x-k8s.io/status": "custom"}
	})
	waitDeployment(t, key, "the new image, observed", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.28" && d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 3
	})
	time.Sleep(apps.StatusInterval + 3*time.Second)
	if n := writes.Load(); n != 0 {
		t.Errorf("%d status writes while the rollout was under way, want 0: the Deployment's status says it", n)
	}
	if cur := mustGet(t, key); condition(cur, "Available") != "True/MinimumReplicasAvailable" {
		t.Errorf("Available %s while the old pods serve", condition(cur, "Available"))
	}

	// The deadline, shortened on the Deployment (the AppService leaves it to the default).
	testenv.Update(t, env.Client, key, &appsv1.Deployment{}, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To[int32](2) })
	start := time.Now()
	var stalled string
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		stalled = cur.ResourceVersion
		return condition(cur, "Degraded") == "True/ProgressDeadlineExceeded" && condition(cur, "Progressing") == "True/RollingOut" &&
			cur.Status.ObservedGeneration == cur.Generation, fmt.Sprintf("status %+v", cur.Status)
	})
	t.Logf("the stall showed %.1f s after the 2 s deadline was set", time.Since(start).Seconds())
	if n := writes.Through(t, stalled); n != 1 {
		t.Errorf("%d status writes until the stall showed, want 1", n)
	}
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		evs, err := appEvents(ctx, ns, key.Name)
		if err != nil {
			return false, err.Error()
		}
		return evs["Warning/ProgressDeadlineExceeded"] == 1, fmt.Sprintf("events %v, want one Warning ProgressDeadlineExceeded", evs)
	})

	updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.PodAnnotations = nil })
	waitAvailable(t, key, 2)
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		cur, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return condition(cur, "Degraded") == "False/Reconciled" && cur.Status.UpdatedReplicas == 2 && cur.Status.Replicas == 2,
			fmt.Sprintf("status %+v after the rollout", cur.Status)
	})
	evs, err := appEvents(t.Context(), ns, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	if evs["Normal/Updated"] != 0 || evs["Warning/ProgressDeadlineExceeded"] != 1 {
		t.Errorf("events %v: want no Updated (the user's own changes) and one Warning", evs)
	}
}

// TestAppServiceFailedImageIsReported: an image that cannot be pulled shows in the status
// (Degraded, with the container's reason, its pod and what to fix) and in one Warning
// within PodCheckAfter of the rollout's last progress, long before the Deployment's
// progress deadline; the old pods keep the AppService Available; a good image clears it.
func TestAppServiceFailedImageIsReported(t *testing.T) {
	t.Parallel()
	ns, key := availableApp(t, 30017)
	const bad = "nginx:no-such-tag"
	// kwok leaves pods with this annotation alone: the test is their kubelet.
	updateApp(t, key, func(a *appsv1api.AppService) {
		a.Spec.Image = bad
		a.Spec.PodAnnotations = map[string]string{"kwok.x-k8s.io/status": "custom"}
	})
	start := time.Now()
	var failed string
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != bad || len(p.Status.ContainerStatuses) > 0 {
				continue
			}
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: bad, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: `failed to pull image "` + bad + `": not found`}}}}
			if err := env.Client.Status().Update(ctx, &p); err != nil {
				return false, err.Error()
			}
			failed = p.Name
		}
		return failed != "", "no pod of the new image yet"
	})
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Degraded")
		return c != nil && condition(cur, "Degraded") == "True/ErrImagePull" && strings.Contains(c.Message, "pod "+failed) &&
				strings.Contains(c.Message, bad) && strings.Contains(c.Message, "spec.image") &&
				condition(cur, "Available") == "True/MinimumReplicasAvailable" && condition(cur, "Progressing") == "True/RollingOut" &&
				cur.Status.ObservedGeneration == cur.Generation,
			fmt.Sprintf("status %+v", cur.Status)
	})
	d := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), key, d); err != nil {
		t.Fatal(err)
	}
	if stuck := deploymentProgress(d); stuck == "ProgressDeadlineExceeded" {
		t.Errorf("the Deployment is past its deadline already: the failed image was to show before it")
	}
	t.Logf("the failed image showed %.1f s after the update (check after %s, deadline %d s)", time.Since(start).Seconds(), podCheckAfter, ptr.Deref(d.Spec.ProgressDeadlineSeconds, 600))
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		evs, err := appEvents(ctx, ns, key.Name)
		if err != nil {
			return false, err.Error()
		}
		return evs["Warning/ErrImagePull"] == 1, fmt.Sprintf("events %v, want one Warning ErrImagePull", evs)
	})

	updateApp(t, key, func(a *appsv1api.AppService) {
		a.Spec.Image = "nginx:1.28"
		a.Spec.PodAnnotations = nil
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return condition(cur, "Degraded") == "False/Reconciled" && condition(cur, "Progressing") == "False/RolloutComplete" &&
				cur.Status.UpdatedReplicas == 2 && cur.Status.Replicas == 2 && cur.Status.ObservedGeneration == cur.Generation,
			fmt.Sprintf("status %+v after the good image", cur.Status)
	})
}

// deploymentProgress is the reason of d's Progressing condition.
func deploymentProgress(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Reason
		}
	}
	return ""
}
