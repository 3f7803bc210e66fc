package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// claimSizes are the requested and the actual sizes of the cluster's claims, by name.
func claimSizes(ctx context.Context, t *testing.T, ns, name string) (requested, capacity map[string]string) {
	t.Helper()
	claims := &corev1.PersistentVolumeClaimList{}
	if err := env.Client.List(ctx, claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	requested, capacity = map[string]string{}, map[string]string{}
	for _, c := range claims.Items {
		if strings.HasPrefix(c.Name, "data-"+name+"-") {
			requested[c.Name] = c.Spec.Resources.Requests.Storage().String()
			capacity[c.Name] = c.Status.Capacity.Storage().String()
		}
	}
	return requested, capacity
}

// waitClaims waits until the cluster has n claims, each asking for and having size.
func waitClaims(t *testing.T, ns, name string, n int, size string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		requested, capacity := claimSizes(ctx, t, ns, name)
		ok := len(requested) == n
		for c := range requested {
			ok = ok && requested[c] == size && capacity[c] == size
		}
		return ok, fmt.Sprintf("requested %v, capacity %v", requested, capacity)
	})
}

// TestRedisClusterGrowsVolumesInPlace raises spec.pod[0].volumes.size from 1Gi to 2Gi under
// a writer: every claim grows in place, the StatefulSet is recreated with its pods kept
// (none restarts: their UIDs stay), a node added afterwards gets 2Gi, and no write fails or
// is lost. A shrink is refused at admission.
func TestRedisClusterGrowsVolumesInPlace(t *testing.T) {
	t.Parallel()
	ns, key, pw, w := writtenCluster(t, "grow", "")
	waitClaims(t, ns, "grow", 6, "1Gi")
	pods := podUIDs(t, ns, "grow")
	oldSts := &appsv1.StatefulSet{}
	if err := env.Client.Get(t.Context(), key, oldSts); err != nil {
		t.Fatal(err)
	}

	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pod":[{"volumes":{"size":"2Gi"}}]}}`)
	waitClaims(t, ns, "grow", 6, "2Gi")
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		sts := &appsv1.StatefulSet{}
		if err := env.Client.Get(ctx, key, sts); err != nil {
			return false, err.Error()
		}
		size := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()
		return sts.UID != oldSts.UID && size == "2Gi", fmt.Sprintf("StatefulSet %s with claims of %s", sts.UID, size)
	})
	cond := waitCondition(t, key, report.ConditionVolumeSize, metav1.ConditionTrue, report.ReasonVolumesAtSize)
	t.Logf("VolumeSize: %s", cond.Message)
	rc := redistest.WaitShape(t, env.Client, key, 3, 6)
	// The pods were orphaned and adopted, not replaced.
	for name, uid := range podUIDs(t, ns, "grow") {
		if pods[name] != uid {
			t.Errorf("pod %s was replaced during the resize", name)
		}
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		adopted := 0
		for _, p := range listPods(ctx, t, ns, "grow") {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "StatefulSet" && ref.UID != oldSts.UID {
				adopted++
			}
		}
		return adopted == 6, fmt.Sprintf("%d of 6 pods adopted by the new StatefulSet", adopted)
	})
	if rc.Status.Volumes == nil || len(rc.Status.Volumes.Claims) != 6 || rc.Status.Volumes.Claims[0].Capacity != "2Gi" || rc.Status.Volumes.Resizing != "" {
		t.Errorf("status.volumes %+v, want 6 claims of 2Gi and no resize under way", rc.Status.Volumes)
	}

	// A smaller size is refused at admission.
	rcNow := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), key, rcNow); err != nil {
		t.Fatal(err)
	}
	err := env.Client.Patch(t.Context(), rcNow, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"pod":[{"volumes":{"size":"1Gi"}}]}}`)))
	if err == nil || !strings.Contains(err.Error(), "cannot shrink") {
		t.Errorf("a shrink to 1Gi was not refused at admission: %v", err)
	}

	// A node added afterwards gets a claim of 2Gi.
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"replicas":8}}`)
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	waitClaims(t, ns, "grow", 8, "2Gi")

	if failures, lastErr := w.Failures(); failures > 0 {
		t.Errorf("%d writes failed during the resize, the last with %v", failures, lastErr)
	}
	written, outage := w.Stop()
	t.Logf("%d keys written; longest write outage %s", written, outage)
	w.Verify(t, env.Client, rc, pw)
}

