package redis

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// externalHosts are the hosts outside clients reach each pod at, by pod: only the pods
// whose Service has one assigned.
type externalHosts map[string]string

// externalServicesOf lists the cluster's external Services from the cache.
func (r *RedisClusterReconciler) externalServicesOf(ctx context.Context, s *state) ([]corev1.Service, error) {
	labels := objectlabels.SelectorLabels(objectlabels.RedisClusterKind, s.rc.Name)
	labels[objectlabels.LabelComponent] = resources.RedisExternalComponent
	list := &corev1.ServiceList{}
	if err := r.List(ctx, list, client.InNamespace(s.rc.Namespace), client.MatchingLabels(labels)); err != nil {
		return nil, fmt.Errorf("while listing the external Services of %s: %w", s.rc.Name, err)
	}
	return list.Items, nil
}

// ensureExternalServices keeps one Service per pod of the StatefulSet while
// spec.externalAccess is set (the pods a scale out adds included, so each has its address
// before it joins), and deletes the others: those of pods a scale in removed, or all once
// spec.externalAccess is removed.
func (r *RedisClusterReconciler) ensureExternalServices(ctx context.Context, s *state) error {
	want := map[string]bool{}
	if s.rc.Spec.ExternalAccess != nil {
		pods := int(resources.RedisNodes(s.rc))
		if s.sts != nil {
			pods = max(pods, int(ptr.Deref(s.sts.Spec.Replicas, 0)))
		}
		for i := range pods {
			pod := fmt.Sprintf("%s-%d", s.rc.Name, i)
			want[pod] = true
			live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisExternalService(s.rc, pod), child.MergeService)
			if resources.RedisOnNodePorts(s.rc) && apierrors.IsInvalid(err) && strings.Contains(err.Error(), "nodePort") {
				// A node port the API server refuses (outside its range, or taken) leaves
				// that pod without an outside address (ExternallyReachable says so); the
				// cluster itself works at its pod addresses, so the look goes on.
				r.event(s, corev1.EventTypeWarning, report.ReasonNodePortRefused, "Expose",
					"Service %s: %v; spec.externalAccess.firstNodePort (%d) + %s's ordinal must be a node port inside the cluster's node port range that no other Service uses: create a new RedisCluster with another firstNodePort (and restore a backup into it), or free the port",
					resources.RedisExternalServiceName(pod), err, *s.rc.Spec.ExternalAccess.FirstNodePort, pod)
				continue
			}
			r.record(s, live, outcome, err)
			if err != nil {
				return err
			}
		}
	}
	live, err := r.externalServicesOf(ctx, s)
	if err != nil {
		return err
	}
	for i := range live {
		svc := &live[i]
		if want[resources.RedisExternalPod(svc)] || !metav1.IsControlledBy(svc, s.rc) {
			continue
		}
		if err := client.IgnoreNotFound(r.Delete(ctx, svc)); err != nil {
			return fmt.Errorf("while deleting the external Service %s: %w", svc.Name, err)
		}
	}
	return nil
}

// readExternalHosts reads, every look, the host each pod's external Service was given.
func (r *RedisClusterReconciler) readExternalHosts(ctx context.Context, s *state) error {
	s.external = externalHosts{}
	if s.rc.Spec.ExternalAccess == nil {
		return nil
	}
	live, err := r.externalServicesOf(ctx, s)
	if err != nil {
		return err
	}
	if resources.RedisOnNodePorts(s.rc) {
		return r.readNodePortHosts(ctx, s, live)
	}
	for i := range live {
		// A host Redis would refuse (an IPv6 address) is left out: the node stays pending
		// rather than fail the same CONFIG SET every look ahead of every other step.
		if pod, host := resources.RedisExternalPod(&live[i]), resources.RedisExternalHost(&live[i]); pod != "" && resources.RedisAnnounceable(host) {
			s.external[pod] = host
		}
	}
	return nil
}

// readNodePortHosts reads, with NodePort external access, the host of each pod whose
// Service has its node port: the address of the Kubernetes node the pod runs on.
func (r *RedisClusterReconciler) readNodePortHosts(ctx context.Context, s *state, services []corev1.Service) error {
	pods, err := r.clusterPods(ctx, s.rc)
	if err != nil {
		return err
	}
	byPod := map[string]*corev1.Service{}
	for i := range services {
		byPod[resources.RedisExternalPod(&services[i])] = &services[i]
	}
	for i := range pods {
		if host := resources.RedisNodePortHost(s.rc, byPod[pods[i].Name], &pods[i]); resources.RedisAnnounceable(host) {
			s.external[pods[i].Name] = host
		}
	}
	return nil
}

// plannerAnnounce is what the planner is to make the nodes announce: nil when the operator
// leaves it alone (external access off, and no ExternallyReachable condition left from
// when it was on: then the nodes are set back to announcing nothing first).
func (r *RedisClusterReconciler) plannerAnnounce(s *state) *plan.Announce {
	on := s.rc.Spec.ExternalAccess != nil
	if !on && meta.FindStatusCondition(s.rc.Status.Conditions, report.ConditionExternallyReachable) == nil {
		return nil
	}
	a := &plan.Announce{On: on, Hostnames: map[string]string{}, Set: map[string]bool{}, PendingWhy: strings.TrimSpace(externalPendingWhy(s.rc))}
	if on {
		a.Hostnames = s.external
	}
	cluster := client.ObjectKeyFromObject(s.rc)
	for i := range s.snap.Nodes {
		if o := &s.snap.Nodes[i]; o.Answered() && r.announced.has(cluster, a.EndpointType(), o) {
			a.Set[o.Pod] = true
		}
	}
	return a
}

// announce carries out StepAnnounce: one CONFIG SET on the step's node, remembered for its
// process (the endpoint type cannot be read back).
func (r *RedisClusterReconciler) announce(ctx context.Context, s *state) error {
	step := s.step
	endpoint := plan.EndpointIP
	if s.rc.Spec.ExternalAccess != nil {
		endpoint = plan.EndpointHostname
	}
	if err := execute.SetAnnounce(ctx, step.Addr, s.certs.Config, s.login(), step.Hostname, endpoint); err != nil {
		return err
	}
	for i := range s.snap.Nodes {
		if o := &s.snap.Nodes[i]; o.Pod == step.Pod && o.Addr == step.Addr {
			r.announced.mark(client.ObjectKeyFromObject(s.rc), endpoint, o)
			if s.announce != nil {
				s.announce.Set[o.Pod] = true // the status says what the node announces now
			}
		}
	}
	if step.Hostname == "" {
		r.event(s, corev1.EventTypeNormal, report.ReasonAnnounced, "Announce", "%s announces its pod address to clients again (spec.externalAccess removed)", step.Pod)
	} else {
		r.event(s, corev1.EventTypeNormal, report.ReasonAnnounced, "Announce", "%s announces %s to clients (cluster-announce-hostname)", step.Pod, step.Hostname)
	}
	return nil
}

// externalPendingWhy says why a pod may have no external address yet, by the kind of
// Service.
func externalPendingWhy(rc *redisv1alpha1.RedisCluster) string {
	if resources.RedisOnNodePorts(rc) {
		return fmt.Sprintf(" (their Services <pod>-external do not have their node ports yet, firstNodePort %d + the pod's ordinal: see the NodePortRefused events for a port the API server refused, outside its node port range or taken; or the pod is not scheduled yet, or its node's address is one Redis cannot announce, such as an IPv6 address)",
			*rc.Spec.ExternalAccess.FirstNodePort)
	}
	return " (their Services <pod>-external have no load-balancer ingress, or one Redis cannot announce, such as an IPv6 address)"
}
