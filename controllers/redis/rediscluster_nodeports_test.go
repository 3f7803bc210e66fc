package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/cloudlb"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// nodePortsTaken are the node ports the suite's tests took (freeStaticNodePorts), so two
// tests running at once never ask for the same.
var nodePortsTaken = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeStaticNodePorts is the first of n node ports free on the nodes' address and not
// taken by another test, in the low band of the API server's node port range (30000-30085
// of 30000-32767), which it hands out only when asked for by number: the LoadBalancer
// Services of other tests get theirs above.
func freeStaticNodePorts(t *testing.T, n int) int32 {
	t.Helper()
	nodePortsTaken.Lock()
	defer nodePortsTaken.Unlock()
	for range 100 {
		first := 30000 + rand.IntN(86-n)
		taken := false
		for p := first; p < first+n; p++ {
			taken = taken || nodePortsTaken.ports[p]
		}
		if taken {
			continue
		}
		var held []net.Listener
		for p := first; p < first+n; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort(cloudlb.NodeIP, strconv.Itoa(p)))
			if err != nil {
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			_ = l.Close()
		}
		if len(held) == n {
			for p := first; p < first+n; p++ {
				nodePortsTaken.ports[p] = true
			}
			return int32(first) //nolint:gosec // below 30086
		}
	}
	t.Fatalf("no %d free node ports in 30000-30085", n)
	return 0
}

// onNodePorts starts the stand-in for kube-proxy's node ports in a new namespace and
// returns it with a 6-node cluster named name (not created) with NodePort external access
// on free node ports, room for ports nodes.
func onNodePorts(t *testing.T, name string, ports int) (string, *cloudlb.Controller, *redisv1alpha1.RedisCluster) {
	t.Helper()
	ns := env.Namespace(t)
	lb := cloudlb.Start(env.Client, ns)
	t.Cleanup(lb.Stop)
	first := freeStaticNodePorts(t, ports)
	rc := redistest.NewCluster(ns, name, 6)
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: &first}
	return ns, lb, rc
}

// TestRedisClusterServesClientsOutsideKubernetesOnNodePorts: with spec.externalAccess
// NodePort, each node listens on its own node port (firstNodePort + ordinal) behind a
// NodePort Service, and announces its Kubernetes node's address with it. A client that can
// reach only the nodes' address (cloudlb.NodeIP, where the stand-in for kube-proxy serves
// the node ports) writes and reads through them while the cluster scales out from 3 to 4
// masters, a master's pod is deleted, and then every pod is deleted at once (until some
// come back at new pod IPs); every acknowledged key reads back through every external
// address, and CLUSTER SLOTS from every node names only external addresses.
func TestRedisClusterServesClientsOutsideKubernetesOnNodePorts(t *testing.T) {
	t.Parallel()
	ns, lb, rc := onNodePorts(t, "nodeports", 8)
	first := *rc.Spec.ExternalAccess.FirstNodePort
	key, pw := createRunningViewed(t, rc)
	outside := cloudlb.NodeIP + ":"
	rc = waitExternallyReachableAt(t, key, 6, outside)
	for i, n := range rc.Status.Nodes {
		svc := &corev1.Service{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n.Name + "-external"}, svc); err != nil {
			t.Fatal(err)
		}
		port := first + int32(i) //nolint:gosec // 6 nodes
		if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != port || svc.Spec.Ports[0].TargetPort.IntVal != port {
			t.Errorf("Service %s: type %s, ports %+v, want NodePort %d to the pod's %d", svc.Name, svc.Spec.Type, svc.Spec.Ports, port, port)
		}
		if want := net.JoinHostPort(cloudlb.NodeIP, strconv.Itoa(int(port))); n.ExternalAddress != want {
			t.Errorf("%s's external address %s, want %s", n.Name, n.ExternalAddress, want)
		}
		if _, p, _ := net.SplitHostPort(n.Instance); p != strconv.Itoa(int(port)) {
			t.Errorf("%s's instance %s: its node does not listen on its node port %d", n.Name, n.Instance, port)
		}
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "nodeports-client"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the client Service: %v, want none (no one port reaches every node)", err)
	}

	d := outsideDialer{refused: make(chan string, 1), prefix: outside}
	w := redistest.StartDialingWriter(externalAddrs(rc), pw, d.dial)
	w.WaitWritten(t, 300)
	assertSlotsExternal(t, rc, pw, d.dial)

	redistest.PatchSpec(t, env.Client, key, `{"spec":{"replicas":8}}`)
	rc = servesOutsideAgain(t, key, outside, w, pw, d.dial)

	deleteAMaster(t, ns, rc)
	rc = servesOutsideAgain(t, key, outside, w, pw, d.dial)

	deleteEveryPodUntilOneMoves(t, ns, "nodeports", rc)
	rc = servesOutsideAgain(t, key, outside, w, pw, d.dial)

	readBackOutside(t, w, rc, pw, d.dial, d, lb)
}

