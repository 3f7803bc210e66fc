package resources_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

func TestRedisExternalService(t *testing.T) {
	cases := map[string]struct {
		access      *redisv1alpha1.ExternalAccessSpec
		wantType    corev1.ServiceType
		annotations map[string]string
		// wantTarget is the pod port the Service sends to, wantNodePort its node port.
		wantTarget, wantNodePort int32
	}{
		"load balancer with the user's annotations": {
			access:      &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer, Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
			wantType:    corev1.ServiceTypeLoadBalancer,
			annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
			wantTarget:  6379,
		},
		"load balancer without annotations": {
			access:     &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer},
			wantType:   corev1.ServiceTypeLoadBalancer,
			wantTarget: 6379,
		},
		"node port: the pod listens on its node port": {
			access:     &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To[int32](31000)},
			wantType:   corev1.ServiceTypeNodePort,
			wantTarget: 31004, wantNodePort: 31004,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}, Spec: redisv1alpha1.RedisClusterSpec{ExternalAccess: c.access}}
			svc := resources.RedisExternalService(rc, "cache-4")
			if svc.Name != "cache-4-external" || svc.Namespace != "ns" {
				t.Errorf("Service %s/%s, want ns/cache-4-external", svc.Namespace, svc.Name)
			}
			if svc.Spec.Type != c.wantType {
				t.Errorf("type %s, want %s", svc.Spec.Type, c.wantType)
			}
			if !reflect.DeepEqual(svc.Annotations, c.annotations) {
				t.Errorf("annotations %v, want %v", svc.Annotations, c.annotations)
			}
			wantSelector := map[string]string{"app.kubernetes.io/name": "rediscluster", "app.kubernetes.io/instance": "cache", "statefulset.kubernetes.io/pod-name": "cache-4"}
			if !reflect.DeepEqual(svc.Spec.Selector, wantSelector) {
				t.Errorf("selector %v, want %v", svc.Spec.Selector, wantSelector)
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 6379 || svc.Spec.Ports[0].TargetPort.IntVal != c.wantTarget || svc.Spec.Ports[0].NodePort != c.wantNodePort {
				t.Errorf("ports %v, want only the client port 6379, to the pod's %d, node port %d", svc.Spec.Ports, c.wantTarget, c.wantNodePort)
			}
			if !svc.Spec.PublishNotReadyAddresses {
				t.Error("not-ready addresses are not published: an outside client could not reach a node that serves slots while its probe fails")
			}
			if got := resources.RedisExternalPod(svc); got != "cache-4" {
				t.Errorf("RedisExternalPod = %q, want cache-4", got)
			}
		})
	}
	if got := resources.RedisExternalPod(resources.RedisClientService(&redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache"}})); got != "" {
		t.Errorf("RedisExternalPod of the client Service = %q, want none", got)
	}
}

func TestRedisExternalHost(t *testing.T) {
	lb := func(in ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}, Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: in}}}
	}
	cases := map[string]struct {
		svc  *corev1.Service
		want string
	}{
		"not assigned yet":         {svc: lb(), want: ""},
		"an IP":                    {svc: lb(corev1.LoadBalancerIngress{IP: "203.0.113.7"}), want: "203.0.113.7"},
		"a hostname":               {svc: lb(corev1.LoadBalancerIngress{Hostname: "a1.elb.example.com"}), want: "a1.elb.example.com"},
		"IP and hostname: the IP":  {svc: lb(corev1.LoadBalancerIngress{IP: "203.0.113.7", Hostname: "a1.elb.example.com"}), want: "203.0.113.7"},
		"an empty first ingress":   {svc: lb(corev1.LoadBalancerIngress{}, corev1.LoadBalancerIngress{IP: "203.0.113.8"}), want: "203.0.113.8"},
		"a NodePort Service: none": {svc: &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}, want: ""},
	}
	for name, c := range cases {
		if got := resources.RedisExternalHost(c.svc); got != c.want {
			t.Errorf("%s: RedisExternalHost = %q, want %q", name, got, c.want)
		}
	}
}

