package apps_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// readyTimeout bounds a bring-up of all three tiers on the local cluster.
const readyTimeout = 2 * time.Minute

// seedCloudManager is config/samples/apps_v1_cloudmanager.yaml, the CloudManager of seed 003,
// in namespace ns.
func seedCloudManager(t *testing.T, ns string) *appsv1api.CloudManager {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "config", "samples", "apps_v1_cloudmanager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cm := &appsv1api.CloudManager{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(cm); err != nil {
		t.Fatal(err)
	}
	cm.Namespace = ns
	// The sample's images run as root; the test namespaces enforce "restricted".
	cm.Spec.Front.Deployment.Security = testenv.RestrictedSecurity()
	cm.Spec.Identity.Deployment.Security = testenv.RestrictedSecurity()
	cm.Spec.DB.StatefulSet.Security = testenv.RestrictedSecurity()
	return cm
}

func getCM(ctx context.Context, key client.ObjectKey) (*appsv1api.CloudManager, error) {
	cm := &appsv1api.CloudManager{}
	return cm, env.Client.Get(ctx, key, cm)
}

func mustGetCM(t *testing.T, key client.ObjectKey) *appsv1api.CloudManager {
	t.Helper()
	cm, err := getCM(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func cmCondition(cm *appsv1api.CloudManager, typ string) string {
	c := meta.FindStatusCondition(cm.Status.Conditions, typ)
	if c == nil {
		return "missing"
	}
	return string(c.Status) + "/" + c.Reason
}

// waitReady waits until the CloudManager is Ready with its current generation.
func waitReady(t *testing.T, key client.ObjectKey, timeout time.Duration) *appsv1api.CloudManager {
	t.Helper()
	var cm *appsv1api.CloudManager
	testenv.Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		var err error
		if cm, err = getCM(ctx, key); err != nil {
			return false, err.Error()
		}
		return cm.Status.Phase == appsv1api.CloudManagerReady && cm.Status.ObservedGeneration == cm.Generation,
			fmt.Sprintf("phase %s, generation %d, status %+v", cm.Status.Phase, cm.Generation, cm.Status)
	})
	return cm
}

// updateCM re-reads the CloudManager and applies change, retrying on conflicts.
func updateCM(t *testing.T, key client.ObjectKey, change func(*appsv1api.CloudManager)) {
	t.Helper()
	testenv.Update(t, env.Client, key, &appsv1api.CloudManager{}, change)
}

func createCM(t *testing.T, cm *appsv1api.CloudManager) client.ObjectKey {
	t.Helper()
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(cm)
}

func mustGetObj[T client.Object](t *testing.T, ns, name string, obj T) T {
	t.Helper()
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// availableSince is when the Deployment's Available condition last turned True.
func availableSince(t *testing.T, d *appsv1.Deployment) metav1.Time {
	t.Helper()
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime
		}
	}
	t.Fatalf("Deployment %s is not Available: %+v", d.Name, d.Status.Conditions)
	return metav1.Time{}
}

// eventReasons are the reasons of the events about the CloudManager named name.
func eventReasons(t *testing.T, ns, name string) map[string][]string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "CloudManager" && e.InvolvedObject.Name == name {
			out[e.Reason] = append(out[e.Reason], e.Type+": "+e.Message)
		}
	}
	return out
}

