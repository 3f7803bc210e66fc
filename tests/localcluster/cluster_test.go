package localcluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChildCluster()
		return
	}
	ctx := context.Background()
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{Nodes: 3, ObjectStore: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cluster:", err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	os.Exit(code)
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newNamespace(t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "lc-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitForDefaultServiceAccount(t.Context(), ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func TestVersionReportsPinnedKubernetes(t *testing.T) {
	v, err := clientset(t).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.36.3" {
		t.Fatalf("/version gitVersion = %q, want v1.36.3", v.GitVersion)
	}
}

func TestNodesLookReal(t *testing.T) {
	nodes, err := clientset(t).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("got %d nodes, want 3", len(nodes.Items))
	}
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		for _, label := range []string{"kubernetes.io/os", "kubernetes.io/arch", "kubernetes.io/hostname", "topology.kubernetes.io/zone"} {
			if n.Labels[label] == "" {
				t.Errorf("node %s has no %s label", n.Name, label)
			}
		}
		zones[n.Labels["topology.kubernetes.io/zone"]] = true
	}
	if len(zones) != 3 {
		t.Errorf("nodes span %d zones, want 3", len(zones))
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/instance": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

func TestDeploymentGetsRunningPodsWithLoopbackIPs(t *testing.T) {
	cs := clientset(t)
	ns := newNamespace(t, cs)
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), deployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 3, err
	})
	if err != nil {
		t.Fatalf("Deployment never reported 3 available replicas: %v", err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("got %d pods, want 3", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || !strings.HasPrefix(p.Status.PodIP, "127.1.") || !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
			t.Errorf("pod %s: phase %s, IP %q, node %q; want Running on a kwok node with a 127.1.x.x IP",
				p.Name, p.Status.Phase, p.Status.PodIP, p.Spec.NodeName)
		}
	}
}

func TestGarbageCollectorDeletesOwnedChild(t *testing.T) {
	cs := clientset(t)
	ns := newNamespace(t, cs)
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
	}}}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "child", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the garbage collector did not delete the owned child")
	}
}

func TestServiceAccountTokenAuthenticatesAndRBACDecides(t *testing.T) {
	cs := clientset(t)
	ns := newNamespace(t, cs)
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asReader := tokenClient(t, tr.Status.Token)
	// The RBAC authorizer reads Roles and RoleBindings from its informers: a binding made a
	// moment ago may not be there yet (a make test run saw Forbidden 0.15 s after it).
	var listErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, listErr = asReader.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); listErr == nil {
			break
		}
	}
	if listErr != nil {
		t.Errorf("the Role allows listing pods, got %v", listErr)
	}
	if _, err := asReader.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the Role does not allow listing secrets, want Forbidden, got %v", err)
	}
	if _, err := asReader.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the Role is namespaced, want Forbidden in kube-system, got %v", err)
	}
	if _, err := tokenClient(t, tr.Status.Token+"x").CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a tampered token must not authenticate, got %v", err)
	}
}

func tokenClient(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.AnonymousClientConfig(cluster.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func listening(port string) bool {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 200*time.Millisecond)
	if err == nil {
		_ = conn.Close()
	}
	return err == nil
}
