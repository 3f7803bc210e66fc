// Package redispods plays kubelet for Redis pods on the local cluster: for every Running pod
// of a RedisCluster (kwok gives it a 127.1.x.x IP) it runs the pod's redis container as a
// kubelet would: its command and args with $(VAR) expanded from its env, that env (fieldRef
// and secretKeyRef resolved) in the process environment, and each volumeMount bind-mounted
// in a private mount namespace. ConfigMap volumes are files kept up to date from the API;
// every other volume is the pod's data directory, named after the pod, which outlives the
// pod as a PersistentVolumeClaim would. With Probes, the container's readiness probe runs
// as a kubelet runs it, and its result is the pod's Ready condition. Only the network namespace is
// played, by binding redis-server to the pod's IP. A container with a memory limit runs in a
// memory cgroup of that size (v1 or v2; without cgroups it runs unlimited, said once in the
// log), so the kernel kills it as it would under a kubelet; a restart is reported in the
// container's status as a kubelet does (restartCount, lastState: OOMKilled, Error or
// Completed).
package redispods

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/proctable"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SelectorLabel selects the pods this kubelet runs.
const SelectorLabel = "app.kubernetes.io/name"

// Finalizer holds a pod this kubelet runs until its process has stopped, as a real kubelet
// confirms a pod's deletion only after its containers stopped: without it kwok removes the
// pod at once, the StatefulSet creates its successor, and the old process still answers at
// an address the new pod may be given, for a moment speaking for it.
const Finalizer = "redispods.middleware-operator.io/process-stopped"

// Kubelet runs the redis containers of Redis pods. Under its data directory, a pod's data
// volume is <namespace>/<pod>, and its ConfigMap volumes and log are in
// <namespace>/.volumes/<pod>, apart from the data.
type Kubelet struct {
	// Probes makes it run each container's readiness probe and write the pod's Ready
	// condition (off: kwok's Ready from the start stands). Each probe starts about a dozen
	// processes; with 150 pods every 5 s that slowed the whole test run several-fold, so
	// the heavy suites leave it off and `make run` and the runner's own tests turn it on.
	Probes bool

	client client.Client
	// cache, when set, feeds client's reads from watches; Run starts it first.
	cache   cache.Cache
	dataDir string
	logf    func(string, ...any)

	mu      sync.Mutex         // guards running, and LoseData holds it until the data is gone
	running map[string]*server // by namespace/pod

	// volumes remembers what each volume directory was last written from, so that a sync
	// rewrites only the volumes whose Secret or ConfigMap changed.
	volumes writtenVolumes
	// memcg gives each redis container its memory limit (made on first use, see limitMemory).
	memcg     *memoryCgroups
	memcgErr  error // why memcg is unavailable
	memcgOnce sync.Once
}

type server struct {
	uid    string
	ip     string
	port   int // the client port redis-server listens on
	cmd    *exec.Cmd
	done   chan struct{}
	exited time.Time // when the process ended; zero while it runs
	// started is when the process started, restarts how often the pod's container was
	// restarted before it.
	started  time.Time
	restarts int32
	// cg is the memory cgroup it runs in (nil: unlimited), oomBefore its OOM-kill count at
	// the start.
	cg        *podCgroup
	oomBefore int64
	// terminated is how it ended, set before done is closed.
	terminated *corev1.ContainerStateTerminated
}

// RestartDelay is how long a crashed redis-server stays down before the kubelet restarts it
// (restartPolicy Always, without the growing back-off).
const RestartDelay = 2 * time.Second

// New returns a Kubelet that keeps pod data, volumes and logs under dataDir.
func New(c client.Client, dataDir string, logf func(string, ...any)) *Kubelet {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Kubelet{client: c, dataDir: dataDir, logf: logf, running: map[string]*server{}}
}

// Watching returns a Kubelet that reads pods, Secrets and ConfigMaps from watches, as a
// kubelet does, and writes to the API server of cfg. Reading them from the API server every
// 100 ms (New with a plain client) cost the test API server most of its CPU: about 70 GETs a
// second with two suites' clusters running.
func Watching(cfg *rest.Config, dataDir string, logf func(string, ...any)) (*Kubelet, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: clientgoscheme.Scheme, DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{SelectorLabel: "rediscluster"})},
	}})
	if err != nil {
		return nil, fmt.Errorf("while making the kubelet's cache: %w", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return nil, fmt.Errorf("while making the kubelet's client: %w", err)
	}
	k := New(cl, dataDir, logf)
	k.cache = c
	return k, nil
}

