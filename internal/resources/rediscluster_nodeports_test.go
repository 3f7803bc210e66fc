package resources_test

import (
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// onNodePorts is redisCluster(nil) with NodePort external access from first.
func onNodePorts(first int32) *redisv1alpha1.RedisCluster {
	rc := redisCluster(nil)
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To(first)}
	return rc
}

// freeNodePort is a port below the ephemeral range whose bus port (10000 higher) is free
// too.
func freeNodePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(10000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		_ = a.Close()
		if err != nil {
			continue
		}
		_ = b.Close()
		return p
	}
	t.Fatal("no free port pair")
	return 0
}

// TestRedisNodePortAtStart: with NodePort external access the start script makes the node
// listen on firstNodePort + its ordinal, announce its Kubernetes node's address (HOST_IP)
// from its first answer, and open its Unix socket, through which the readiness and liveness
// probes reach it; the template names no port, and the script holds nothing the kubelet
// would expand.
func TestRedisNodePortAtStart(t *testing.T) {
	const password = "pw"
	first := freeNodePort(t)
	rc := onNodePorts(int32(first)) //nolint:gosec // below 30000
	c := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec.Containers[0]
	script := c.Command[2]
	for _, bad := range []string{"$(", "$$"} {
		if strings.Contains(script, bad) {
			t.Errorf("the start script contains %q, which the kubelet would expand", bad)
		}
	}
	tls := rc.DeepCopy()
	tls.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
	if s := resources.RedisStatefulSet(tls, 6).Spec.Template.Spec.Containers[0].Command[2]; !strings.Contains(s, `--tls-port "$port"`) || strings.Contains(s, `--port "$port"`) {
		t.Errorf("with TLS the node does not listen for TLS on its node port (port 0 refuses plain text):\n%s", s)
	}
	if len(c.Ports) != 0 {
		t.Errorf("the template names ports %v: each pod listens on its own", c.Ports)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		default:
			env[e.Name] = e.Value
		}
	}
	if env["REDIS_FIRST_PORT"] != strconv.Itoa(first) || env["HOST_IP"] != "status.hostIP" {
		t.Errorf("env %v, want REDIS_FIRST_PORT %d and HOST_IP from status.hostIP", env, first)
	}
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "redis.sock")
	srv := runStartScript(t, strings.ReplaceAll(script, resources.RedisSocketFile, sock),
		map[string]string{resources.RedisPasswordFile: password}, "REDIS_FIRST_PORT="+strconv.Itoa(first), "HOST_IP=10.0.0.12")
	srv.port = strconv.Itoa(first) // POD_NAME is cache-0
	srv.waitFor(t, password)
	if got := srv.cli(password, "config", "get", "cluster-announce-hostname"); got != "cluster-announce-hostname\n10.0.0.12" {
		t.Errorf("CONFIG GET cluster-announce-hostname: %q, want 10.0.0.12", got)
	}
	if got := srv.cli(password, "config", "get", "unixsocket"); got != "unixsocket\n"+sock {
		t.Errorf("CONFIG GET unixsocket: %q, want %s", got, sock)
	}

	// The socket asks for the password as the TCP port does (docs/security.md).
	if out, _ := exec.Command("redis-cli", "-s", sock, "get", "k").CombinedOutput(); !strings.Contains(string(out), "NOAUTH") {
		t.Errorf("GET through the Unix socket without the password: %q, want NOAUTH", out)
	}

	// The probes, with the pod's paths mapped to the test's.
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := func(p *corev1.Probe) (string, error) {
		argv := make([]string, len(p.Exec.Command))
		for i, a := range p.Exec.Command {
			argv[i] = strings.ReplaceAll(strings.ReplaceAll(a, resources.RedisSocketFile, sock), resources.RedisPasswordFile, pwFile)
		}
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := probe(c.LivenessProbe); err != nil {
		t.Errorf("the liveness probe fails on a running node: %v: %s", err, out)
	}
	// A lone node is in no cluster: the readiness probe reached it and says so.
	if out, err := probe(c.ReadinessProbe); err == nil || out != "not in a cluster" {
		t.Errorf("the readiness probe on a lone node: %v: %q, want it failing with \"not in a cluster\"", err, out)
	}
	srv.cli(password, "shutdown", "nosave")
	if out, err := probe(c.LivenessProbe); err == nil {
		t.Errorf("the liveness probe passes with the node gone: %s", out)
	}

	// On a node with an IPv6 address, which Redis cannot announce, the node starts announcing
	// none (the operator then says AddressPending) instead of refusing to start.
	first = freeNodePort(t)
	script = resources.RedisStatefulSet(onNodePorts(int32(first)), 6).Spec.Template.Spec.Containers[0].Command[2] //nolint:gosec // below 30000
	srv = runStartScript(t, strings.ReplaceAll(script, resources.RedisSocketFile, filepath.Join(t.TempDir(), "redis.sock")),
		map[string]string{resources.RedisPasswordFile: password}, "REDIS_FIRST_PORT="+strconv.Itoa(first), "HOST_IP=fd00::12")
	srv.port = strconv.Itoa(first)
	srv.waitFor(t, password)
	if got := srv.cli(password, "config", "get", "cluster-announce-hostname"); got != "cluster-announce-hostname" {
		t.Errorf("CONFIG GET cluster-announce-hostname on an IPv6 node: %q, want none", got)
	}
}

