package redispods

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// probe is the readiness probe of one running redis container, run as a kubelet runs an
// exec probe: the command in the container's file system (the same volume mounts) and
// environment, every periodSeconds, killed after timeoutSeconds. kwok marks a pod Ready
// when it starts running and never again looks at a Running pod, so the result here is the
// pod's readiness: the Ready and ContainersReady conditions and the container's ready flag.
type probe struct {
	argv    []string // the exec command, its loopback address turned into the pod's IP
	mounts  []corev1.VolumeMount
	dirs    map[string]string // volume host directories by name
	env     []string
	period  time.Duration
	timeout time.Duration
}

// newProbe returns the container's readiness probe, or nil when it has none (or not an exec
// one). Only the network namespace is played: the pod's loopback address (127.0.0.1,
// where a probe reaches its own container) is the pod's IP here, as redis-server binds it.
func newProbe(pod *corev1.Pod, c *corev1.Container, dirs map[string]string, env []string) *probe {
	p := c.ReadinessProbe
	if p == nil || p.Exec == nil || len(p.Exec.Command) == 0 {
		return nil
	}
	argv := make([]string, len(p.Exec.Command))
	for i, a := range p.Exec.Command {
		argv[i] = strings.ReplaceAll(a, "127.0.0.1", pod.Status.PodIP)
	}
	return &probe{
		argv: argv, mounts: c.VolumeMounts, dirs: dirs, env: env,
		period:  seconds(p.PeriodSeconds, 10), // the API's defaults
		timeout: seconds(p.TimeoutSeconds, 1),
	}
}

func seconds(n, def int32) time.Duration {
	if n <= 0 {
		n = def
	}
	return time.Duration(n) * time.Second
}

// run probes until the container ends (done: the pod is then not ready) or ctx ends, and
// writes each change of the result to the pod's status. A failed probe's output is logged when it changes, where a
// kubelet records it in an event.
func (p *probe) run(ctx context.Context, k *Kubelet, key client.ObjectKey, done <-chan struct{}) {
	var last *bool
	var lastOut string
	for {
		ready, out := p.once(ctx)
		if !ready && out != lastOut && ctx.Err() == nil {
			k.logf("redispods: readiness probe of %s failed: %s", key, out)
		}
		lastOut = out
		if last == nil || *last != ready {
			if err := k.setReady(ctx, key, ready); err != nil {
				if ctx.Err() == nil {
					k.logf("redispods: writing the readiness of %s: %v", key, err)
				}
			} else {
				last = &ready
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-done: // a container that is not running is not ready
			if last != nil && *last {
				_ = k.setReady(ctx, key, false)
			}
			return
		case <-time.After(p.period):
		}
	}
}

// once runs the probe command once: ready when it exits 0 within the timeout; out is what
// it printed.
func (p *probe) once(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := mountNamespaceCommand(ctx, p.mounts, p.dirs, p.argv)
	cmd.Env = p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return false, fmt.Sprintf("timed out after %s", p.timeout)
	case err != nil && len(out) == 0:
		return false, err.Error()
	}
	return err == nil, strings.TrimSpace(string(out))
}

// setReady writes the probe's result into the pod's status, as the kubelet's status
// manager does: the Ready and ContainersReady conditions and the redis container's ready.
func (k *Kubelet) setReady(ctx context.Context, key client.ObjectKey, ready bool) error {
	pod := &corev1.Pod{}
	if err := k.client.Get(ctx, key, pod); err != nil {
		return err
	}
	before := pod.DeepCopy()
	status, reason, message := corev1.ConditionTrue, "", ""
	if !ready {
		status, reason, message = corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [redis]"
	}
	now := metav1.Now()
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		setPodCondition(&pod.Status, corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now})
	}
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == "redis" {
			pod.Status.ContainerStatuses[i].Ready = ready
		}
	}
	return k.client.Status().Patch(ctx, pod, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func setPodCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			if s.Conditions[i].Status == c.Status {
				c.LastTransitionTime = s.Conditions[i].LastTransitionTime
			}
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}

// containerEnv is the environment the container and its probes run with: the kubelet's
// own (for PATH) and the container's env, resolved.
func containerEnv(c *corev1.Container, env map[string]string) []string {
	out := os.Environ()
	for _, e := range c.Env {
		if v, ok := env[e.Name]; ok {
			out = append(out, e.Name+"="+v)
		}
	}
	return out
}
