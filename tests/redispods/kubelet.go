// Package redispods plays kubelet for Redis pods on the local cluster: for every Running pod
// of a RedisCluster (kwok gives it a 127.1.x.x IP) it starts a real redis-server bound to the
// pod's IP and port, with the configuration the pod would get (its ConfigMap volume, its
// args with $(VAR) expanded from its env, the password from its Secret) and a data directory
// per pod name that outlives the pod, as a PersistentVolumeClaim would.
package redispods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SelectorLabel selects the pods this kubelet runs.
const SelectorLabel = "app.kubernetes.io/name"

// Kubelet runs redis-server processes for Redis pods.
type Kubelet struct {
	client  client.Client
	dataDir string
	logf    func(string, ...any)

	mu      sync.Mutex
	running map[string]*server // by namespace/pod
}

type server struct {
	uid    string
	ip     string
	cmd    *exec.Cmd
	done   chan struct{}
	exited time.Time // when the process ended; zero while it runs
}

// RestartDelay is how long a crashed redis-server stays down before the kubelet restarts it
// (restartPolicy Always, without the growing back-off).
const RestartDelay = 2 * time.Second

// New returns a Kubelet that keeps pod data under dataDir.
func New(c client.Client, dataDir string, logf func(string, ...any)) *Kubelet {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Kubelet{client: c, dataDir: dataDir, logf: logf, running: map[string]*server{}}
}

// Run syncs processes with pods every 100ms until ctx ends, then stops every process.
func (k *Kubelet) Run(ctx context.Context) {
	defer k.StopAll()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			k.logf("redispods: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (k *Kubelet) sync(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := k.client.List(ctx, pods, client.MatchingLabels{SelectorLabel: "rediscluster"}); err != nil {
		return err
	}
	want := map[string]*corev1.Pod{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.DeletionTimestamp.IsZero() {
			want[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	// Stop first: a new pod may have been given the IP of one that is gone.
	k.mu.Lock()
	var stale []string
	for key, s := range k.running {
		if pod := want[key]; pod == nil || s.uid != string(pod.UID) || s.ip != pod.Status.PodIP {
			stale = append(stale, key)
		}
	}
	k.mu.Unlock()
	for _, key := range stale {
		k.stop(key)
	}
	for key, pod := range want {
		k.mu.Lock()
		s := k.running[key]
		k.mu.Unlock()
		if s != nil && !s.restartDue() {
			continue
		}
		if err := k.start(ctx, pod); err != nil {
			k.logf("redispods: starting %s: %v", key, err)
		}
	}
	return nil
}

// restartDue reports whether the process ended at least RestartDelay ago.
func (s *server) restartDue() bool {
	select {
	case <-s.done:
		return time.Since(s.exited) >= RestartDelay
	default:
		return false
	}
}

// start launches redis-server for pod.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) error {
	container := redisContainer(pod)
	if container == nil {
		return errors.New("no redis container")
	}
	dir := filepath.Join(k.dataDir, pod.Namespace, pod.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	env, err := k.resolveEnv(ctx, pod, container)
	if err != nil {
		return err
	}
	args, err := k.resolveArgs(ctx, pod, container, env, dir)
	if err != nil {
		return err
	}
	ip := pod.Status.PodIP
	args = append(args, "--dir", dir, "--bind", ip, "--bind-source-addr", ip, "--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd := exec.Command("redis-server", args...)
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s := &server{uid: string(pod.UID), ip: ip, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); s.exited = time.Now(); close(s.done) }()
	k.mu.Lock()
	k.running[pod.Namespace+"/"+pod.Name] = s
	k.mu.Unlock()
	k.logf("redispods: started redis-server for %s/%s at %s:6379", pod.Namespace, pod.Name, ip)
	return nil
}

func redisContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "redis" {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// resolveEnv evaluates the container's env as the kubelet does, for the sources Redis pods use.
func (k *Kubelet) resolveEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (map[string]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "status.podIP":
				env[e.Name] = pod.Status.PodIP
			case "metadata.name":
				env[e.Name] = pod.Name
			case "metadata.namespace":
				env[e.Name] = pod.Namespace
			case "spec.nodeName":
				env[e.Name] = pod.Spec.NodeName
			}
		case e.ValueFrom.SecretKeyRef != nil:
			secret := &corev1.Secret{}
			ref := e.ValueFrom.SecretKeyRef
			if err := k.client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, secret); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env[e.Name] = string(secret.Data[ref.Key])
		}
	}
	return env, nil
}

// resolveArgs expands $(VAR) in the args and swaps the config path for a file written from
// the pod's ConfigMap volume.
func (k *Kubelet) resolveArgs(ctx context.Context, pod *corev1.Pod, c *corev1.Container, env map[string]string, dir string) ([]string, error) {
	mounts := map[string]string{} // mount path -> ConfigMap name
	var dataMounts []string       // every other mount is the pod's data directory
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				mounts[m.MountPath] = v.ConfigMap.Name
			}
		}
		if _, isConfig := mounts[m.MountPath]; !isConfig {
			dataMounts = append(dataMounts, m.MountPath)
		}
	}
	var args []string
	for _, a := range c.Args {
		a = expand(a, env)
		for path, cmName := range mounts {
			if !strings.HasPrefix(a, path+"/") {
				continue
			}
			cm := &corev1.ConfigMap{}
			if err := k.client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cmName}, cm); err != nil {
				return nil, fmt.Errorf("config %s: %w", cmName, err)
			}
			file := filepath.Join(dir, filepath.Base(a))
			conf := cm.Data[filepath.Base(a)]
			for _, m := range dataMounts { // the data volume is mounted at dir
				conf = strings.ReplaceAll(conf, " "+m+"\n", " "+dir+"\n")
			}
			if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
				return nil, err
			}
			a = file
		}
		args = append(args, a)
	}
	return args, nil
}

func expand(s string, env map[string]string) string {
	for name, value := range env {
		s = strings.ReplaceAll(s, "$("+name+")", value)
	}
	return s
}

// Crash kills a pod's redis-server with SIGKILL, as a crashing container. The pod stays, and
// the kubelet restarts the server after RestartDelay, as restartPolicy Always does.
func (k *Kubelet) Crash(namespace, pod string) error {
	k.mu.Lock()
	s := k.running[namespace+"/"+pod]
	k.mu.Unlock()
	if s == nil {
		return fmt.Errorf("no redis-server for %s/%s", namespace, pod)
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	return nil
}

// Addr is the ip:port a pod's redis-server listens on, empty when none runs.
func (k *Kubelet) Addr(namespace, pod string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.running[namespace+"/"+pod]; s != nil {
		return s.ip + ":6379"
	}
	return ""
}

func (k *Kubelet) stop(key string) {
	k.mu.Lock()
	s := k.running[key]
	delete(k.running, key)
	k.mu.Unlock()
	if s == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	k.logf("redispods: stopped redis-server for %s", key)
}

// StopAll stops every redis-server.
func (k *Kubelet) StopAll() {
	k.mu.Lock()
	keys := make([]string, 0, len(k.running))
	for key := range k.running {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.stop(key)
	}
}
