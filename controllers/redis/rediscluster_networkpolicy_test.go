package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// operatorNamespace is the namespace the suite's reconciler believes it runs in.
const operatorNamespace = "middleware-operator-system"

// smallCluster is a three-master cluster without replicas: the cheapest one the API admits.
func smallCluster(ns, name string) *redisv1alpha1.RedisCluster {
	rc := redistest.NewCluster(ns, name, 3)
	rc.Spec.ReplicasPerMaster = ptr.To[int32](0)
	return rc
}

// TestRedisClusterNetworkPolicy: the operator keeps a NetworkPolicy with the rules,
// puts it back after a hand edit, and deletes it when spec.networkPolicy.enabled is false.
// The local cluster enforces no NetworkPolicy: this checks the objects, not the traffic.
func TestRedisClusterNetworkPolicy(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := smallCluster(ns, "fenced")
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{MonitorImage: "oliver006/redis_exporter:v1.62.0"}}
	rc.Spec.NetworkPolicy = &redisv1alpha1.NetworkPolicySpec{MetricsNamespace: "monitoring"}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	np := &networkingv1.NetworkPolicy{}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, key, np)
		return err == nil, fmt.Sprintf("NetworkPolicy %s: %v", key, err)
	})
	if err := env.Client.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(np, rc) {
		t.Errorf("the NetworkPolicy is not controlled by the RedisCluster: %v", np.OwnerReferences)
	}
	own := objectlabels.SelectorLabels(objectlabels.RedisClusterKind, "fenced")
	if !sameLabels(np.Spec.PodSelector.MatchLabels, own) ||
		!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("selects %v for %v, want the cluster's pods for ingress and egress", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) != 2 || len(np.Spec.Egress[0].To) != 1 || !sameLabels(np.Spec.Egress[0].To[0].PodSelector.MatchLabels, own) ||
		len(np.Spec.Egress[1].To) != 0 || np.Spec.Egress[1].Ports[0].Port.IntVal != 53 {
		t.Errorf("egress %+v, want the cluster's pods and DNS only", np.Spec.Egress)
	}
	// Who reaches each port: the API server stores the rules as the operator wrote them.
	want := map[int32][]string{
		resources.RedisPort:         {"namespace " + ns, "pods " + fmt.Sprint(own), "pods " + fmt.Sprint(resources.OperatorPodLabels()) + " in namespace " + operatorNamespace},
		resources.RedisBusPort:      {"pods " + fmt.Sprint(own)},
		resources.RedisExporterPort: {"namespace monitoring"},
	}
	if got := sourcesByPort(np); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sources by port\n got %v\nwant %v", got, want)
	}
	c := waitNetworkPolicyCondition(t, key, metav1.ConditionTrue, report.ReasonNetworkPolicyApplied)
	for _, part := range []string{"to port 6379 the pods of namespace " + ns + " (list spec.networkPolicy.clients to admit others), the cluster's pods and the operator's pods in namespace " + operatorNamespace,
		"to port 16379 the cluster's pods only", "to port 9121 namespace monitoring", "connect only to the cluster's pods (ports 6379, 16379) and to DNS"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("condition message %q does not say %q", c.Message, part)
		}
	}

	// A hand edit opening the bus port to everyone is reverted: the NetworkPolicy is not
	// watched, so within the minute after which children are ensured without an event.
	testenv.Update(t, env.Client, key, &networkingv1.NetworkPolicy{}, func(np *networkingv1.NetworkPolicy) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	})
	testenv.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, string) {
		cur := &networkingv1.NetworkPolicy{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		return len(cur.Spec.Ingress) == len(np.Spec.Ingress), fmt.Sprintf("%d ingress rules, want %d", len(cur.Spec.Ingress), len(np.Spec.Ingress))
	})

	// Turned off: deleted, and the condition says so.
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"networkPolicy":{"enabled":false}}}`)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, key, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), fmt.Sprintf("NetworkPolicy still there (%v)", err)
	})
	waitNetworkPolicyCondition(t, key, metav1.ConditionFalse, report.ReasonNetworkPolicyDisabled)
}

// TestRedisClusterNetworkPolicyWithoutGrant is an operator whose RBAC has no NetworkPolicy
// grant (an older bundle's, during an upgrade): its access check, a SelfSubjectAccessReview
// made as a ServiceAccount without that grant, says no, and a reconcile goes on without a
// NetworkPolicy, writes the NetworkPolicy condition and a Warning event that name the
// missing verbs and the fix, and sends no NetworkPolicy request. Once a Role grants the
// verbs, the same check says yes.
func TestRedisClusterNetworkPolicyWithoutGrant(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := smallCluster(ns, "ungranted")
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	waitRunning(t, key) // the suite's reconciler has formed it: the one below changes no topology

	saClient := serviceAccountClient(t, ns, "old-bundle")
	var writes testenv.WriteCounts
	var reads atomic.Int64
	capture := &statusCapture{Client: testenv.CountingClient{Client: mgr.GetClient(), ByWrite: &writes}}
	recorder := events.NewFakeRecorder(10)
	r := &rediscontrollers.RedisClusterReconciler{
		Client: capture, APIReader: networkPolicyReads{Reader: mgr.GetAPIReader(), n: &reads}, Scheme: env.Scheme, Recorder: recorder,
		NewAdmin: clusterconn.DefaultAdminFactory, OperatorNamespace: operatorNamespace,
		NetworkPolicyAccess: rediscontrollers.NewNetworkPolicyAccess(saClient),
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("a reconcile without the NetworkPolicy grant failed: %v", err)
	}
	for w := range writes.Reset() {
		if strings.HasSuffix(w, " NetworkPolicy") {
			t.Errorf("it wrote a NetworkPolicy without the grant: %s", w)
		}
	}
	if n := reads.Load(); n > 0 {
		t.Errorf("it read NetworkPolicies %d times without the grant", n)
	}
	c := capture.condition(report.ConditionNetworkPolicy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != report.ReasonMissingPermission {
		t.Fatalf("NetworkPolicy condition %+v, want False %s", c, report.ReasonMissingPermission)
	}
	for _, part := range []string{"get, create, update, delete networkpolicies.networking.k8s.io", "namespace " + ns, "upgrade the operator", "grant its ServiceAccount"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("condition message %q does not say %q", c.Message, part)
		}
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, corev1.EventTypeWarning+" "+report.ReasonMissingPermission+" ") || !strings.Contains(e, "networkpolicies") {
			t.Errorf("event %q, want a Warning %s naming networkpolicies", e, report.ReasonMissingPermission)
		}
	default:
		t.Error("no event")
	}

	// Granted by a Role, the same identity's check says yes (within the RBAC authorizer's
	// informer delay).
	grant(t, ns, "old-bundle", rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: rediscontrollers.NetworkPolicyVerbs})
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		missing, err := rediscontrollers.NewNetworkPolicyAccess(saClient).Missing(ctx, ns)
		return err == nil && len(missing) == 0, fmt.Sprintf("missing %v (%v)", missing, err)
	})

	// Those verbs without list and watch (a hand-trimmed role): the operator keeps the policy
	// and reads it from the API server, starting no informer that could not sync.
	if missing, err := rediscontrollers.NewNetworkPolicyCacheAccess(saClient).Missing(t.Context(), ns); err != nil || !slices.Equal(missing, []string{"list", "watch"}) {
		t.Fatalf("the list and watch check says missing %v (%v), want list and watch", missing, err)
	}
	reads.Store(0)
	granted := &statusCapture{Client: mgr.GetClient()}
	r = &rediscontrollers.RedisClusterReconciler{
		Client: granted, APIReader: networkPolicyReads{Reader: mgr.GetAPIReader(), n: &reads}, Scheme: env.Scheme, Recorder: events.NewFakeRecorder(10),
		NewAdmin: clusterconn.DefaultAdminFactory, OperatorNamespace: operatorNamespace, WatchNamespaces: []string{ns},
		NetworkPolicyAccess: rediscontrollers.NewNetworkPolicyAccess(saClient), NetworkPolicyCacheAccess: rediscontrollers.NewNetworkPolicyCacheAccess(saClient),
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("a reconcile without list and watch failed: %v", err)
	}
	c = granted.condition(report.ConditionNetworkPolicy)
	if c == nil { // no status write: the status already said what this reconcile found (the manager's reconcile wrote it first)
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(t.Context(), key, cur); err != nil {
			t.Fatal(err)
		}
		c = meta.FindStatusCondition(cur.Status.Conditions, report.ConditionNetworkPolicy)
	}
	if c == nil || c.Status != metav1.ConditionTrue || reads.Load() == 0 {
		t.Errorf("without list and watch: NetworkPolicy condition %+v after %d reads from the API server, want True after at least one", c, reads.Load())
	}
}

// TestRedisClusterNetworkPolicyRefused is an API server that refuses the NetworkPolicy
// although the access review allows it (an admission policy, say): the reconcile goes on
// without one and does not fail, and the NetworkPolicy condition and a Warning event say
// NetworkPolicyRefused with the API server's answer.
func TestRedisClusterNetworkPolicyRefused(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := smallCluster(ns, "refused")
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	waitRunning(t, key)
	// The suite's reconciler has made the NetworkPolicy: this one does not see it (neither in
	// its cache nor through the API reader), so it creates one, and that is refused.
	capture := &statusCapture{Client: refusingNetworkPolicies{Client: mgr.GetClient()}}
	recorder := events.NewFakeRecorder(10)
	r := &rediscontrollers.RedisClusterReconciler{
		Client: capture, APIReader: hidingNetworkPolicies{Reader: mgr.GetAPIReader()}, Scheme: env.Scheme, Recorder: recorder,
		NewAdmin: clusterconn.DefaultAdminFactory, OperatorNamespace: operatorNamespace,
	}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("a reconcile whose NetworkPolicy was refused failed: %v", err)
	}
	c := capture.condition(report.ConditionNetworkPolicy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != report.ReasonNetworkPolicyRefused || !strings.Contains(c.Message, "denied by policy") {
		t.Fatalf("NetworkPolicy condition %+v, want False %s with the API server's answer", c, report.ReasonNetworkPolicyRefused)
	}
	found := false
	for len(recorder.Events) > 0 {
		found = found || strings.HasPrefix(<-recorder.Events, corev1.EventTypeWarning+" "+report.ReasonNetworkPolicyRefused+" ")
	}
	if !found {
		t.Errorf("no Warning %s event", report.ReasonNetworkPolicyRefused)
	}
}

// refusingNetworkPolicies answers every NetworkPolicy write with Forbidden, as an admission
// policy would, and hides the NetworkPolicies from reads through its cache.
type refusingNetworkPolicies struct{ client.Client }

func (c refusingNetworkPolicies) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return hidingNetworkPolicies{Reader: c.Client}.Get(ctx, key, obj, opts...)
}

func (c refusingNetworkPolicies) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*networkingv1.NetworkPolicy); ok {
		return apierrors.NewForbidden(networkingv1.Resource("networkpolicies"), obj.GetName(), fmt.Errorf("denied by policy"))
	}
	return c.Client.Create(ctx, obj, opts...)
}

// hidingNetworkPolicies answers every NetworkPolicy read with NotFound.
type hidingNetworkPolicies struct{ client.Reader }

func (c hidingNetworkPolicies) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*networkingv1.NetworkPolicy); ok {
		return apierrors.NewNotFound(networkingv1.Resource("networkpolicies"), key.Name)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func waitNetworkPolicyCondition(t *testing.T, key client.ObjectKey, want metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		rc := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		c = meta.FindStatusCondition(rc.Status.Conditions, report.ConditionNetworkPolicy)
		return c != nil && c.Status == want && c.Reason == reason && c.ObservedGeneration == rc.Generation,
			fmt.Sprintf("NetworkPolicy condition %+v, want %s %s", c, want, reason)
	})
	return c
}

// sourcesByPort lists, for each port, who the rules let reach it.
func sourcesByPort(np *networkingv1.NetworkPolicy) map[int32][]string {
	out := map[int32][]string{}
	for _, rule := range np.Spec.Ingress {
		var from []string
		for _, peer := range rule.From {
			switch {
			case peer.PodSelector != nil && peer.NamespaceSelector == nil:
				from = append(from, "pods "+fmt.Sprint(peer.PodSelector.MatchLabels))
			case peer.NamespaceSelector != nil && peer.PodSelector == nil:
				from = append(from, "namespace "+peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			case peer.NamespaceSelector != nil && peer.PodSelector != nil:
				from = append(from, "pods "+fmt.Sprint(peer.PodSelector.MatchLabels)+" in namespace "+peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			default:
				from = append(from, fmt.Sprintf("%+v", peer))
			}
		}
		if len(rule.From) == 0 {
			from = []string{"any"}
		}
		for _, p := range rule.Ports {
			out[p.Port.IntVal] = append(out[p.Port.IntVal], from...)
		}
	}
	return out
}

func sameLabels(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// serviceAccountClient is a client authenticated as a new ServiceAccount of ns, which has
// no grant but what every authenticated user has.
func serviceAccountClient(t *testing.T, ns, name string) client.Client {
	t.Helper()
	if err := env.Client.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := env.Client.SubResource("token").Create(t.Context(), sa, tr); err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Cluster.Config)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant gives the ServiceAccount ns/name the rule in ns.
func grant(t *testing.T, ns, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// statusCapture keeps the last status a reconciler wrote.
type statusCapture struct {
	client.Client
	mu   sync.Mutex
	last *redisv1alpha1.RedisCluster
}

func (c *statusCapture) Status() client.SubResourceWriter {
	return capturingStatus{SubResourceWriter: c.Client.Status(), capture: c}
}

func (c *statusCapture) condition(typ string) *metav1.Condition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return nil
	}
	return meta.FindStatusCondition(c.last.Status.Conditions, typ)
}

type capturingStatus struct {
	client.SubResourceWriter
	capture *statusCapture
}

func (s capturingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if rc, ok := obj.(*redisv1alpha1.RedisCluster); ok {
		s.capture.mu.Lock()
		s.capture.last = rc.DeepCopy()
		s.capture.mu.Unlock()
	}
	return s.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

// networkPolicyReads counts the NetworkPolicy reads through a reader.
type networkPolicyReads struct {
	client.Reader
	n *atomic.Int64
}

func (c networkPolicyReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*networkingv1.NetworkPolicy); ok {
		c.n.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}
