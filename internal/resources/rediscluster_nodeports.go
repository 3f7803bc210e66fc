package resources

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// RedisSocketDir is, with NodePort external access, the emptyDir where redis-server keeps
// its Unix socket (RedisSocketFile), shared with the exporter: the probes and the exporter
// reach the node through it, since its TCP port differs from pod to pod and a StatefulSet's
// pods share one template.
const (
	RedisSocketDir    = "/run/redis-socket"
	RedisSocketFile   = RedisSocketDir + "/redis.sock"
	RedisSocketVolume = "socket"
	// redisBusOffset is how far above its client port a node's cluster bus listens.
	redisBusOffset = RedisBusPort - RedisPort
	// redisNodePortWindow is how many ports above firstNodePort the NetworkPolicy opens for
	// clients (and as many, 10000 higher, for the bus): more than a cluster has nodes.
	redisNodePortWindow = redisBusOffset
)

// RedisOnNodePorts reports whether each node listens on a node port of its own
// (spec.externalAccess type NodePort).
func RedisOnNodePorts(rc *redisv1alpha1.RedisCluster) bool {
	a := rc.Spec.ExternalAccess
	return a != nil && a.Type == redisv1alpha1.ExternalAccessNodePort && a.FirstNodePort != nil
}

// RedisClientPort is the port the node of pod (a pod name) listens on for clients and its
// replicas: RedisPort, or with NodePort external access firstNodePort plus the pod's
// ordinal, which is also its Service's node port.
func RedisClientPort(rc *redisv1alpha1.RedisCluster, pod string) int32 {
	if !RedisOnNodePorts(rc) {
		return RedisPort
	}
	ordinal, _ := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	return *rc.Spec.ExternalAccess.FirstNodePort + int32(ordinal) //nolint:gosec // at most 1000 nodes (CEL)
}

// redisNodePortEnv are the redis container's variables the start script reads with
// NodePort external access: the first node port and the address of the Kubernetes node the
// pod runs on, which it announces.
func redisNodePortEnv(rc *redisv1alpha1.RedisCluster) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "REDIS_FIRST_PORT", Value: strconv.Itoa(int(*rc.Spec.ExternalAccess.FirstNodePort))},
		{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
	}
}

// redisNodePortAtStart, in the start script with NodePort external access, makes
// redis-server listen on the pod's node port (REDIS_FIRST_PORT plus the ordinal its name
// ends with; the TLS port with TLS, whose bus follows it) and announce its Kubernetes
// node's address (HOST_IP) to clients from its first answer. POSIX sh, no "$(" (see
// RedisStartScript).
func redisNodePortAtStart(tls bool) string {
	listen := "--port"
	if tls {
		listen = "--tls-port"
	}
	return "port=`expr \"$REDIS_FIRST_PORT\" + \"${POD_NAME##*-}\"` || exit 1\n" +
		`set -- "$@" ` + listen + ` "$port" --unixsocket ` + RedisSocketFile + " --unixsocketperm 770\n" +
		// Redis refuses to start with a hostname it cannot announce (an IPv6 address): the
		// node then starts announcing none, and stays AddressPending.
		`case "$HOST_IP" in *:*|"") ;; *) set -- "$@" --cluster-announce-hostname "$HOST_IP" ;; esac` + "\n"
}

// RedisExporterSocketAddr is the address the exporter sidecar scrapes with NodePort external
// access: the node's Unix socket (plain text there, with TLS too: it never leaves the pod).
const RedisExporterSocketAddr = "unix://" + RedisSocketFile

// redisProbeAddr is redisProbeCLI's TCP address of the node, which redisSocketAddr
// replaces with NodePort external access.
const (
	redisProbeAddr  = "-h 127.0.0.1 -p 6379"
	redisSocketAddr = "-s " + RedisSocketFile
)

// redisNodePortProbes are the redis container's probes with NodePort external access: the
// readiness script through the Unix socket (no TLS there), and a liveness PING through it
// that any answer from Redis passes (PONG, or NOAUTH without the password), as the TCP
// check it replaces.
func redisNodePortProbes() (readiness, liveness *corev1.Probe) {
	script := strings.ReplaceAll(RedisReadinessScript, redisProbeAddr, redisSocketAddr)
	readiness = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}},
		PeriodSeconds: 5, TimeoutSeconds: 3,
	}
	liveness = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c",
			"redis-cli " + redisSocketAddr + " ping 2>&1 | grep -q 'PONG\\|NOAUTH'"}}},
		InitialDelaySeconds: 15, PeriodSeconds: 10, TimeoutSeconds: 3,
	}
	return readiness, liveness
}

// redisClientPolicyPorts are the NetworkPolicy ports clients reach the nodes on: 6379, or
// with NodePort external access the window of node ports from firstNodePort.
func redisClientPolicyPorts(rc *redisv1alpha1.RedisCluster) []networkingv1.NetworkPolicyPort {
	if !RedisOnNodePorts(rc) {
		return tcpPorts(RedisPort)
	}
	return []networkingv1.NetworkPolicyPort{tcpRange(*rc.Spec.ExternalAccess.FirstNodePort)}
}

// redisPeerPolicyPorts are the NetworkPolicy ports the nodes reach each other on: the
// client ports (replication) and the bus ports.
func redisPeerPolicyPorts(rc *redisv1alpha1.RedisCluster) []networkingv1.NetworkPolicyPort {
	if !RedisOnNodePorts(rc) {
		return tcpPorts(RedisPort, RedisBusPort)
	}
	first := *rc.Spec.ExternalAccess.FirstNodePort
	return []networkingv1.NetworkPolicyPort{tcpRange(first), tcpRange(first + redisBusOffset)}
}

// tcpRange is the TCP ports from first on, redisNodePortWindow of them (fewer at 65535).
func tcpRange(first int32) networkingv1.NetworkPolicyPort {
	port, protocol := intstr.FromInt32(first), corev1.ProtocolTCP
	end := min(first+redisNodePortWindow-1, 65535)
	return networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &port, EndPort: &end}
}

// RedisPolicyPortNames name, for messages, the ports the NetworkPolicy admits clients and
// the bus on: 6379 and 16379, or their windows with node ports ("31000-40999").
func RedisPolicyPortNames(rc *redisv1alpha1.RedisCluster) (client, bus string) {
	if !RedisOnNodePorts(rc) {
		return strconv.Itoa(RedisPort), strconv.Itoa(RedisBusPort)
	}
	c, b := redisClientPolicyPorts(rc)[0], redisPeerPolicyPorts(rc)[1]
	return c.Port.String() + "-" + strconv.Itoa(int(*c.EndPort)), b.Port.String() + "-" + strconv.Itoa(int(*b.EndPort))
}