// TestRedisClusterRefusesVolumeResizes: a larger size on a StorageClass without expansion
// (refused by the API server's resize admission on the claim's patch: the operator reads no
// StorageClass), and a size below the claims' (the field removed, so the 1Gi default, which admission cannot
// compare) are refused with the VolumeSize condition and a Warning event, and no claim or
// StatefulSet changes.
func TestRedisClusterRefusesVolumeResizes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "fixed", 6)
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Volumes: &redisv1alpha1.Volumes{Size: ptrQuantity("2Gi"), StorageClassName: "local-path"}}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	waitRunning(t, key)
	waitClaims(t, ns, "fixed", 6, "2Gi")
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(t.Context(), key, sts); err != nil {
		t.Fatal(err)
	}

	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pod":[{"volumes":{"size":"3Gi","storageClassName":"local-path"}}]}}`)
	cond := waitCondition(t, key, report.ConditionVolumeSize, metav1.ConditionFalse, report.ReasonVolumeExpansionNotAllowed)
	// The operator reads no StorageClass: this is the API server's refusal of the claim's patch.
	t.Logf("VolumeSize: %s", cond.Message)
	for _, part := range []string{`"local-path"`, "only dynamically provisioned pvc can be resized", "allowVolumeExpansion: true", "new RedisCluster"} {
		if !strings.Contains(cond.Message, part) {
			t.Errorf("the condition does not say %q (the class, the API server's cause, the fixes): %s", part, cond.Message)
		}
	}
	waitEvent(t, ns, report.ReasonVolumeExpansionNotAllowed, "local-path")

	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pod":[{"volumes":{"storageClassName":"local-path"}}]}}`)
	cond = waitCondition(t, key, report.ConditionVolumeSize, metav1.ConditionFalse, report.ReasonVolumeShrinkRefused)
	if !strings.Contains(cond.Message, "cannot shrink") || !strings.Contains(cond.Message, "2Gi") {
		t.Errorf("the condition names neither the cause nor the size to set: %s", cond.Message)
	}
	waitEvent(t, ns, report.ReasonVolumeShrinkRefused, "cannot shrink")

	// Nothing changed: the claims, the StatefulSet and its claim template.
	time.Sleep(3 * time.Second)
	requested, capacity := claimSizes(t.Context(), t, ns, "fixed")
	for c := range requested {
		if requested[c] != "2Gi" || capacity[c] != "2Gi" {
			t.Errorf("claim %s asks %s and has %s after refused resizes, want 2Gi", c, requested[c], capacity[c])
		}
	}
	now := &appsv1.StatefulSet{}
	if err := env.Client.Get(t.Context(), key, now); err != nil {
		t.Fatal(err)
	}
	if now.UID != sts.UID || now.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "2Gi" {
		t.Errorf("the StatefulSet changed after refused resizes: UID %s (was %s), claims of %s", now.UID, sts.UID,
			now.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage())
	}
}

// writtenCluster creates a Running cluster of six nodes with claims of 1Gi of class (the
// default class when empty), and a writer that has written 300 keys to it.
func writtenCluster(t *testing.T, name, class string) (string, client.ObjectKey, string, *redistest.Writer) {
	t.Helper()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, name, 6)
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Volumes: &redisv1alpha1.Volumes{Size: ptrQuantity("1Gi"), StorageClassName: class}}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	pw := redistest.Password(t, env.Client, ns, name)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	return ns, key, pw, w
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// listPods lists the pods of the cluster name.
func listPods(ctx context.Context, t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, name))); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// TestRedisClusterRestartsPodsForAnOfflineFilesystemResize grows claims whose filesystem
// grows only at the pod's next start (the local cluster's kwok-offline-resize class): every
// pod is restarted, one at a time with masters failed over first, until every claim has
// 2Gi, and no acknowledged key is lost.
func TestRedisClusterRestartsPodsForAnOfflineFilesystemResize(t *testing.T) {
	t.Parallel()
	ns, key, pw, w := writtenCluster(t, "offline", localcluster.OfflineResizeStorageClass)
	pods := podUIDs(t, ns, "offline")

	redistest.PatchSpec(t, env.Client, key, fmt.Sprintf(`{"spec":{"pod":[{"volumes":{"size":"2Gi","storageClassName":%q}}]}}`, localcluster.OfflineResizeStorageClass))
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		_, capacity := claimSizes(ctx, t, ns, "offline")
		grown := 0
		for _, c := range capacity {
			if c == "2Gi" {
				grown++
			}
		}
		return grown == 6, fmt.Sprintf("%d of 6 claims have 2Gi", grown)
	})
	waitCondition(t, key, report.ConditionVolumeSize, metav1.ConditionTrue, report.ReasonVolumesAtSize)
	rc := redistest.WaitShape(t, env.Client, key, 3, 6)
	for name, uid := range podUIDs(t, ns, "offline") {
		if pods[name] == uid {
			t.Errorf("pod %s was not restarted to grow its filesystem", name)
		}
	}
	if !hasEvent(t.Context(), ns, "FailedOver") {
		t.Errorf("no master failed over before its pod restarted")
	}
	failures, lastErr := w.Failures()
	written, outage := w.Stop()
	t.Logf("%d keys written, %d writes failed (last: %v); longest write outage %s", written, failures, lastErr, outage)
	w.Verify(t, env.Client, rc, pw)
}
