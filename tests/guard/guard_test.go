package guard_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/guard"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(context.Background(), 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	return m.Run()
}

// asOperator is a client that acts with the token of cfg.
func asOperator(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tenant creates a namespace holding an AppService (created by the admin: no operator runs
// in this package) and returns the namespace and the AppService.
func tenant(t *testing.T) (string, *appsv1api.AppService) {
	t.Helper()
	ns := env.NamespaceAt(t, "privileged") // Pod Security admits anything: only the guard refuses
	app := &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1api.AppServiceSpec{Image: "nginx:1.27", Size: ptr.To[int32](1)}}
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	return ns, app
}

// ownedBy is the controller reference the operator puts on its children.
func ownedBy(app *appsv1api.AppService) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: appsv1api.GroupVersion.String(), Kind: "AppService", Name: app.Name, UID: app.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// deployment is a Deployment as the operator builds one for app; ns may differ from app's.
func deployment(ns, name string, app *appsv1api.AppService) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: ownedBy(app)},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}},
		},
	}
}

// statefulSet is deployment's pod template in a StatefulSet.
func statefulSet(d *appsv1.Deployment) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}

// refusedByGuard fails unless err is the guard's refusal.
func refusedByGuard(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want refused by the admission guard", what)
	case !strings.Contains(err.Error(), guard.Marker):
		t.Errorf("%s: %v, want the admission guard's refusal", what, err)
	}
}

// podFaults are the pod template changes that would lift the operator's token: each is
// refused, while the same object without it is accepted.
var podFaults = map[string]func(*corev1.PodSpec){
	"another ServiceAccount": func(p *corev1.PodSpec) { p.ServiceAccountName = "builder" },
	"privileged": func(p *corev1.PodSpec) {
		p.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	},
	"privileged init container": func(p *corev1.PodSpec) {
		p.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
	},
	"SYS_ADMIN": func(p *corev1.PodSpec) {
		p.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
	},
	"hostNetwork": func(p *corev1.PodSpec) { p.HostNetwork = true },
	"hostPID":     func(p *corev1.PodSpec) { p.HostPID = true },
	"hostIPC":     func(p *corev1.PodSpec) { p.HostIPC = true },
	"hostPort": func(p *corev1.PodSpec) {
		p.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
	},
	"hostPath": func(p *corev1.PodSpec) {
		p.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	},
}

// TestTheGuardRefusesWhatWouldLiftTheOperatorsToken acts with the operator ServiceAccount's
// own token in a cluster-wide install (manager-role bound everywhere, as `make deploy` does):
// before config/guard is applied, the operator's start-up check finds it missing; once it is
// applied, the check finds it active and the token is refused a service-account-token
// Secret, a Deployment and a StatefulSet with each pod fault, an object no resource of the
// operator controls (in kube-system and an empty namespace too), the deletion of a pod that
// is no RedisCluster's and a change of the data of a Secret it does not own; the same objects
// without the fault are accepted, so each refusal is the fault's.
func TestTheGuardRefusesWhatWouldLiftTheOperatorsToken(t *testing.T) {
	ctx := t.Context()
	bare, err := env.OperatorConfig(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if state, err := guard.Check(ctx, asOperator(t, bare), testenv.OperatorNamespace); state != guard.Missing {
		t.Fatalf("without config/guard the start-up check says %s (%v), want missing", state, err)
	}
	guarded, err := env.OperatorConfig(ctx, true) // waits until CheckGuard says active
	if err != nil {
		t.Fatal(err)
	}
	op := asOperator(t, guarded)
	ns, app := tenant(t)

	// A service-account-token Secret: refused even owned by the AppService, in its namespace.
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token", OwnerReferences: ownedBy(app),
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
	refusedByGuard(t, "a service-account-token Secret", op.Create(ctx, token))
	plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain", OwnerReferences: ownedBy(app)},
		StringData: map[string]string{"password": "x"}}
	if err := op.Create(ctx, plain); err != nil {
		t.Errorf("an owned Opaque Secret: %v, want accepted", err)
	}

	// Each pod fault, in a Deployment and in a StatefulSet.
	for fault, apply := range podFaults {
		d := deployment(ns, "bad", app)
		apply(&d.Spec.Template.Spec)
		refusedByGuard(t, "a Deployment with "+fault, op.Create(ctx, d))
		refusedByGuard(t, "a StatefulSet with "+fault, op.Create(ctx, statefulSet(d)))
	}
	good := deployment(ns, "good", app)
	if err := op.Create(ctx, good); err != nil {
		t.Fatalf("a Deployment without a fault: %v, want accepted", err)
	}
	if err := op.Create(ctx, statefulSet(deployment(ns, "good", app))); err != nil {
		t.Errorf("a StatefulSet without a fault: %v, want accepted", err)
	}
	// An update that adds a fault to an accepted Deployment (read again on a conflict with
	// the Deployment controller's own writes).
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(good), live); err != nil { // the operator reads through its cache
			return err
		}
		live.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		return op.Update(ctx, live)
	})
	refusedByGuard(t, "an update making a Deployment privileged", err)

	// hostPath is the admin's to allow, per namespace.
	withHostPath := deployment(ns, "host-path", app)
	podFaults["hostPath"](&withHostPath.Spec.Template.Spec)
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["middleware-operator.io/allow-host-path"] = "true"
	if err := env.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		err := op.Create(ctx, withHostPath)
		return err == nil, fmt.Sprintf("a hostPath Deployment in a namespace labelled allow-host-path: %v", err)
	})

	// Objects the operator does not control.
	unowned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loose"}, Data: map[string]string{"a": "b"}}
	refusedByGuard(t, "a ConfigMap without an owner", op.Create(ctx, unowned))
	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users-own"}, StringData: map[string]string{"password": "theirs"}}
	if err := env.Client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	mine := &corev1.Secret{}
	if err := op.Get(ctx, client.ObjectKeyFromObject(users), mine); err != nil {
		t.Fatal(err)
	}
	changed := mine.DeepCopy()
	changed.Data["password"] = []byte("mine")
	refusedByGuard(t, "a change of the data of a user's Secret", op.Update(ctx, changed))
	labelled := mine.DeepCopy()
	labelled.Labels = map[string]string{"middleware-operator.io/watched": "true"}
	if err := op.Update(ctx, labelled); err != nil {
		t.Errorf("the watch label on a user's Secret: %v, want accepted", err)
	}
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "victim"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := env.Client.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	refusedByGuard(t, "deleting a pod that is no RedisCluster's", op.Delete(ctx, victim))
	checkClaimGrowth(t, op, ns)

	// Namespaces without any of the operator's resources: kube-system and an empty one. An
	// object with no owner of the operator's kinds is refused there as anywhere; the guard
	// does not check that a named owner exists (config/guard says why).
	empty := env.NamespaceAt(t, "privileged")
	for _, where := range []string{"kube-system", empty} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: where, Name: "stray"}}
		refusedByGuard(t, "a ConfigMap in "+where, op.Create(ctx, cm))
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: where, Name: "stray"}, StringData: map[string]string{"k": "v"}}
		refusedByGuard(t, "a Secret in "+where, op.Create(ctx, s))
		d := deployment(where, "stray", app)
		d.OwnerReferences = nil
		refusedByGuard(t, "a Deployment in "+where, op.Create(ctx, d))
	}
}

