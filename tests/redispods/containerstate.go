package redispods

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// limitMemory is the memory cgroup a pod's redis container runs in, with the container's
// memory limit; nil when it has no limit or memory cgroups are unavailable (said once in
// the log: the pods then run unlimited).
func (k *Kubelet) limitMemory(pod *corev1.Pod, container *corev1.Container) (*podCgroup, error) {
	limit, ok := container.Resources.Limits[corev1.ResourceMemory]
	if !ok || limit.Value() <= 0 {
		return nil, nil
	}
	k.memcgOnce.Do(func() {
		k.memcg, k.memcgErr = newMemoryCgroups()
		if k.memcgErr != nil {
			k.logf("redispods: memory cgroups are unavailable (%v): Redis pods run without their memory limits", k.memcgErr)
		}
	})
	if !k.memcg.available() {
		if os.Getenv("CI") != "" {
			// A test of memory limits would pass against an unlimited pod: under CI, a pod
			// with a limit does not start without the cgroup that enforces it.
			return nil, fmt.Errorf("memory cgroups are unavailable (%w) and CI is set: the memory limit of %s/%s cannot be enforced", k.memcgErr, pod.Namespace, pod.Name)
		}
		return nil, nil
	}
	cg, err := k.memcg.forPod(string(pod.UID), limit.Value())
	if err != nil {
		k.logf("redispods: %s/%s runs without its memory limit: %v", pod.Namespace, pod.Name, err)
		return nil, nil
	}
	return cg, nil
}

// termination is how the process of s ended, as a kubelet reports it in a container's
// state: OOMKilled when the kernel killed it for its cgroup's memory limit (the cgroup
// counted an OOM kill since the process started and it died of SIGKILL), else Error or
// Completed with its exit code (128 + the signal when a signal ended it).
func (s *server) termination(state *os.ProcessState, finished time.Time) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{Reason: "Error", StartedAt: metav1.NewTime(s.started), FinishedAt: metav1.NewTime(finished)}
	killed := false
	if state != nil {
		t.ExitCode = int32(state.ExitCode())
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.ExitCode, t.Signal, killed = 128+int32(ws.Signal()), int32(ws.Signal()), ws.Signal() == syscall.SIGKILL
		}
	}
	switch {
	case killed && s.cg != nil && s.cg.oomKills() > s.oomBefore:
		t.Reason = "OOMKilled"
	case t.ExitCode == 0:
		t.Reason = "Completed"
	}
	return t
}

// reportRestart writes the redis container's restart count and last state into the pod's
// status, as a kubelet does when it restarts a container.
func (k *Kubelet) reportRestart(ctx context.Context, pod *corev1.Pod, s *server, last *corev1.ContainerStateTerminated) {
	cur := &corev1.Pod{}
	if err := k.client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		k.logf("redispods: reading %s/%s to report its restart: %v", pod.Namespace, pod.Name, err)
		return
	}
	before := cur.DeepCopy()
	i := slices.IndexFunc(cur.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.Name == resources.RedisContainer })
	if i < 0 {
		cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{Name: resources.RedisContainer})
		i = len(cur.Status.ContainerStatuses) - 1
	}
	c := &cur.Status.ContainerStatuses[i]
	c.RestartCount = s.restarts
	c.LastTerminationState = corev1.ContainerState{Terminated: last}
	c.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s.started)}}
	if err := k.client.Status().Patch(ctx, cur, client.MergeFrom(before)); err != nil {
		k.logf("redispods: reporting the restart of %s/%s: %v", pod.Namespace, pod.Name, err)
		return
	}
	k.logf("redispods: restarted the redis container of %s/%s (restart %d; it ended %s, exit code %d)", pod.Namespace, pod.Name, s.restarts, last.Reason, last.ExitCode)
}
