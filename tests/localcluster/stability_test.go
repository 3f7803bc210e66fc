package localcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestPodsStayReady watches a Deployment's pods and nodes for MWO_STABILITY_DURATION
// (default 150 s: two and a half node-monitor grace periods of 60 s, so a node whose lease
// is not renewed turns not-Ready within it; `make test` runs it in parallel with the other
// tests) and fails on any transition to not-Ready: the node flapping that kwok shows
// without a node lease. It was 5 minutes, which held one of `go test`'s two package slots
// idle for most of that time; set MWO_STABILITY_DURATION=30m for a longer watch.
func TestPodsStayReady(t *testing.T) {
	duration := 150 * time.Second
	if v := os.Getenv("MWO_STABILITY_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		duration = d
	}
	t.Parallel()
	cs := clientset(t)
	ns := newNamespace(t, cs)
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), deployment("steady", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "steady", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 3, err
	}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(duration)
	checks := 0
	for time.Now().Before(end) {
		pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !podReady(&p) {
				t.Fatalf("pod %s became not Ready after %d checks", p.Name, checks)
			}
		}
		nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
					t.Fatalf("node %s became %s: %s", n.Name, c.Status, c.Message)
				}
			}
		}
		checks++
		time.Sleep(2 * time.Second)
	}
	t.Logf("3 pods and %d nodes stayed Ready for %s (%d checks)", len(cluster.Nodes), duration, checks)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