func TestCloudManagerSeedSampleBecomesReadyInOrder(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key := createCM(t, seedCloudManager(t, ns))
	cm := waitReady(t, key, readyTimeout)

	for _, typ := range []string{"FrontReady", "IdentityReady", "DatabaseReady", "Ready"} {
		if got := cmCondition(cm, typ); !strings.HasPrefix(got, "True/") {
			t.Errorf("%s = %s", typ, got)
		}
	}
	if got := cmCondition(cm, "Degraded"); got != "False/Reconciled" {
		t.Errorf("Degraded = %s", got)
	}
	if cm.Status.Front != "1/1" || cm.Status.Identity != "1/1" || cm.Status.DB != "1/1" {
		t.Errorf("tiers %s %s %s, want 1/1 each", cm.Status.Front, cm.Status.Identity, cm.Status.DB)
	}

	// The order: identity was created once the front was Available, the database tier once
	// identity was.
	front := mustGetObj(t, ns, "ake-front", &appsv1.Deployment{})
	identity := mustGetObj(t, ns, "cm-identity", &appsv1.Deployment{})
	sts := mustGetObj(t, ns, "cm-db", &appsv1.StatefulSet{})
	svc := mustGetObj(t, ns, "cm-db", &corev1.Service{})
	secret := mustGetObj(t, ns, "cloudmanager-sample-db-auth", &corev1.Secret{})
	frontAvailable, identityAvailable := availableSince(t, front), availableSince(t, identity)
	if identity.CreationTimestamp.Before(&frontAvailable) {
		t.Errorf("identity created at %s, before the front became Available at %s", identity.CreationTimestamp, frontAvailable)
	}
	for _, obj := range []client.Object{sts, svc, secret} {
		if created := obj.GetCreationTimestamp(); created.Before(&identityAvailable) {
			t.Errorf("%T %s created at %s, before identity became Available at %s", obj, obj.GetName(), created, identityAvailable)
		}
	}
	for _, obj := range []client.Object{front, identity, sts, svc, secret} {
		if !metav1.IsControlledBy(obj, cm) {
			t.Errorf("%T %s is not controlled by the CloudManager", obj, obj.GetName())
		}
	}

	if c := front.Spec.Template.Spec.Containers[0]; c.Image != "nginx:1.20" {
		t.Errorf("front image %s", c.Image)
	}
	if c := identity.Spec.Template.Spec.Containers[0]; c.Image != "busybox:1.32.1" || !reflect.DeepEqual(c.Command, []string{"/bin/sh", "-c", "sleep 60m"}) {
		t.Errorf("identity image %s command %q", c.Image, c.Command)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || sts.Spec.ServiceName != "cm-db" {
		t.Errorf("Service clusterIP %q, StatefulSet serviceName %q: want a headless Service the StatefulSet names", svc.Spec.ClusterIP, sts.Spec.ServiceName)
	}
	if string(secret.Data["password"]) != "123456" {
		t.Error("the owned Secret does not hold spec.db.rootPass")
	}

	// The database pod runs with its volume Bound.
	pvc := mustGetObj(t, ns, "data-cm-db-0", &corev1.PersistentVolumeClaim{})
	if pvc.Status.Phase != corev1.ClaimBound || ptr.Deref(pvc.Spec.StorageClassName, "") != "local-path" ||
		!reflect.DeepEqual(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("PVC %s class %s modes %v", pvc.Status.Phase, ptr.Deref(pvc.Spec.StorageClassName, ""), pvc.Spec.AccessModes)
	}
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("PVC capacity %s, want 20Gi", got.String())
	}
	pod := mustGetObj(t, ns, "cm-db-0", &corev1.Pod{})
	claimed := false
	for _, v := range pod.Spec.Volumes {
		claimed = claimed || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "data-cm-db-0")
	}
	if pod.Status.Phase != corev1.PodRunning || !testenv.PodReady(pod) || !claimed {
		t.Errorf("pod %s ready %v volumes %+v, want Running, Ready, with claim data-cm-db-0", pod.Status.Phase, testenv.PodReady(pod), pod.Spec.Volumes)
	}

	testenv.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		reasons := eventReasons(t, ns, cm.Name)
		for _, want := range []string{"Created", "Deploying", "Ready", "PlainTextRootPassword"} {
			if len(reasons[want]) == 0 {
				return false, fmt.Sprintf("no %s event among %v", want, reasons)
			}
		}
		return len(reasons["Created"]) == 5, fmt.Sprintf("Created events %q, want one per child", reasons["Created"])
	})
}

func TestCloudManagerWaitsForEachTier(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// No pod may start, so the front never becomes Available.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := env.Client.Create(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	// The quota refuses pods only once the quota controller has counted the namespace
	// (status.hard); on a loaded machine that takes longer than the first pods do.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		q := &corev1.ResourceQuota{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(quota), q); err != nil {
			return false, err.Error()
		}
		_, counted := q.Status.Hard[corev1.ResourcePods]
		return counted, "the quota's status.hard has no pods yet"
	})
	cm := seedCloudManager(t, ns)
	cm.Spec.DB.RootPass = ""
	key := createCM(t, cm)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cm, err := getCM(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		// The refused pods are a problem the user must fix: Degraded, with the quota's message.
		d := meta.FindStatusCondition(cm.Status.Conditions, "Degraded")
		return cm.Status.Phase == appsv1api.CloudManagerDegraded && cmCondition(cm, "FrontReady") == "False/Progressing" &&
				cmCondition(cm, "IdentityReady") == "False/WaitingForPreviousTier" &&
				cmCondition(cm, "DatabaseReady") == "False/WaitingForPreviousTier" &&
				d != nil && d.Reason == "ReplicaFailure" && strings.Contains(d.Message, "exceeded quota"),
			fmt.Sprintf("status %+v", cm.Status)
	})
	time.Sleep(2 * time.Second) // give any (wrong) creation time to happen
	for name, obj := range map[string]client.Object{
		"cm-identity": &appsv1.Deployment{}, "cm-db": &appsv1.StatefulSet{}, "cloudmanager-sample-db-auth": &corev1.Secret{},
	} {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s exists before the front is Available: %v", obj, name, err)
		}
	}
	if got := mustGetCM(t, key).Status.Front; got != "0/1" {
		t.Errorf("status.front %s, want 0/1", got)
	}

	// Lift the quota; a new front size makes the ReplicaSet controller try again at once.
	if err := env.Client.Delete(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	updateCM(t, key, func(cm *appsv1api.CloudManager) { cm.Spec.Front.Deployment.Replicas = ptr.To[int32](2) })
	cmReady := waitReady(t, key, readyTimeout)
	if cmReady.Status.Front != "2/2" {
		t.Errorf("status.front %s, want 2/2", cmReady.Status.Front)
	}
}