// TestRedisNodePortHost: with NodePort external access a pod's host is its Kubernetes
// node's address once its Service has the pod's node port, and its external address that
// host with the node port; behind a load balancer the port is 6379.
func TestRedisNodePortHost(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache"}, Spec: redisv1alpha1.RedisClusterSpec{
		ExternalAccess: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To[int32](31000)}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache-2"}, Status: corev1.PodStatus{HostIP: "10.0.0.12"}}
	svc := resources.RedisExternalService(rc, "cache-2")
	if got := resources.RedisNodePortHost(rc, svc, pod); got != "10.0.0.12" {
		t.Errorf("host %q, want the pod's hostIP 10.0.0.12", got)
	}
	if got := resources.RedisExternalAddress(rc, "cache-2", "10.0.0.12"); got != "10.0.0.12:31002" {
		t.Errorf("external address %q, want 10.0.0.12:31002", got)
	}
	moved := svc.DeepCopy()
	moved.Spec.Ports[0].NodePort = 31999 // changed by hand: the node does not listen there
	for name, c := range map[string]struct {
		svc *corev1.Service
		pod *corev1.Pod
	}{"no Service yet": {nil, pod}, "another node port": {moved, pod}, "not scheduled": {svc, &corev1.Pod{ObjectMeta: pod.ObjectMeta}}} {
		if got := resources.RedisNodePortHost(rc, c.svc, c.pod); got != "" {
			t.Errorf("%s: host %q, want none", name, got)
		}
	}
	lb := rc.DeepCopy()
	lb.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer}
	if got := resources.RedisExternalAddress(lb, "cache-2", "203.0.113.7"); got != "203.0.113.7:6379" {
		t.Errorf("load balancer's external address %q, want 203.0.113.7:6379", got)
	}
}

func TestRedisAnnounceable(t *testing.T) {
	for host, want := range map[string]bool{
		"203.0.113.7": true, "a1-b.elb.example.com": true, "": false, "2001:db8::1": false, "a_b": false,
	} {
		if got := resources.RedisAnnounceable(host); got != want {
			t.Errorf("RedisAnnounceable(%q) = %t, want %t", host, got, want)
		}
	}
}

// TestRedisAnnounceAtStart: with spec.externalAccess a node starts announcing the host the
// operator recorded for its pod (the start script passes the config ConfigMap's
// announce-<pod> file to redis-server) and names every node by its hostname (redis.conf);
// without a recorded host it starts as before; without spec.externalAccess neither the
// script nor redis.conf nor the ConfigMap carry any of it.
func TestRedisAnnounceAtStart(t *testing.T) {
	const password = "pw"
	rc := redisCluster(nil)
	plainConf := resources.RedisConfigMap(rc, "").Data[resources.RedisConfigFile]
	if files := resources.RedisAnnounceFiles(rc, map[string]string{"cache-0": "127.2.3.4"}); files != nil {
		t.Errorf("without spec.externalAccess the ConfigMap would carry %v", files)
	}
	if strings.Contains(plainConf, "cluster-preferred-endpoint-type") {
		t.Errorf("without spec.externalAccess redis.conf sets the endpoint type:\n%s", plainConf)
	}
	if got := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec.Containers[0].Command[2]; got != resources.RedisStartScript {
		t.Errorf("without spec.externalAccess the start script changed:\n%s", got)
	}

	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer}
	if conf := resources.RedisConfigMap(rc, "").Data[resources.RedisConfigFile]; !strings.Contains(conf, "\ncluster-preferred-endpoint-type hostname\n") {
		t.Errorf("with spec.externalAccess redis.conf does not set cluster-preferred-endpoint-type hostname:\n%s", conf)
	}
	files := resources.RedisAnnounceFiles(rc, map[string]string{"cache-0": "127.2.3.4", "cache-1": "lb-1.example.com", "cache-2": "fd00::1"})
	want := map[string]string{"announce-cache-0": "127.2.3.4\n", "announce-cache-1": "lb-1.example.com\n"}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("RedisAnnounceFiles = %v, want %v (an IPv6 address cannot be announced)", files, want)
	}
	script := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec.Containers[0].Command[2]
	for _, bad := range []string{"$(", "$$"} {
		if strings.Contains(script, bad) {
			t.Errorf("the start script contains %q, which the kubelet would expand", bad)
		}
	}
	// The runner maps the directory prefix of the announce files to a local one; the pod's
	// own file (POD_NAME is cache-0) is written beside it.
	announceDir := resources.RedisConfigDir + "/announce-"
	for name, c := range map[string]struct {
		file, want string
	}{
		"host recorded": {file: "127.2.3.4\n", want: "127.2.3.4"},
		"no host yet":   {want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			in := map[string]string{resources.RedisPasswordFile: password, announceDir: ""}
			if c.file != "" {
				in[announceDir+"cache-0"] = c.file
			}
			srv := runStartScript(t, script, in)
			srv.waitFor(t, password)
			want := strings.TrimSpace("cluster-announce-hostname\n" + c.want)
			if got := srv.cli(password, "config", "get", "cluster-announce-hostname"); got != want {
				t.Errorf("CONFIG GET cluster-announce-hostname: %q, want %q", got, want)
			}
		})
	}
}