// Run syncs processes with pods every 100ms until ctx ends, then stops every process.
func (k *Kubelet) Run(ctx context.Context) {
	defer k.StopAll()
	if k.cache != nil {
		cacheDone := make(chan struct{})
		go func() {
			defer close(cacheDone)
			if err := k.cache.Start(ctx); err != nil {
				k.logf("redispods: the cache stopped: %v", err)
			}
		}()
		defer func() { <-cacheDone }()
		k.cache.WaitForCacheSync(ctx) // started: a first read now waits for its informer to sync
	}
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
	// The cache's own objects (read only here: start and release change a copy): copying
	// every pod ten times a second was a large share of a test binary's CPU.
	if err := k.client.List(ctx, pods, client.MatchingLabels{SelectorLabel: "rediscluster"}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	want := map[string]*corev1.Pod{}
	var deleting []*corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !pod.DeletionTimestamp.IsZero() && slices.Contains(pod.Finalizers, Finalizer) {
			deleting = append(deleting, pod)
		}
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
	for _, pod := range deleting { // stopped above, or never started
		if err := k.release(ctx, pod.DeepCopy()); err != nil {
			k.logf("redispods: releasing %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
	cms := &configMaps{client: k.client, got: map[client.ObjectKey]*corev1.ConfigMap{}}
	for key, pod := range want {
		k.mu.Lock()
		s := k.running[key]
		due := s == nil || s.restartDue()
		k.mu.Unlock()
		if !due { // the kubelet keeps a running pod's ConfigMap volumes up to date
			if _, err := k.writeVolumes(ctx, pod, cms); err != nil {
				k.logf("redispods: updating the volumes of %s: %v", key, err)
			}
			continue
		}
		if err := k.start(ctx, pod.DeepCopy(), cms); err != nil {
			k.logf("redispods: starting %s: %v", key, err)
		}
	}
	return nil
}

// restartDue reports whether the process ended at least RestartDelay ago. Call it holding
// Kubelet.mu.
func (s *server) restartDue() bool {
	select {
	case <-s.done:
		return time.Since(s.exited) >= RestartDelay
	default:
		return false
	}
}

// start runs the pod's redis container as a kubelet would: its command and args with $(VAR)
// expanded, its env in the process environment, each volumeMount a bind mount of the
// volume's host directory in a private mount namespace. Only the network namespace is
// played by appending --bind and --bind-source-addr with the pod's IP to the args.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod, cms *configMaps) error {
	container := redisContainer(pod)
	if container == nil {
		return errors.New("no redis container")
	}
	dataDir, podDir := k.DataDir(pod.Namespace, pod.Name), k.podDir(pod.Namespace, pod.Name)
	for _, dir := range []string{dataDir, podDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	volumes, err := k.writeVolumes(ctx, pod, cms)
	if err != nil {
		return err
	}
	env, err := k.resolveEnv(ctx, pod, container)
	if err != nil {
		return err
	}
	if !slices.Contains(pod.Finalizers, Finalizer) {
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Finalizers = append(pod.Finalizers, Finalizer)
		if err := k.client.Patch(ctx, pod, patch); err != nil {
			return fmt.Errorf("while adding the finalizer: %w", err)
		}
	}
	command := container.Command
	if len(command) == 0 {
		command = []string{"redis-server"} // the image's entrypoint
	}
	var argv []string
	for _, a := range append(slices.Clone(command), container.Args...) {
		argv = append(argv, expand(a, env))
	}
	ip := pod.Status.PodIP
	argv = append(argv, "--bind", ip, "--bind-source-addr", ip)

	hostDirs := map[string]string{}
	for _, m := range container.VolumeMounts {
		if hostDirs[m.Name] = volumes[m.Name]; hostDirs[m.Name] == "" {
			hostDirs[m.Name] = dataDir // the data volume (a claim, hostPath or NFS): one directory per pod
		}
	}
	cmd := mountNamespaceCommand(context.Background(), container.VolumeMounts, hostDirs, argv) // stopped by stop, not by ctx
	cmd.Env = containerEnv(container, env)
	out, err := os.OpenFile(k.logPath(pod.Namespace, pod.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cg, err := k.limitMemory(pod, container)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	s := &server{uid: string(pod.UID), ip: ip, port: listenPort(pod.Name, env), cmd: cmd, done: make(chan struct{}), started: time.Now(), cg: cg}
	if cg != nil {
		// Before the start script execs redis-server, so the server and its forks are in it.
		if err := cg.add(cmd.Process.Pid); err != nil {
			k.logf("redispods: %s/%s runs without its memory limit: %v", pod.Namespace, pod.Name, err)
		}
		s.oomBefore = cg.oomKills()
	}
	go func() {
		_ = cmd.Wait()
		s.exited = time.Now()
		s.terminated = s.termination(cmd.ProcessState, s.exited)
		close(s.done)
	}()
	k.mu.Lock()
	prev := k.running[pod.Namespace+"/"+pod.Name]
	k.mu.Unlock()
	if prev != nil && prev.uid == s.uid && prev.terminated != nil {
		s.restarts = prev.restarts + 1
		k.reportRestart(ctx, pod, s, prev.terminated)
	}
	if p := newProbe(pod, container, hostDirs, containerEnv(container, env)); p != nil && k.Probes {
		go p.run(ctx, k, client.ObjectKeyFromObject(pod), s.done)
	}
	k.mu.Lock()
	k.running[pod.Namespace+"/"+pod.Name] = s
	k.mu.Unlock()
	k.logf("redispods: started the redis container of %s/%s at %s:%d", pod.Namespace, pod.Name, ip, s.port)
	return nil
}

// mountNamespaceCommand runs argv in a private mount namespace where each mount's path is a
// bind mount of its volume's host directory (hostDirs, by volume name). The mount points are
// created if missing, on the host's file system too. ctx ending kills the process.
func mountNamespaceCommand(ctx context.Context, mounts []corev1.VolumeMount, hostDirs map[string]string, argv []string) *exec.Cmd {
	mounts = slices.Clone(mounts) // a directory is mounted before the mounts inside it
	slices.SortStableFunc(mounts, func(a, b corev1.VolumeMount) int { return strings.Compare(a.MountPath, b.MountPath) })
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, m := range mounts {
		path := shellQuote(m.MountPath)
		fmt.Fprintf(&script, "mkdir -p %s\nmount --bind %s %s\n", path, shellQuote(hostDirs[m.Name]), path)
		if m.ReadOnly {
			fmt.Fprintf(&script, "mount -o remount,bind,ro %s\n", path)
		}
	}
	script.WriteString(`exec "$@"` + "\n")
	unshare := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		unshare = append([]string{"--user", "--map-root-user"}, unshare...)
	}
	return exec.CommandContext(ctx, "unshare", slices.Concat(unshare, []string{"--", "sh", "-c", script.String(), "sh"}, argv)...)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// configMaps reads each ConfigMap once per sync: every pod of a cluster mounts the same ones.
type configMaps struct {
	client client.Client
	got    map[client.ObjectKey]*corev1.ConfigMap // nil when not found
}

func (c *configMaps) get(ctx context.Context, key client.ObjectKey) (*corev1.ConfigMap, error) {
	if cm, ok := c.got[key]; ok {
		return cm, nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.client.Get(ctx, key, cm, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) { // read only
		cm = nil
	} else if err != nil {
		return nil, err
	}
	c.got[key] = cm
	return cm, nil
}

// writeVolumes brings the pod's ConfigMap volumes up to date, one file per key, and returns
// their host directories by volume name. An optional volume whose ConfigMap is missing is an
// empty directory; a required one is an error, and the files already written stay.
func (k *Kubelet) writeVolumes(ctx context.Context, pod *corev1.Pod, cms *configMaps) (map[string]string, error) {
	dirs := map[string]string{}
	var errs []error
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil { // lives as long as the pod, across container restarts
			dirs[v.Name] = filepath.Join(k.podDir(pod.Namespace, pod.Name), v.Name)
			if err := os.MkdirAll(dirs[v.Name], 0o777); err != nil {
				errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
			}
			continue
		}
		if v.Secret != nil {
			dirs[v.Name] = filepath.Join(k.podDir(pod.Namespace, pod.Name), v.Name)
			if err := k.writeSecretVolume(ctx, pod, v.Secret, dirs[v.Name]); err != nil {
				errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
			}
			continue
		}
		if v.Projected != nil && secretsOnly(v.Projected) { // not the service account token's
			dirs[v.Name] = filepath.Join(k.podDir(pod.Namespace, pod.Name), v.Name)
			if err := k.writeProjectedVolume(ctx, pod, v.Projected, dirs[v.Name]); err != nil {
				errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
			}
			continue
		}
		if v.ConfigMap == nil {
			continue
		}
		dir := filepath.Join(k.podDir(pod.Namespace, pod.Name), v.Name)
		dirs[v.Name] = dir
		cm, err := cms.get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.ConfigMap.Name})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
			continue
		case cm == nil && !ptr.Deref(v.ConfigMap.Optional, false):
			errs = append(errs, fmt.Errorf("volume %s: ConfigMap %s not found", v.Name, v.ConfigMap.Name))
			continue
		case cm == nil:
			cm = &corev1.ConfigMap{}
		}
		if err := k.volumes.write(dir, string(pod.UID)+" "+cm.ResourceVersion, func() map[string][]byte {
			files := map[string][]byte{}
			for key, value := range cm.Data {
				files[key] = []byte(value)
			}
			maps.Copy(files, cm.BinaryData)
			return files
		}); err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
		}
	}
	return dirs, errors.Join(errs...)
}

// writeSecretVolume writes a Secret volume's files into dir (its items, or every key), kept
// up to date on every sync as a kubelet refreshes Secret volumes (here at once, where a real
// kubelet takes up to its sync period and cache TTL).
func (k *Kubelet) writeSecretVolume(ctx context.Context, pod *corev1.Pod, v *corev1.SecretVolumeSource, dir string) error {
	files := map[string][]byte{}
	version, err := k.secretFiles(ctx, pod.Namespace, v.SecretName, v.Items, files)
	if err != nil {
		return err
	}
	return k.volumes.write(dir, string(pod.UID)+" "+version, func() map[string][]byte { return files })
}

// secretsOnly reports whether every source of a projected volume is a Secret: the volumes
// writeProjectedVolume writes (the redis container mounts no other kind).
func secretsOnly(v *corev1.ProjectedVolumeSource) bool {
	return len(v.Sources) > 0 && !slices.ContainsFunc(v.Sources, func(s corev1.VolumeProjection) bool { return s.Secret == nil })
}

// writeProjectedVolume writes a projected volume of Secrets into dir, each source as
// writeSecretVolume writes one.
func (k *Kubelet) writeProjectedVolume(ctx context.Context, pod *corev1.Pod, v *corev1.ProjectedVolumeSource, dir string) error {
	files := map[string][]byte{}
	version := string(pod.UID)
	for _, src := range v.Sources {
		rv, err := k.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, files)
		if err != nil {
			return err
		}
		version += " " + rv
	}
	return k.volumes.write(dir, version, func() map[string][]byte { return files })
}

// secretFiles adds to files the Secret name's items (file path -> value), or every key
// when there is no item; it returns the Secret's resourceVersion. The values are the
// cache's own (not copied): read only.
func (k *Kubelet) secretFiles(ctx context.Context, namespace, name string, items []corev1.KeyToPath, files map[string][]byte) (string, error) {
	secret := &corev1.Secret{}
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret, client.UnsafeDisableDeepCopy); err != nil {
		return "", err
	}
	if len(items) == 0 {
		maps.Copy(files, secret.Data)
	}
	for _, item := range items {
		data, ok := secret.Data[item.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %q", name, item.Key)
		}
		files[item.Path] = data
	}
	return secret.ResourceVersion, nil
}

