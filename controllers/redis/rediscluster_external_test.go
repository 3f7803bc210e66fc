package redis_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/cloudlb"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// outsideDialer dials only the load balancers' addresses (cloudlb.ExternalPrefix), or
// with prefix set only addresses that start with it, as a client outside the Kubernetes
// cluster network: a pod address is refused, and counted.
type outsideDialer struct {
	refused chan string
	prefix  string
}

func (d outsideDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if !strings.HasPrefix(addr, cmp.Or(d.prefix, cloudlb.ExternalPrefix)) {
		select {
		case d.refused <- addr:
		default:
		}
		return nil, fmt.Errorf("%s is not reachable from outside the Kubernetes cluster", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// TestRedisClusterServesClientsOutsideKubernetes: with spec.externalAccess LoadBalancer,
// a client that can reach only the load balancers' addresses writes and reads through
// them while the cluster scales out from 3 to 4 masters, a master's pod is deleted, and
// then every pod is deleted at once (until some come back at new pod IPs); every
// acknowledged key reads back through every external address, and CLUSTER SLOTS from
// every node names only external addresses.
func TestRedisClusterServesClientsOutsideKubernetes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	lb := cloudlb.Start(env.Client, ns)
	t.Cleanup(lb.Stop)
	rc := redistest.NewCluster(ns, "outside", 6)
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer,
		Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}
	key, pw := createRunningViewed(t, rc)
	rc = waitExternallyReachable(t, key, 6)
	svc := &corev1.Service{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "outside-0-external"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-internal"] != "true" {
		t.Errorf("the external Service's annotations are %v, want spec.externalAccess.annotations", svc.Annotations)
	}

	d := outsideDialer{refused: make(chan string, 1)}
	w := redistest.StartDialingWriter(externalAddrs(rc), pw, d.dial)
	w.WaitWritten(t, 300)
	assertSlotsExternal(t, rc, pw, d.dial)

	redistest.PatchSpec(t, env.Client, key, `{"spec":{"replicas":8}}`)
	rc = servesOutsideAgain(t, key, cloudlb.ExternalPrefix, w, pw, d.dial)

	master := deleteAMaster(t, ns, rc)
	redistest.WaitShape(t, env.Client, key, 4, 8)
	rc = waitExternallyReachable(t, key, 8)
	// Writes go on through the external addresses.
	w.WaitWritten(t, 100)
	for _, n := range rc.Status.Nodes {
		if n.Name == master {
			t.Logf("%s is back at %s, external address %s", master, n.Instance, n.ExternalAddress)
		}
	}
	assertSlotsExternal(t, rc, pw, d.dial)

	deleteEveryPodUntilOneMoves(t, ns, "outside", rc)
	// Writes go on through the external addresses (CI, loaded: 291 in the minute after
	// every pod came back; 0 when the nodes named pod IPs).
	rc = servesOutsideAgain(t, key, cloudlb.ExternalPrefix, w, pw, d.dial)

	// A node restarted while the operator looks away (paused) announces its external
	// address from its first answer: Redis keeps neither its hostname nor the endpoint type
	// across a restart, so they come from the pod's start (its announce file and
	// redis.conf). Without them it would name every node by its pod IP, to every client.
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pause":true}}`)
	waitPaused(t, key)
	restartReplica(t, ns, rc)
	assertSlotsExternal(t, rc, pw, d.dial)
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pause":false}}`)
	redistest.WaitShape(t, env.Client, key, 4, 8)
	w.WaitWritten(t, 100)

	readBackOutside(t, w, rc, pw, d.dial, d, lb)

	// Removing spec.externalAccess deletes the Services and sets every node back to naming
	// pod IPs (the pods are replaced one at a time: their start script changes).
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"externalAccess":null}}`)
	redistest.WaitShape(t, env.Client, key, 4, 8)
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		svcs := &corev1.ServiceList{}
		if err := env.Client.List(ctx, svcs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var left []string
		for _, svc := range svcs.Items {
			if strings.HasSuffix(svc.Name, "-external") {
				left = append(left, svc.Name)
			}
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionExternallyReachable)
		return len(left) == 0 && c == nil, fmt.Sprintf("external Services left %v; %s %+v", left, report.ConditionExternallyReachable, c)
	})
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	for _, n := range rc.Status.Nodes {
		assertSlotsNamePodIPs(t, n.Instance, pw)
	}
}

// startTLSWriterOutside starts a writer through rc's external addresses over TLS, dialing
// with d and verifying each address it dials against the cluster's TLS Secret's CA (no
// server-name override); it waits for 300 acknowledged writes and checks CLUSTER SLOTS
// through each node, and returns the writer, its dial and the Secret.
func startTLSWriterOutside(t *testing.T, rc *redisv1alpha1.RedisCluster, pw string, d outsideDialer) (*redistest.Writer, redistest.Dial, *corev1.Secret) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name + "-tls"}, secret); err != nil {
		t.Fatal(err)
	}
	pool, err := certs.Pool(secret.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	dial := verifyingTLS(d.dial, pool)
	w := redistest.StartDialingWriter(externalAddrs(rc), pw, dial)
	w.WaitWritten(t, 300)
	assertSlotsExternal(t, rc, pw, dial)
	return w, dial, secret
}

// createRunningViewed creates rc, waits until it runs, and has every node's view of the
// cluster logged if the test fails; it returns the cluster's key and password.
func createRunningViewed(t *testing.T, rc *redisv1alpha1.RedisCluster) (client.ObjectKey, string) {
	t.Helper()
	key, _, pw := createRunning(t, rc, rc.Name)
	t.Cleanup(func() {
		if t.Failed() {
			dumpViews(t, rc.Namespace, pw)
		}
	})
	return key, pw
}

// servesOutsideAgain waits until the cluster has 4 masters of 8 nodes, each with an external
// address that starts with prefix, then until w has 100 more writes acknowledged through
// them, and checks CLUSTER SLOTS through each node's address (assertSlotsExternal).
func servesOutsideAgain(t *testing.T, key client.ObjectKey, prefix string, w *redistest.Writer, pw string, dial redistest.Dial) *redisv1alpha1.RedisCluster {
	t.Helper()
	redistest.WaitShape(t, env.Client, key, 4, 8)
	rc := waitExternallyReachableAt(t, key, 8, prefix)
	w.WaitWritten(t, 100)
	assertSlotsExternal(t, rc, pw, dial)
	return rc
}

// deleteAMaster deletes the pod of a master that serves slots and waits until the
// StatefulSet's new pod runs; it returns the pod's name.
func deleteAMaster(t *testing.T, ns string, rc *redisv1alpha1.RedisCluster) string {
	t.Helper()
	var master, oldAddr string
	for _, n := range rc.Status.Nodes {
		if n.Type == "master" && n.Slots != "" {
			master, oldAddr = n.Name, n.Instance
			break
		}
	}
	if err := env.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: master, Namespace: ns}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted master %s (was at %s)", master, oldAddr)
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: master}, p); err != nil {
			return false, err.Error()
		}
		return p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning, "pod " + master + " is not running again"
	})
	return master
}

// readBackOutside stops w and reads every key it had acknowledged back through each of
// rc's external addresses, dialing with dial (d's, or over it): none may be missing, and no
// answer may have sent the client to an address d refused.
func readBackOutside(t *testing.T, w *redistest.Writer, rc *redisv1alpha1.RedisCluster, pw string, dial redistest.Dial, d outsideDialer, lb *cloudlb.Controller) {
	t.Helper()
	written, outage := w.Stop()
	t.Logf("%d keys acknowledged through the external addresses; longest write outage %s; %d connections forwarded", written, outage, lb.Forwarded())
	keys := w.Keys()
	for _, addr := range externalAddrs(rc) {
		if missing := readThroughOutside(t, addr, pw, dial, keys); missing > 0 {
			t.Errorf("%d of %d acknowledged keys not read back through %s", missing, len(keys), addr)
		}
	}
	select {
	case addr := <-d.refused:
		t.Errorf("the outside client was sent to %s, which it cannot reach", addr)
	default:
	}
}

// assertSlotsNamePodIPs asks CLUSTER SLOTS of the node at addr (a pod IP) until every
// endpoint it names is a pod address again.
func assertSlotsNamePodIPs(t *testing.T, addr, pw string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, MaxRetries: 3})
	defer func() { _ = c.Close() }()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		slots, err := c.ClusterSlots(ctx).Result() //nolint:staticcheck // what most cluster clients still read
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slots {
			for _, n := range s.Nodes {
				if !strings.HasPrefix(n.Addr, "127.1.") {
					return false, fmt.Sprintf("CLUSTER SLOTS at %s names %s for slots %d-%d, not a pod address", addr, n.Addr, s.Start, s.End)
				}
			}
		}
		return len(slots) > 0, fmt.Sprintf("CLUSTER SLOTS at %s is empty", addr)
	})
}

// waitPaused waits until the operator has seen spec.pause: Progressing says Paused.
func waitPaused(t *testing.T, key client.ObjectKey) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Progressing")
		return cur.Status.ObservedGeneration == cur.Generation && c != nil && c.Reason == "Paused", fmt.Sprintf("conditions %+v", cur.Status.Conditions)
	})
}

// restartReplica deletes a replica's pod and waits until the StatefulSet's new pod runs
// and its node answers at its (new) pod IP.
func restartReplica(t *testing.T, ns string, rc *redisv1alpha1.RedisCluster) {
	t.Helper()
	var replica string
	for _, n := range rc.Status.Nodes {
		if n.Type == "slave" {
			replica = n.Name
			break
		}
	}
	old := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: replica}, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: replica}, p); err != nil {
			return false, err.Error()
		}
		if p.UID == old.UID || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			return false, "pod " + replica + " is not running again"
		}
		c := goredis.NewClient(&goredis.Options{Addr: net.JoinHostPort(p.Status.PodIP, "6379"), Password: redistest.Password(t, env.Client, ns, rc.Name)})
		defer func() { _ = c.Close() }()
		err := c.Ping(ctx).Err()
		return err == nil, fmt.Sprintf("%s at %s: %v", replica, p.Status.PodIP, err)
	})
	t.Logf("restarted replica %s while paused", replica)
}

// waitExternallyReachable waits until the cluster has nodes nodes, each with an external
// address, and ExternallyReachable is True.
func waitExternallyReachable(t *testing.T, key client.ObjectKey, nodes int) *redisv1alpha1.RedisCluster {
	t.Helper()
	return waitExternallyReachableAt(t, key, nodes, cloudlb.ExternalPrefix)
}

// waitExternallyReachableAt is waitExternallyReachable with external addresses that start
// with prefix.
func waitExternallyReachableAt(t *testing.T, key client.ObjectKey, nodes int, prefix string) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		with := 0
		for _, n := range rc.Status.Nodes {
			if strings.HasPrefix(n.ExternalAddress, prefix) {
				with++
			}
		}
		for _, c := range rc.Status.Conditions {
			if c.Type == report.ConditionExternallyReachable {
				return c.Status == metav1.ConditionTrue && with == nodes && len(rc.Status.Nodes) == nodes,
					fmt.Sprintf("%d of %d nodes have an external address; %s %s: %s", with, nodes, c.Type, c.Status, c.Message)
			}
		}
		return false, fmt.Sprintf("no %s condition; %d of %d nodes have an external address", report.ConditionExternallyReachable, with, nodes)
	})
	return rc
}

// externalAddrs are the nodes' external addresses from the status.
func externalAddrs(rc *redisv1alpha1.RedisCluster) []string {
	var out []string
	for _, n := range rc.Status.Nodes {
		if n.ExternalAddress != "" {
			out = append(out, n.ExternalAddress)
		}
	}
	return out
}

// assertSlotsExternal asks CLUSTER SLOTS of every node through its external address: every
// slot range is served, and every endpoint is a node's external address.
func assertSlotsExternal(t *testing.T, rc *redisv1alpha1.RedisCluster, pw string, dial redistest.Dial) {
	t.Helper()
	external := map[string]bool{}
	for _, a := range externalAddrs(rc) {
		external[a] = true
	}
	for addr := range external {
		c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, Dialer: dial, MaxRetries: 3})
		var slots []goredis.ClusterSlot
		testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
			var err error
			if slots, err = c.ClusterSlots(ctx).Result(); err != nil { //nolint:staticcheck // CLUSTER SLOTS is what most cluster clients still read, so it is what must name external addresses
				return false, err.Error()
			}
			for _, s := range slots {
				for _, n := range s.Nodes {
					if !external[n.Addr] {
						return false, fmt.Sprintf("CLUSTER SLOTS at %s names %s for slots %d-%d, not an external address", addr, n.Addr, s.Start, s.End)
					}
				}
			}
			return true, ""
		})
		served := 0
		for _, s := range slots {
			served += s.End - s.Start + 1
		}
		if served != 16384 {
			t.Errorf("CLUSTER SLOTS at %s covers %d slots, want 16384", addr, served)
		}
		_ = c.Close()
	}
}

// readThroughOutside reads keys back through a cluster client whose only seed is addr and
// which reaches only external addresses; it returns how many are missing or wrong.
func readThroughOutside(t *testing.T, addr, pw string, dial redistest.Dial, keys []string) int {
	t.Helper()
	c := redistest.DialingClient([]string{addr}, pw, dial)
	defer func() { _ = c.Close() }()
	missing := 0
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		var cmds []*goredis.StringCmd
		// A client retries what its connection lost (the stand-in load balancer looks the
		// pod up in the API server per connection: seconds on a loaded machine); a key is
		// missing only when a node answered without it.
		for try := 0; try < 5; try++ {
			cmds = make([]*goredis.StringCmd, len(batch))
			_, _ = c.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
				for i, k := range batch {
					cmds[i] = p.Get(t.Context(), k)
				}
				return nil
			})
			if !slices.ContainsFunc(cmds, func(cmd *goredis.StringCmd) bool { return isTransportError(cmd.Err()) }) {
				break
			}
			time.Sleep(time.Second)
		}
		for i, cmd := range cmds {
			if v, err := cmd.Result(); err != nil || v != strings.TrimPrefix(batch[i], "w:") {
				if missing == 0 {
					t.Logf("GET %s through %s: %q, %v", batch[i], addr, v, err)
				}
				missing++
			}
		}
	}
	return missing
}

// TestRedisClusterRefusesExternalAccessItCannotServe: NodePort without its firstNodePort,
// a LoadBalancer with one, and node ports whose bus ports would pass 65535 are refused when
// applied, with a message naming the field and the fix; a LoadBalancer is accepted, with
// TLS too, and NodePort with a firstNodePort.
func TestRedisClusterRefusesExternalAccessItCannotServe(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cases := map[string]struct {
		access *redisv1alpha1.ExternalAccessSpec
		tls    bool
		want   string // "" when accepted
	}{
		"node port without its first": {access: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort},
			want: "spec.externalAccess.firstNodePort goes with type NodePort"},
		"load balancer with a first node port": {access: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer, FirstNodePort: ptr.To[int32](30000)},
			want: "spec.externalAccess.firstNodePort goes with type NodePort"},
		"node ports too high": {access: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To[int32](55535)},
			want: "spec.externalAccess.firstNodePort is too high"},
		"node ports":    {access: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To[int32](30000)}},
		"with TLS":      {access: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer}, tls: true},
		"load balancer": {access: &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer}},
	}
	for name, c := range cases {
		rc := redistest.NewCluster(ns, strings.ToLower(strings.ReplaceAll(name, " ", "-")), 6)
		rc.Spec.Pause = true
		rc.Spec.ExternalAccess = c.access
		if c.tls {
			rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
		}
		err := env.Client.Create(t.Context(), rc)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", name, err)
		case c.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want Invalid saying %q", name, err, c.want)
		}
	}
}

// deleteEveryPodUntilOneMoves deletes every pod of the cluster at once, again (at most
// three times) until at least one comes back at another pod IP than rc's status shows.
func deleteEveryPodUntilOneMoves(t *testing.T, ns, name string, rc *redisv1alpha1.RedisCluster) {
	t.Helper()
	ips := map[string]string{}
	for _, n := range rc.Status.Nodes {
		ips[n.Name] = n.Instance
	}
	start := time.Now()
	for try := 1; ; try++ {
		// Spare addresses first: kwok hands a freed address out before a new one, and a pod
		// recreated alone would otherwise find only its own old address free.
		if err := env.Cluster.CycleIPs(t.Context(), ns, len(ips)); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.DeleteAllOf(t.Context(), &corev1.Pod{}, client.InNamespace(ns),
			client.MatchingLabels{"app.kubernetes.io/instance": name}, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		moved := 0
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			pods := &corev1.PodList{}
			if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
				return false, err.Error()
			}
			running := 0
			moved = 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp.IsZero() && p.Status.PodIP != "" && p.CreationTimestamp.After(start.Add(-time.Second)) {
					running++
					if host, _, _ := net.SplitHostPort(ips[p.Name]); p.Status.PodIP != host {
						moved++
					}
				}
			}
			return running == len(ips), fmt.Sprintf("%d of %d pods recreated with an IP", running, len(ips))
		})
		if moved > 0 {
			t.Logf("deleted every pod %d times; %d came back at new pod IPs", try, moved)
			return
		}
		if try == 3 {
			t.Fatalf("every pod came back at its old IP three times: the fault (new IPs) was never injected")
		}
	}
}

// TestRedisClusterServesOutsideClientsOverTLS: with spec.tls and spec.externalAccess, a
// client that reaches only the load balancers' addresses and verifies, over TLS, the
// address it dials (no server-name override) writes and reads through every node; when a
// node's load balancer is given a new address, the operator issues a certificate naming it,
// the nodes load it without a restart, and the client goes on through the new address.
// Every acknowledged key reads back through every external address.
func TestRedisClusterServesOutsideClientsOverTLS(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	lb := cloudlb.Start(env.Client, ns)
	t.Cleanup(lb.Stop)
	rc := redistest.NewCluster(ns, "outside-tls", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer}
	key, _, pw := createRunning(t, rc, "over TLS with external access")
	rc = waitExternallyReachable(t, key, 6)
	d := outsideDialer{refused: make(chan string, 1)}
	w, dial, secret := startTLSWriterOutside(t, rc, pw, d)

	// outside-tls-1's load balancer is replaced: its Service is deleted, the operator makes
	// it again, and the stand-in gives it another address.
	before := map[string]string{}
	for _, n := range rc.Status.Nodes {
		before[n.Name] = n.ExternalAddress
	}
	moved := "outside-tls-1"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: moved + "-external"}}
	if err := env.Client.Delete(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	// The stand-in picks a random free address: the old one again is a 1 in 64,516 chance.
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		now := externalOf(rc, moved)
		return now != "" && now != before[moved], fmt.Sprintf("%s's external address is %q (was %s)", moved, now, before[moved])
	})
	rc = waitExternallyReachable(t, key, 6)
	now := externalOf(rc, moved)
	t.Logf("%s's load balancer moved from %s to %s", moved, before[moved], now)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "outside-tls-tls"}, secret); err != nil {
		t.Fatal(err)
	}
	cert, err := certs.ParseCert(secret.Data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range externalAddrs(rc) {
		host, _, _ := net.SplitHostPort(addr)
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("the nodes' certificate: %v", err)
		}
	}
	// Writes go on through the external addresses, the new one included.
	w.WaitWritten(t, 200)
	assertSlotsExternal(t, rc, pw, dial)

	readBackOutside(t, w, rc, pw, dial, d, lb)
}

// externalOf is pod's external address in rc's status.
func externalOf(rc *redisv1alpha1.RedisCluster, pod string) string {
	for _, n := range rc.Status.Nodes {
		if n.Name == pod {
			return n.ExternalAddress
		}
	}
	return ""
}

// verifyingTLS is dial followed by a TLS handshake that verifies the server's certificate
// with pool for the host dialed, as redis-cli --tls --cacert does: no server-name override.
func verifyingTLS(dial redistest.Dial, pool *x509.CertPool) redistest.Dial {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// isTransportError is an error of the connection (a timeout, a closed or refused
// connection), not an answer of Redis.
func isTransportError(err error) bool {
	var netErr net.Error
	return err != nil && (errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET))
}
