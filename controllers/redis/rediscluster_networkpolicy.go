package redis

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// NetworkPolicyVerbs are the verbs ensureNetworkPolicy needs on NetworkPolicies to keep one.
var NetworkPolicyVerbs = []string{"get", "create", "update", "delete"}

// NetworkPolicyCacheVerbs are the verbs an informer of NetworkPolicies needs. With them, where
// the operator's cache lists (every namespace, or the cluster's namespace when the operator
// watches a list of namespaces), ensureNetworkPolicy reads NetworkPolicies from the cache,
// whose label-selected informer starts at the first read. Without them (an RBAC that grants
// only NetworkPolicyVerbs, such as an older bundle's during an upgrade) it reads them from the
// API server: an informer started under such an RBAC would never sync.
var NetworkPolicyCacheVerbs = []string{"list", "watch"}

// NewNetworkPolicyAccess is the access check of NetworkPolicyVerbs through c.
func NewNetworkPolicyAccess(c client.Client) *child.Access {
	return &child.Access{Client: c, Group: networkingv1.GroupName, Resource: "networkpolicies", Verbs: NetworkPolicyVerbs}
}

// NewNetworkPolicyCacheAccess is the access check of NetworkPolicyCacheVerbs through c.
func NewNetworkPolicyCacheAccess(c client.Client) *child.Access {
	return &child.Access{Client: c, Group: networkingv1.GroupName, Resource: "networkpolicies", Verbs: NetworkPolicyCacheVerbs}
}

// informerSyncWait bounds a read from the cache whose informer has not listed yet.
const informerSyncWait = 10 * time.Second

// ensureNetworkPolicy keeps the cluster's NetworkPolicy (resources.RedisNetworkPolicy), or
// deletes it when spec.networkPolicy.enabled is false. When the operator may not manage
// NetworkPolicies it goes on without one: the NetworkPolicy condition and a Warning event
// name the missing grant and the fix. A policy deleted or edited by hand is put back at the
// next reconcile (within plan.LookIdle), not at once: there is no watch.
func (r *RedisClusterReconciler) ensureNetworkPolicy(ctx context.Context, s *state) error {
	gen, conds := s.rc.Generation, &s.next.Status.Conditions
	enabled := resources.RedisNetworkPolicyEnabled(s.rc)
	access := r.networkPolicyAccess()
	missing, err := access.Missing(ctx, s.rc.Namespace)
	switch {
	case err != nil:
		status.Set(conds, gen, report.ConditionNetworkPolicy, metav1.ConditionUnknown, report.ReasonPermissionCheckFailed, err.Error())
		return nil
	case !enabled && len(missing) > 0:
		status.Set(conds, gen, report.ConditionNetworkPolicy, metav1.ConditionFalse, report.ReasonNetworkPolicyDisabled, networkPolicyDisabled)
		return nil
	case len(missing) > 0:
		msg := access.Describe(s.rc.Namespace, missing) + "; until then the cluster runs without a NetworkPolicy"
		if c := meta.FindStatusCondition(s.rc.Status.Conditions, report.ConditionNetworkPolicy); c == nil || c.Reason != report.ReasonMissingPermission || c.Message != msg {
			r.Recorder.Eventf(s.rc, nil, corev1.EventTypeWarning, report.ReasonMissingPermission, "Reconcile", "%s", msg)
		}
		status.Set(conds, gen, report.ConditionNetworkPolicy, metav1.ConditionFalse, report.ReasonMissingPermission, msg)
		return nil
	case !enabled:
		if err := r.deleteNetworkPolicy(ctx, s); err != nil {
			return err
		}
		status.Set(conds, gen, report.ConditionNetworkPolicy, metav1.ConditionFalse, report.ReasonNetworkPolicyDisabled, networkPolicyDisabled)
		return nil
	}
	desired := resources.RedisNetworkPolicy(s.rc, r.OperatorNamespace)
	live, outcome, err := child.Ensure(ctx, r.networkPolicyClient(ctx, s.rc.Namespace), r.Scheme, s.rc, desired, child.MergeNetworkPolicy)
	r.record(s, live, outcome, err)
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		// Refused for good, not a failure a retry mends: say so and run without the policy.
		msg := fmt.Sprintf("the API server refused NetworkPolicy %s: %v; until it accepts it the cluster runs without a NetworkPolicy "+
			"(check the admission policies and quotas of namespace %s, or set spec.networkPolicy.enabled to false)", desired.Name, err, s.rc.Namespace)
		if c := meta.FindStatusCondition(s.rc.Status.Conditions, report.ConditionNetworkPolicy); c == nil || c.Reason != report.ReasonNetworkPolicyRefused || c.Message != msg {
			r.Recorder.Eventf(s.rc, nil, corev1.EventTypeWarning, report.ReasonNetworkPolicyRefused, "Reconcile", "%s", msg)
		}
		status.Set(conds, gen, report.ConditionNetworkPolicy, metav1.ConditionFalse, report.ReasonNetworkPolicyRefused, msg)
		return nil
	}
	if err != nil {
		return err
	}
	status.Set(conds, gen, report.ConditionNetworkPolicy, metav1.ConditionTrue, report.ReasonNetworkPolicyApplied, r.networkPolicySummary(s, desired.Name))
	return nil
}

