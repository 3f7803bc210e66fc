package resources

import (
	"net"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

// RedisExternalComponent is the app.kubernetes.io/component label of the Services of
// spec.externalAccess, by which the operator lists them.
const RedisExternalComponent = "external-access"

// RedisExternalServiceName is the Service that exposes pod outside the Kubernetes cluster.
func RedisExternalServiceName(pod string) string { return pod + "-external" }

// RedisExternalService is pod's own Service of spec.externalAccess: of the type asked,
// with the user's annotations, selecting that one pod by the label the StatefulSet gives
// it, on the client port only. The cluster bus is not exposed: the nodes keep meeting and
// gossiping at their pod addresses (they announce only a hostname to clients, see
// docs/rediscluster.md#external-access). Not-ready addresses are published: a node serves
// its slots whatever its readiness probe says, and the cluster sends outside clients to it
// as it sends inside ones to its pod address.
func RedisExternalService(rc *redisv1alpha1.RedisCluster, pod string) *corev1.Service {
	meta := redisMeta(rc, RedisExternalServiceName(pod))
	meta.Labels[objectlabels.LabelComponent] = RedisExternalComponent
	meta.Labels[appsv1.StatefulSetPodNameLabel] = pod
	svcType := corev1.ServiceTypeLoadBalancer
	if rc.Spec.ExternalAccess != nil && rc.Spec.ExternalAccess.Type == redisv1alpha1.ExternalAccessNodePort {
		svcType = corev1.ServiceTypeNodePort
	}
	if rc.Spec.ExternalAccess != nil && len(rc.Spec.ExternalAccess.Annotations) > 0 {
		meta.Annotations = map[string]string{}
		for k, v := range rc.Spec.ExternalAccess.Annotations {
			meta.Annotations[k] = v
		}
	}
	selector := objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name)
	selector[appsv1.StatefulSetPodNameLabel] = pod
	port := corev1.ServicePort{Name: "redis", Port: RedisPort, TargetPort: intstr.FromInt32(RedisPort), Protocol: corev1.ProtocolTCP}
	if RedisOnNodePorts(rc) {
		// The node listens on its node port itself: the port it announces is the one clients
		// outside dial on the Kubernetes node and its replicas dial at the pod.
		nodePort := RedisClientPort(rc, pod)
		port.TargetPort, port.NodePort = intstr.FromInt32(nodePort), nodePort
	}
	return &corev1.Service{
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:                     svcType,
			Selector:                 selector,
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{port},
		},
	}
}

// RedisNodePortHost is, with NodePort external access, the host outside clients reach
// pod's node at: the address of the Kubernetes node it runs on (status.hostIP), once its
// Service svc has the pod's node port; "" before (no Service yet, or one whose node port
// was refused or changed by hand).
func RedisNodePortHost(rc *redisv1alpha1.RedisCluster, svc *corev1.Service, pod *corev1.Pod) string {
	if svc == nil || pod == nil || svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].NodePort != RedisClientPort(rc, pod.Name) {
		return ""
	}
	return pod.Status.HostIP
}

// RedisExternalHost is the host outside clients reach svc at: its load balancer's first
// ingress IP, else that ingress's hostname; "" while none is assigned (or for any other
// type of Service).
func RedisExternalHost(svc *corev1.Service) string {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return ""
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		switch {
		case in.IP != "":
			return in.IP
		case in.Hostname != "":
			return in.Hostname
		}
	}
	return ""
}

// RedisAnnounceable reports whether Redis accepts host as cluster-announce-hostname: only
// letters, digits, hyphens and dots (Redis 7.0 refuses an IPv6 address, for one).
func RedisAnnounceable(host string) bool {
	for _, c := range host {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return host != ""
}

// RedisExternalPod is the pod an external Service exposes ("" for another Service).
func RedisExternalPod(svc *corev1.Service) string {
	if svc.Labels[objectlabels.LabelComponent] != RedisExternalComponent {
		return ""
	}
	return svc.Labels[appsv1.StatefulSetPodNameLabel]
}

// RedisAnnounceFiles are the keys the config ConfigMap carries with spec.externalAccess:
// for each pod whose Service has an address Redis can announce, RedisAnnounceKey(pod) holds
// that host, which the start script passes as --cluster-announce-hostname. A node
// restarted (at the same or a new pod IP) so announces its external address from its first
// answer, as redis.conf's cluster-preferred-endpoint-type hostname makes it name every
// node by its host from the start: Redis keeps neither across a restart, and without them
// it would send outside clients to pod IPs until the operator's next look. nil without
// spec.externalAccess.
func RedisAnnounceFiles(rc *redisv1alpha1.RedisCluster, hosts map[string]string) map[string]string {
	if rc.Spec.ExternalAccess == nil || RedisOnNodePorts(rc) { // on node ports the start script announces HOST_IP
		return nil
	}
	files := map[string]string{}
	for pod, host := range hosts {
		if RedisAnnounceable(host) {
			files[RedisAnnounceKey(pod)] = host + "\n"
		}
	}
	return files
}

// RedisAnnounceKey is the config ConfigMap's key (a file in RedisConfigDir) with the host
// pod announces: "announce-<pod>", never a pod name nor RedisConfigFile.
func RedisAnnounceKey(pod string) string { return "announce-" + pod }

// redisExternalConf is redis.conf's part with spec.externalAccess: every node names the
// others (and itself) to clients by their announced hostname.
const redisExternalConf = "cluster-preferred-endpoint-type hostname\n"

// redisAnnounceAtStart, in the start script with spec.externalAccess, passes the pod's
// announce file (RedisAnnounceFiles) to redis-server as --cluster-announce-hostname when the
// operator has written one. POSIX sh, no "$(" (see RedisStartScript).
const redisAnnounceAtStart = `announce="` + RedisConfigDir + `/announce-$POD_NAME"
if [ -n "$POD_NAME" ] && [ -s "$announce" ]; then
  read -r host < "$announce"
  set -- "$@" --cluster-announce-hostname "$host"
fi
`

// RedisExternalAddress is host:port at which clients outside reach pod's node once its
// Service has host: the node's own client port, 6379 behind a load balancer or its node
// port.
func RedisExternalAddress(rc *redisv1alpha1.RedisCluster, pod, host string) string {
	return net.JoinHostPort(host, strconv.Itoa(int(RedisClientPort(rc, pod))))
}