// TestRedisClusterNodePortsAreFixedAtCreation: NodePort external access and its
// firstNodePort cannot be set, changed or removed on an existing cluster (its nodes listen
// on those ports), each refused with a message naming the field and the fix.
func TestRedisClusterNodePortsAreFixedAtCreation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	plain := redistest.NewCluster(ns, "plain", 6)
	plain.Spec.Pause = true
	onPorts := redistest.NewCluster(ns, "on-ports", 6)
	onPorts.Spec.Pause = true
	onPorts.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To[int32](30100)}
	for _, rc := range []*redisv1alpha1.RedisCluster{plain, onPorts} {
		if err := env.Client.Create(t.Context(), rc); err != nil {
			t.Fatal(err)
		}
	}
	const want = "spec.externalAccess type NodePort and its firstNodePort cannot be set, changed or removed"
	for name, c := range map[string]struct {
		rc    *redisv1alpha1.RedisCluster
		patch string
	}{
		"turned on":               {plain, `{"spec":{"externalAccess":{"type":"NodePort","firstNodePort":30200}}}`},
		"firstNodePort changed":   {onPorts, `{"spec":{"externalAccess":{"firstNodePort":30200}}}`},
		"turned off":              {onPorts, `{"spec":{"externalAccess":null}}`},
		"changed to LoadBalancer": {onPorts, `{"spec":{"externalAccess":{"type":"LoadBalancer","firstNodePort":null}}}`},
	} {
		err := env.Client.Patch(t.Context(), c.rc.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(c.patch)))
		if !apierrors.IsInvalid(err) || !containsAll(err.Error(), want, "create a new RedisCluster") {
			t.Errorf("%s: %v, want Invalid saying %q", name, err, want)
		}
	}
	// The annotations may change.
	redistest.PatchSpec(t, env.Client, client.ObjectKeyFromObject(onPorts), `{"spec":{"externalAccess":{"annotations":{"a":"b"}}}}`)
}

// containsAll reports whether s contains every part.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestRedisClusterServesOutsideClientsOverTLSOnNodePorts: with spec.tls and NodePort
// external access, each node serves TLS on its node port, the nodes' certificate names the
// Kubernetes nodes' address they announce, and a client that reaches only that address and
// verifies it (no server-name override) writes and reads every key back through each node.
func TestRedisClusterServesOutsideClientsOverTLSOnNodePorts(t *testing.T) {
	t.Parallel()
	_, lb, rc := onNodePorts(t, "nodeports-tls", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
	key, _, pw := createRunning(t, rc, "over TLS on node ports")
	rc = waitExternallyReachableAt(t, key, 6, cloudlb.NodeIP+":")
	d := outsideDialer{refused: make(chan string, 1), prefix: cloudlb.NodeIP + ":"}
	w, dial, secret := startTLSWriterOutside(t, rc, pw, d)
	cert, err := certs.ParseCert(secret.Data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname(cloudlb.NodeIP); err != nil {
		t.Errorf("the nodes' certificate does not name the address they announce: %v", err)
	}
	readBackOutside(t, w, rc, pw, dial, d, lb)
}

// TestRedisClusterWithARefusedNodePortServesInside: node ports the API server refuses
// (outside its node port range) leave the pods without an external address, said by
// ExternallyReachable (AddressPending, naming the pods) and a NodePortRefused event naming
// the field and the fix, while the cluster forms and serves every slot at its pod
// addresses.
func TestRedisClusterWithARefusedNodePortServesInside(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "refused-ports", 6)
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: ptr.To[int32](40000)}
	key, _, _ := createRunning(t, rc, "with refused node ports")
	waitEvent(t, ns, report.ReasonNodePortRefused, "spec.externalAccess.firstNodePort (40000)")
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionExternallyReachable)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == report.ReasonAddressPending &&
				containsAll(c.Message, "refused-ports-0", "refused-ports-5", "node port"),
			fmt.Sprintf("%s %+v", report.ConditionExternallyReachable, c)
	})
}

// TestRedisClusterOnNodePortsBacksUpAndRestores: a cluster on node ports is backed up (the
// backup reads its nodes at their pod addresses and node ports) and restored into a new
// cluster on other node ports; every key acknowledged before the backup started reads back
// through each node of the new cluster, whose answers send the client to node addresses and
// node ports.
func TestRedisClusterOnNodePortsBacksUpAndRestores(t *testing.T) {
	t.Parallel()
	ns, _, origin := onNodePorts(t, "np-origin", 6)
	createStoreSecrets(t, ns, store.SecretKey)
	_, rc, pw := createRunning(t, origin, "on node ports")
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 500)
	acknowledged := w.Written()
	b := waitBackup(t, createBackup(t, ns, "np-nightly", "np-origin", storeSpec(store.Bucket)), redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, 2*time.Minute)
	assertBackupOf(t, b, rc, acknowledged)
	written, _ := w.Stop()

	first := freeStaticNodePorts(t, 6)
	reborn := redistest.NewCluster(ns, "np-reborn", 6)
	reborn.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessNodePort, FirstNodePort: &first}
	reborn.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: "np-nightly"}
	if err := env.Client.Create(t.Context(), reborn); err != nil {
		t.Fatal(err)
	}
	waitRestored(t, client.ObjectKeyFromObject(reborn))
	restored := waitExternallyReachableAt(t, client.ObjectKeyFromObject(reborn), 6, cloudlb.NodeIP+":")
	t.Logf("backed up %d keys (%d acknowledged before the backup, %d in all); restored %d", b.Status.Keys, acknowledged, written, restored.Status.Restore.Keys)
	if lost := w.VerifyFirstOn(t, restored, redistest.Password(t, env.Client, ns, "np-reborn"), acknowledged); lost > 0 {
		t.Errorf("%d of the %d keys acknowledged before the backup are missing from the restored cluster", lost, acknowledged)
	}
}