// TestRedisNodePortChildren: with NodePort external access the headless Service names no
// port, and the NetworkPolicy admits clients on the window of node ports from firstNodePort
// and the cluster's own pods on it and on the bus ports 10000 higher.
func TestRedisNodePortChildren(t *testing.T) {
	rc := onNodePorts(31000)
	if ports := resources.RedisHeadlessService(rc).Spec.Ports; len(ports) != 0 {
		t.Errorf("headless Service ports %v, want none", ports)
	}
	np := resources.RedisNetworkPolicy(rc, "operators")
	ranges := func(ports []networkingv1.NetworkPolicyPort) []string {
		var out []string
		for _, p := range ports {
			end := "-"
			if p.EndPort != nil {
				end += strconv.Itoa(int(*p.EndPort))
			}
			out = append(out, p.Port.String()+end)
		}
		return out
	}
	want := map[int][]string{0: {"31000-40999"}, 1: {"31000-40999", "41000-50999"}, 2: {"31000-40999"}}
	for i, w := range want {
		if got := ranges(np.Spec.Ingress[i].Ports); strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("ingress rule %d ports %v, want %v", i, got, w)
		}
	}
	if got := ranges(np.Spec.Egress[0].Ports); strings.Join(got, ",") != "31000-40999,41000-50999" {
		t.Errorf("egress to the own pods on %v, want the node ports and the bus ports", got)
	}

	// The exporter scrapes the node's Unix socket (TLS or not: it never leaves the pod).
	rc.Spec.Pod[0].MonitorImage = "oliver006/redis_exporter:v1.62.0"
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
	pod := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec
	exporter := pod.Containers[1]
	for _, e := range exporter.Env {
		if (e.Name == "REDIS_ADDR" && e.Value != resources.RedisExporterSocketAddr) || strings.HasPrefix(e.Name, "REDIS_EXPORTER_TLS_") {
			t.Errorf("exporter env %s=%s, want REDIS_ADDR %s and no TLS settings", e.Name, e.Value, resources.RedisExporterSocketAddr)
		}
	}
	mounted := func(c corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			if m.Name == resources.RedisSocketVolume && m.MountPath == resources.RedisSocketDir {
				return true
			}
		}
		return false
	}
	if !mounted(exporter) || !mounted(pod.Containers[0]) {
		t.Errorf("the socket's directory is not mounted in both containers: exporter %v, redis %v", exporter.VolumeMounts, pod.Containers[0].VolumeMounts)
	}
	var volume bool
	for _, v := range pod.Volumes {
		volume = volume || (v.Name == resources.RedisSocketVolume && v.EmptyDir != nil)
	}
	if !volume {
		t.Errorf("no emptyDir %s for the socket in %v", resources.RedisSocketVolume, pod.Volumes)
	}
}