// TestTheGuardHoldsInANamespacedInstall binds manager-role in one namespace only (as
// config/overlays/namespaced and OLM OwnNamespace do): RBAC refuses the token everywhere
// else, and the guard still refuses it a service-account-token Secret and a privileged or
// hostNetwork Deployment in its own namespace, where it accepts the same Deployment without
// the fault.
func TestTheGuardHoldsInANamespacedInstall(t *testing.T) {
	ctx := t.Context()
	if _, err := env.OperatorConfig(ctx, true); err != nil { // the guard and the ServiceAccount
		t.Fatal(err)
	}
	own, app := tenant(t)
	elsewhere, other := tenant(t)
	const sa = testenv.OperatorServiceAccount
	saObj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: sa}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "manager-role"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: own, Name: sa}}}
	for _, o := range []client.Object{saObj, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.TokenConfig(ctx, own, sa)
	if err != nil {
		t.Fatal(err)
	}
	op := asOperator(t, cfg)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		state, err := guard.Check(ctx, op, own)
		return state == guard.Active, fmt.Sprintf("the start-up check in a namespaced install: %s (%v)", state, err)
	})

	if err := op.Create(ctx, deployment(elsewhere, "web", other)); !apierrors.IsForbidden(err) || strings.Contains(err.Error(), guard.Marker) {
		t.Errorf("a Deployment in another namespace: %v, want Forbidden by RBAC", err)
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "token", OwnerReferences: ownedBy(app),
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
	refusedByGuard(t, "a service-account-token Secret in its own namespace", op.Create(ctx, token))
	for _, fault := range []string{"privileged", "hostNetwork", "another ServiceAccount"} {
		d := deployment(own, "bad", app)
		podFaults[fault](&d.Spec.Template.Spec)
		refusedByGuard(t, "a Deployment with "+fault+" in its own namespace", op.Create(ctx, d))
	}
	if err := op.Create(ctx, deployment(own, "good", app)); err != nil {
		t.Errorf("a Deployment without a fault in its own namespace: %v, want accepted", err)
	}
}

// checkClaimGrowth: the token may raise the storage request of a RedisCluster's claim
// (spec.pod[0].volumes.size grew), and nothing else on a claim: not the request of a claim
// that is no RedisCluster's, not a claim's labels along with its request.
func checkClaimGrowth(t *testing.T, op client.Client, ns string) {
	t.Helper()
	ctx := t.Context()
	redis := map[string]string{"app.kubernetes.io/name": "rediscluster", "app.kubernetes.io/managed-by": "middleware-operator"}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for name, labels := range map[string]map[string]string{"data-rc-0": redis, "data-other-0": nil} {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		claims[name] = c
	}
	grow := func(name, size string, change func(*corev1.PersistentVolumeClaim)) error {
		live := &corev1.PersistentVolumeClaim{}
		testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claims[name]), live); err != nil {
				return false, err.Error()
			}
			return live.Status.Phase == corev1.ClaimBound, "claim " + name + " is " + string(live.Status.Phase)
		})
		grown := live.DeepCopy()
		grown.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
		if change != nil {
			change(grown)
		}
		return op.Patch(ctx, grown, client.MergeFrom(live))
	}
	if err := grow("data-rc-0", "2Gi", nil); err != nil {
		t.Errorf("a larger storage request on a RedisCluster's claim: %v, want accepted", err)
	}
	refusedByGuard(t, "a larger storage request on a claim that is no RedisCluster's", grow("data-other-0", "2Gi", nil))
	refusedByGuard(t, "a RedisCluster claim's labels changed with its request", grow("data-rc-0", "3Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Labels["extra"] = "x"
	}))
}