func TestCloudManagerEnforcesTheSpec(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key := createCM(t, seedCloudManager(t, ns))
	waitReady(t, key, readyTimeout)
	frontUID := mustGetObj(t, ns, "ake-front", &appsv1.Deployment{}).UID

	// A new front image rolls the front Deployment (the same object, a new template).
	updateCM(t, key, func(cm *appsv1api.CloudManager) { cm.Spec.Front.Deployment.Image = "nginx:1.21" })
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ake-front"}, d); err != nil {
			return false, err.Error()
		}
		return d.UID == frontUID && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.21" &&
				d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.Replicas == 1,
			fmt.Sprintf("image %s, status %+v", d.Spec.Template.Spec.Containers[0].Image, d.Status)
	})
	waitReady(t, key, readyTimeout)

	// A manual edit of the database image is reverted.
	sts := &appsv1.StatefulSet{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts = mustGetObj(t, ns, "cm-db", &appsv1.StatefulSet{})
		sts.Spec.Template.Spec.Containers[0].Image = "mariadb:5"
		return env.Client.Update(t.Context(), sts)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		s := &appsv1.StatefulSet{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sts), s); err != nil {
			return false, err.Error()
		}
		return s.Spec.Template.Spec.Containers[0].Image == "mariadb:10.3.35", "image " + s.Spec.Template.Spec.Containers[0].Image
	})

	// Renaming identity deletes the old Deployment and creates the new one.
	updateCM(t, key, func(cm *appsv1api.CloudManager) { cm.Spec.Identity.Deployment.Name = "cm-identity-v2" })
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		oldErr := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-identity"}, &appsv1.Deployment{})
		d := &appsv1.Deployment{}
		newErr := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-identity-v2"}, d)
		return apierrors.IsNotFound(oldErr) && newErr == nil && d.DeletionTimestamp.IsZero(),
			fmt.Sprintf("old: %v, new: %v", oldErr, newErr)
	})
	cm := waitReady(t, key, readyTimeout)
	if d := mustGetObj(t, ns, "cm-identity-v2", &appsv1.Deployment{}); !metav1.IsControlledBy(d, cm) {
		t.Error("the renamed identity Deployment is not controlled by the CloudManager")
	}
	if reasons := eventReasons(t, ns, cm.Name); len(reasons["Deleted"]) != 1 || !strings.Contains(reasons["Deleted"][0], "Deployment cm-identity:") {
		t.Errorf("Deleted events %q, want one for Deployment cm-identity", reasons["Deleted"])
	}

	// Renaming the database (with its storage, which a StatefulSet cannot change) deletes the
	// old StatefulSet and its headless Service and creates new ones.
	updateCM(t, key, func(cm *appsv1api.CloudManager) {
		cm.Spec.DB.StatefulSet.Name = "cm-db-v2"
		cm.Spec.DB.StatefulSet.Storage.Size = "30Gi"
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		oldSts := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-db"}, &appsv1.StatefulSet{})
		oldSvc := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-db"}, &corev1.Service{})
		newSts := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-db-v2"}, &appsv1.StatefulSet{})
		return apierrors.IsNotFound(oldSts) && apierrors.IsNotFound(oldSvc) && newSts == nil,
			fmt.Sprintf("old StatefulSet: %v, old Service: %v, new StatefulSet: %v", oldSts, oldSvc, newSts)
	})
	waitReady(t, key, readyTimeout)
}