// writeFiles makes dir hold exactly files. Each file is replaced atomically (written next to
// dir, then renamed), so a process never reads half a file.
func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
			continue
		}
		tmp, err := os.CreateTemp(filepath.Dir(dir), ".tmp-")
		if err != nil {
			return err
		}
		_, err = tmp.Write(content)
		err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
	}
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
			case "status.hostIP":
				env[e.Name] = pod.Status.HostIP
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

func expand(s string, env map[string]string) string {
	for name, value := range env {
		s = strings.ReplaceAll(s, "$("+name+")", value)
	}
	return s
}

// Crash kills a pod's redis container with SIGKILL, as a crashing container. The pod stays,
// and the kubelet restarts the container after RestartDelay, as restartPolicy Always does.
func (k *Kubelet) Crash(namespace, pod string) error {
	k.mu.Lock()
	s := k.running[namespace+"/"+pod]
	k.mu.Unlock()
	if s == nil {
		return fmt.Errorf("no redis container for %s/%s", namespace, pod)
	}
	s.kill()
	return nil
}

// LoseData is the "lost PVC" fault: the pod's container is killed with SIGKILL and its data
// volume replaced by an empty one (everything in DataDir is removed). The pod stays, and the
// kubelet restarts the container after RestartDelay, same pod, same IP, on the empty volume.
func (k *Kubelet) LoseData(namespace, pod string) error {
	k.mu.Lock() // no restart before the data is gone
	defer k.mu.Unlock()
	s := k.running[namespace+"/"+pod]
	if s == nil {
		return fmt.Errorf("no redis container for %s/%s", namespace, pod)
	}
	s.kill()
	dir := k.DataDir(namespace, pod)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	k.logf("redispods: %s/%s lost its data", namespace, pod)
	return nil
}