// networkPolicySummary says who the NetworkPolicy admits to which port, and where it lets
// the pods connect.
func (r *RedisClusterReconciler) networkPolicySummary(s *state, name string) string {
	clients, operator, metrics := "the pods of namespace "+s.rc.Namespace+" (list spec.networkPolicy.clients to admit others)", "", "no source"
	if np := s.rc.Spec.NetworkPolicy; np != nil && len(np.Clients) > 0 {
		clients = fmt.Sprintf("the %d peers of spec.networkPolicy.clients", len(np.Clients))
	}
	if resources.RedisClientsHeldOff(s.rc, r.OperatorNamespace) {
		clients = "no client until the restore has loaded every shard"
	}
	if r.OperatorNamespace != "" {
		operator = " and the operator's pods in namespace " + r.OperatorNamespace
	}
	if np := s.rc.Spec.NetworkPolicy; np != nil && np.MetricsNamespace != "" {
		metrics = "namespace " + np.MetricsNamespace
	}
	if resources.RedisPodSpec(s.rc).MonitorImage == "" {
		metrics = "no source (no exporter)"
	}
	client, bus := resources.RedisPolicyPortNames(s.rc)
	return fmt.Sprintf("NetworkPolicy %s admits to port %s %s, the cluster's pods%s; to port %s the cluster's pods only; to port %d %s; "+
		"the pods may connect only to the cluster's pods (ports %s, %s) and to DNS (port 53)",
		name, client, clients, operator, bus, resources.RedisExporterPort, metrics, client, bus)
}

const networkPolicyDisabled = "spec.networkPolicy.enabled is false: any pod may reach every port of the Redis pods"

// deleteNetworkPolicy deletes the cluster's NetworkPolicy if it exists and is the cluster's.
func (r *RedisClusterReconciler) deleteNetworkPolicy(ctx context.Context, s *state) error {
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisNetworkPolicyName(s.rc)}
	if err := r.networkPolicyClient(ctx, s.rc.Namespace).Get(ctx, key, np); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("while reading NetworkPolicy %s: %w", key.Name, err)
	}
	if !metav1.IsControlledBy(np, s.rc) {
		return nil // not ours: left alone
	}
	if err := r.Delete(ctx, np, client.Preconditions{UID: &np.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("while deleting NetworkPolicy %s: %w", key.Name, err)
	}
	r.Recorder.Eventf(s.rc, np, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted NetworkPolicy %s: spec.networkPolicy.enabled is false", np.Name)
	return nil
}

// networkPolicyAccess is r.NetworkPolicyAccess, or one through r.Client made once.
func (r *RedisClusterReconciler) networkPolicyAccess() AccessChecker {
	r.accessOnce.Do(r.defaultAccess)
	return r.NetworkPolicyAccess
}

// networkPolicyCacheAccess is r.NetworkPolicyCacheAccess, or one through r.Client made once.
func (r *RedisClusterReconciler) networkPolicyCacheAccess() AccessChecker {
	r.accessOnce.Do(r.defaultAccess)
	return r.NetworkPolicyCacheAccess
}

func (r *RedisClusterReconciler) defaultAccess() {
	if r.NetworkPolicyAccess == nil {
		r.NetworkPolicyAccess = NewNetworkPolicyAccess(r.Client)
	}
	if r.NetworkPolicyCacheAccess == nil {
		r.NetworkPolicyCacheAccess = NewNetworkPolicyCacheAccess(r.Client)
	}
}

// networkPolicyClient is the client NetworkPolicies of a cluster in namespace are read and
// written through: the manager's, reading from its cache, when the operator may list and
// watch them wherever its cache lists (cluster-wide unless it watches a list of namespaces);
// else one that reads them from the API server. A failed access review reads from the API
// server too.
func (r *RedisClusterReconciler) networkPolicyClient(ctx context.Context, namespace string) client.Client {
	scope := "" // a cache over every namespace lists cluster-wide
	if len(r.WatchNamespaces) > 0 {
		scope = namespace
	}
	if missing, err := r.networkPolicyCacheAccess().Missing(ctx, scope); err == nil && len(missing) == 0 {
		return syncBoundedClient{Client: r.Client}
	}
	return uncachedClient{Client: r.Client, reader: r.APIReader}
}

// AccessChecker tells which verbs the operator may not use in a namespace (child.Access).
type AccessChecker interface {
	Missing(ctx context.Context, namespace string) ([]string, error)
	Describe(namespace string, missing []string) string
}

// syncBoundedClient reads from the manager's cache but waits at most informerSyncWait for an
// informer's first list: one that cannot list fails the read instead of holding the worker.
type syncBoundedClient struct{ client.Client }

// Get reads obj from the cache.
func (c syncBoundedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ctx, cancel := context.WithTimeout(ctx, informerSyncWait)
	defer cancel()
	return c.Client.Get(ctx, key, obj, opts...)
}

// uncachedClient reads through the API reader: for kinds the manager's cache does not hold,
// whose Get through the cache would start an informer.
type uncachedClient struct {
	client.Client
	reader client.Reader
}

// Get reads obj from the API server.
func (c uncachedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}
