package report

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// setExternallyReachable writes each node's external address into status.nodes and says
// whether outside clients can reach every node: False names the pods without an address
// yet and those that do not announce theirs. With spec.externalAccess removed the
// condition stays until every node announces nothing again.
func setExternallyReachable(s *Input, gen int64) {
	a := s.Announce
	if a == nil || (!a.On && s.Step.Kind != plan.StepAnnounce) {
		meta.RemoveStatusCondition(&s.Next.Status.Conditions, ConditionExternallyReachable)
		return
	}
	if !a.On {
		status.Set(&s.Next.Status.Conditions, gen, ConditionExternallyReachable, metav1.ConditionFalse, ReasonNotAnnounced,
			"spec.externalAccess was removed: the nodes are being set back to announcing their pod addresses")
		return
	}
	for i := range s.Next.Status.Nodes {
		if host := s.External[s.Next.Status.Nodes[i].Name]; host != "" {
			s.Next.Status.Nodes[i].ExternalAddress = resources.RedisExternalAddress(s.Cluster, s.Next.Status.Nodes[i].Name, host)
		}
	}
	pending, unannounced := externalProblems(s, a)
	unnamed, stale := certificateProblems(s)
	was := meta.FindStatusCondition(s.Cluster.Status.Conditions, ConditionExternallyReachable)
	var reason, msg string
	switch {
	case len(pending) > 0:
		reason, msg = ReasonAddressPending, "no external address yet for "+strings.Join(pending, ", ")+" "+a.PendingWhy+": clients outside cannot reach what they serve"
	case len(unannounced) > 0:
		reason, msg = ReasonNotAnnounced, strings.Join(unannounced, ", ")+" do not announce their external address yet: clients outside may be sent to addresses they cannot reach"
	case len(unnamed) > 0:
		reason, msg = ReasonCertificatePending, fmt.Sprintf("the certificate of Secret %s does not name %s: clients outside that verify the host they dial refuse those nodes", resources.RedisTLSSecretName(s.Cluster), strings.Join(unnamed, ", "))
		if resources.RedisTLSUserSecret(s.Cluster) {
			msg += "; add them to the certificate's subject alternative names (spec.tls.secretName is yours: the operator does not issue it)"
		} else {
			msg += "; a certificate naming them is being issued"
		}
	case len(stale) > 0:
		reason, msg = ReasonCertificatePending, strings.Join(stale, ", ")+" do not serve the certificate naming every external address yet (they load it without a restart)"
	default:
		status.Set(&s.Next.Status.Conditions, gen, ConditionExternallyReachable, metav1.ConditionTrue, ReasonAddressesAnnounced,
			"every node announces the external address its Service was given")
		return
	}
	if was != nil && was.Status == metav1.ConditionTrue {
		s.report(corev1.EventTypeWarning, ReasonNotExternallyReachable, "Observe", "%s", clip(msg, eventNoteLimit))
	}
	status.Set(&s.Next.Status.Conditions, gen, ConditionExternallyReachable, metav1.ConditionFalse, reason, msg)
}

// certificateProblems are, with spec.tls, the external hosts the TLS Secret's certificate
// does not name, and the answering pods that serve another certificate than that one.
func certificateProblems(s *Input) (unnamed, stale []string) {
	hosts := resources.RedisTLSExternalHosts(s.Cluster, s.External)
	if len(hosts) == 0 {
		return nil, nil
	}
	unnamed = certs.UnnamedHosts(s.Certificate, hosts) // all of them while the Secret is missing or wrong
	for i := range s.Snap.Nodes {
		if o := &s.Snap.Nodes[i]; !o.Leaving && o.Answered() && o.StaleCertificate {
			stale = append(stale, o.Pod)
		}
	}
	slices.Sort(stale)
	return unnamed, stale
}

// externalProblems are the staying pods whose Service has no host yet, and the pods whose
// node does not answer or does not announce its host on this process.
func externalProblems(s *Input, a *plan.Announce) (pending, unannounced []string) {
	for i := range int(resources.RedisNodes(s.Cluster)) {
		if pod := fmt.Sprintf("%s-%d", s.Cluster.Name, i); a.Hostnames[pod] == "" {
			pending = append(pending, pod)
		}
	}
	for i := range s.Snap.Nodes {
		o := &s.Snap.Nodes[i]
		if o.Leaving || a.Hostnames[o.Pod] == "" {
			continue
		}
		self, ok := o.Self()
		if !o.Answered() || !ok || self.Hostname != a.Hostnames[o.Pod] || !a.Set[o.Pod] {
			unannounced = append(unannounced, o.Pod)
		}
	}
	slices.Sort(unannounced)
	return pending, unannounced
}