// kill kills the process group with SIGKILL and waits for the process to end.
func (s *server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Processes returns the PIDs of every process of a pod's redis container (its process
// group: the start script, redis-server, anything they run), for a test to inspect.
func (k *Kubelet) Processes(namespace, pod string) []int {
	k.mu.Lock()
	s := k.running[namespace+"/"+pod]
	k.mu.Unlock()
	if s == nil {
		return nil
	}
	return proctable.Group(s.cmd.Process.Pid)
}

// DataDir is the host directory of a pod's data volume, mounted at /data in the pod.
func (k *Kubelet) DataDir(namespace, pod string) string {
	return filepath.Join(k.dataDir, namespace, pod)
}

// podDir holds a pod's ConfigMap volumes and its log, apart from its data (a pod name
// never starts with a dot).
func (k *Kubelet) podDir(namespace, pod string) string {
	return filepath.Join(k.dataDir, namespace, ".volumes", pod)
}

func (k *Kubelet) logPath(namespace, pod string) string {
	return filepath.Join(k.podDir(namespace, pod), "stdout.log")
}

// Log is what a pod's redis container wrote to stdout and stderr, every run appended, empty
// when there is none.
func (k *Kubelet) Log(namespace, pod string) string {
	b, _ := os.ReadFile(k.logPath(namespace, pod))
	return string(b)
}

// Addr is the ip:port a pod's redis-server listens on (once started), empty when the pod
// has no container.
func (k *Kubelet) Addr(namespace, pod string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.running[namespace+"/"+pod]; s != nil {
		return net.JoinHostPort(s.ip, strconv.Itoa(s.port))
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
	if s.cg != nil {
		s.cg.remove()
	}
	k.logf("redispods: stopped the redis container of %s", key)
}

// release removes Finalizer from a pod whose process has stopped, so its deletion completes.
func (k *Kubelet) release(ctx context.Context, pod *corev1.Pod) error {
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Finalizers = slices.DeleteFunc(pod.Finalizers, func(f string) bool { return f == Finalizer })
	if err := k.client.Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// StopAll stops every redis container.
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
	k.memcg.close()
}

// listenPort is the client port the start script makes redis-server listen on: 6379, or
// with NodePort external access REDIS_FIRST_PORT plus the pod's ordinal.
func listenPort(pod string, env map[string]string) int {
	first, err := strconv.Atoi(env["REDIS_FIRST_PORT"])
	if err != nil {
		return 6379
	}
	ordinal, _ := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	return first + ordinal
}