func TestCloudManagerNeverTouchesAnUnownedObject(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		foreign func(ns string) client.Object
		noPass  bool // leave rootPass out, so the password would be generated
		tier    string
		message string
	}{
		"front Deployment": {
			foreign: func(ns string) client.Object {
				return &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Name: "ake-front", Namespace: ns},
					Spec: appsv1.DeploymentSpec{
						Replicas: ptr.To[int32](1),
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
							Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
						},
					},
				}
			},
			tier: "FrontReady", message: `Deployment "ake-front" already exists and is not controlled by this resource`,
		},
		"password Secret": {
			foreign: func(ns string) client.Object {
				return &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: "cloudmanager-sample-db-auth", Namespace: ns},
					Data:       map[string][]byte{"password": []byte("theirs")},
				}
			},
			noPass: true, tier: "DatabaseReady",
			message: `Secret "cloudmanager-sample-db-auth" already exists and is not controlled by this resource`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			foreign := tc.foreign(ns)
			if err := env.Client.Create(t.Context(), foreign); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)                            // let the built-in controllers settle, so only we could change it
			before := foreign.DeepCopyObject().(client.Object) //nolint:forcetypeassert // same type
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), before); err != nil {
				t.Fatal(err)
			}
			cm := seedCloudManager(t, ns)
			if tc.noPass {
				cm.Spec.DB.RootPass = ""
			}
			key := createCM(t, cm)
			testenv.Eventually(t, readyTimeout, func(ctx context.Context) (bool, string) {
				cm, err := getCM(ctx, key)
				if err != nil {
					return false, err.Error()
				}
				c := meta.FindStatusCondition(cm.Status.Conditions, "Degraded")
				return cm.Status.Phase == appsv1api.CloudManagerDegraded && c != nil && c.Reason == "ChildNotControlled" &&
						strings.Contains(c.Message, tc.message) && cmCondition(cm, tc.tier) == "False/ChildNotControlled" &&
						cmCondition(cm, "Ready") == "False/Degraded",
					fmt.Sprintf("status %+v", cm.Status)
			})
			time.Sleep(2 * time.Second)                       // give any (wrong) write time to happen
			after := foreign.DeepCopyObject().(client.Object) //nolint:forcetypeassert // same type
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), after); err != nil {
				t.Fatal(err)
			}
			// A Deployment's or StatefulSet's status is written by its built-in controller as its
			// pods come up (on a loaded machine, after the second above): compare what a write
			// of the operator would change, its spec (generation), labels and annotations.
			changed := after.GetResourceVersion() != before.GetResourceVersion()
			if hasStatusWriter(foreign) {
				changed = after.GetGeneration() != before.GetGeneration() ||
					!maps.Equal(after.GetLabels(), before.GetLabels()) || !maps.Equal(after.GetAnnotations(), before.GetAnnotations())
			}
			if changed || len(after.GetOwnerReferences()) != 0 {
				t.Errorf("the unowned %T was modified: resourceVersion %s -> %s, generation %d -> %d, owners %v", foreign,
					before.GetResourceVersion(), after.GetResourceVersion(), before.GetGeneration(), after.GetGeneration(), after.GetOwnerReferences())
			}
			if s, ok := after.(*corev1.Secret); ok && string(s.Data["password"]) != "theirs" {
				t.Error("the unowned Secret's password was replaced")
			}
			testenv.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
				reasons := eventReasons(t, ns, cm.Name)
				return len(reasons["ChildNotControlled"]) > 0 && len(reasons["Degraded"]) > 0,
					fmt.Sprintf("no ChildNotControlled and Degraded Warnings among %v", reasons)
			})
		})
	}
}

func TestCloudManagerDeletionRemovesEverything(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key := createCM(t, seedCloudManager(t, ns))
	cm := waitReady(t, key, readyTimeout)
	if err := env.Client.Delete(t.Context(), cm, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	// The garbage collector rediscovers resources every 30s, so its first deletion after the
	// CRDs were installed may take that long.
	testenv.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, string) {
		left := map[string]int{}
		for kind, list := range map[string]client.ObjectList{
			"Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{}, "StatefulSet": &appsv1.StatefulSetList{},
			"Service": &corev1.ServiceList{}, "Secret": &corev1.SecretList{}, "PersistentVolumeClaim": &corev1.PersistentVolumeClaimList{},
			"Pod": &corev1.PodList{},
		} {
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			if n := meta.LenList(list); n > 0 {
				left[kind] = n
			}
		}
		err := env.Client.Get(ctx, key, &appsv1api.CloudManager{})
		return len(left) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("left: %v, CloudManager: %v", left, err)
	})
}

// hasStatusWriter says whether a built-in controller writes obj's status on its own.
func hasStatusWriter(obj client.Object) bool {
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet:
		return true
	}
	return false
}
