package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// StepFigures is what one run of the step bench measured: for each step kind the operator
// took, how many and the longest, from the operator's "step done" log lines; and what the
// writer saw meanwhile.
type StepFigures struct {
	// Keys is how many keys were loaded before the writer started.
	Keys int
	// Phases are the user actions, in order, with the seconds each took to Ready.
	Phases []StepPhase
	// Count and Max are, by step kind, the number of steps and the longest in seconds.
	Count map[string]int
	Max   map[string]float64
	// Written is the writer's acknowledged keys, Failures its failed writes (each retried),
	// Outage its longest stretch of failing or blocked writes in seconds.
	Written, Failures int
	Outage            float64
}

// StepPhase is one user action of the step bench and how long the cluster took to be Ready
// with it.
type StepPhase struct {
	Name    string
	Seconds float64
}

const stepsNS = "steps"

// RunSteps runs one RedisCluster through what its users do to it, with keys loaded and a
// writer writing throughout: form 6 nodes, scale out to 10, scale in to 6, upgrade every
// pod, kill a master's process (the kubelet restarts it); then reads how long every step
// the operator took lasted.
func RunSteps(ctx context.Context, keys int, logf func(string, ...any)) (StepFigures, error) {
	f := StepFigures{Keys: keys}
	rb, err := startRedisBench(ctx)
	if err != nil {
		return f, err
	}
	defer rb.stop()
	c := rb.env.Client
	if err := namespace(ctx, c, stepsNS); err != nil {
		return f, err
	}
	rc := redistest.NewCluster(stepsNS, "steps", 6)
	key := client.ObjectKeyFromObject(rc)
	phase := func(name string, act func() error, nodes int) error {
		start := time.Now()
		if err := act(); err != nil {
			return err
		}
		if err := waitSettledAt(ctx, c, key, nodes); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		f.Phases = append(f.Phases, StepPhase{name, time.Since(start).Seconds()})
		logf("%s: Ready in %.1f s", name, time.Since(start).Seconds())
		return nil
	}
	if err := phase("form 6 nodes", func() error { return c.Create(ctx, rc) }, 6); err != nil {
		return f, err
	}
	pw, err := clusterPassword(ctx, c, rc)
	if err != nil {
		return f, err
	}
	if err := c.Get(ctx, key, rc); err != nil {
		return f, err
	}
	if err := loadKeys(ctx, rc.Status.Nodes[0].Instance, pw, keys); err != nil {
		return f, err
	}
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	patch := func(spec string) func() error {
		return func() error {
			return c.Patch(ctx, rc, client.RawPatch(types.MergePatchType, []byte(spec)))
		}
	}
	phases := []struct {
		name  string
		act   func() error
		nodes int
	}{
		{"scale out to 10 nodes", patch(`{"spec":{"replicas":10}}`), 10},
		{"scale in to 6 nodes", patch(`{"spec":{"replicas":6}}`), 6},
		{"upgrade every pod", patch(`{"spec":{"version":"7.2.4"}}`), 6},
		{"kill a master's process", func() error { return killMaster(ctx, c, rb.kubelet, key) }, 6},
	}
	for _, p := range phases {
		if err := phase(p.name, p.act, p.nodes); err != nil {
			w.Stop()
			return f, err
		}
	}
	written, outage := w.Stop()
	f.Written, f.Outage = written, outage.Seconds()
	f.Failures, _ = w.Failures()
	f.Count, f.Max, err = stepTimes(filepath.Join(rb.env.Cluster.Dir, "operator.log"))
	return f, err
}

// waitSettledAt waits up to 5 minutes until the cluster at key is Ready for its current
// generation with nodes nodes, every pod on the StatefulSet's update revision.
func waitSettledAt(ctx context.Context, c client.Client, key client.ObjectKey, nodes int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		rc := &redisv1alpha1.RedisCluster{}
		sts := &appsv1.StatefulSet{}
		if err := c.Get(ctx, key, rc); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(rc.Status.Conditions, "Ready")
		settled := isReady(rc) && ready.ObservedGeneration == rc.Generation && len(rc.Status.Nodes) == nodes
		if settled {
			// The operator replaces pods itself (OnDelete): every pod on the update revision.
			pods := &corev1.PodList{}
			if err := c.Get(ctx, key, sts); err != nil {
				return err
			}
			if err := c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": key.Name}); err != nil {
				return err
			}
			updated := 0
			for _, p := range pods.Items {
				if p.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision && p.DeletionTimestamp.IsZero() {
					updated++
				}
			}
			settled = updated == nodes
		}
		if settled {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not Ready with %d nodes on the update revision after 5 minutes (phase %s, %d nodes listed): %s", nodes, rc.Status.Phase, len(rc.Status.Nodes), rc.Status.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clusterPassword reads rc's generated password.
func clusterPassword(ctx context.Context, c client.Client, rc *redisv1alpha1.RedisCluster) (string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisPasswordSecretName(rc)}, s); err != nil {
		return "", err
	}
	return string(s.Data[resources.RedisPasswordKey]), nil
}

// loadKeys writes n keys of 100 bytes through a cluster client, 1,000 to a pipeline, so that
// slot moves carry data.
func loadKeys(ctx context.Context, addr, pw string, n int) error {
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Password: pw})
	defer func() { _ = cc.Close() }()
	value := strings.Repeat("v", 100)
	for from := 0; from < n; from += 1000 {
		_, err := cc.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := from; i < min(from+1000, n); i++ {
				p.Set(ctx, "load:"+strconv.Itoa(i), value, 0)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("while loading keys: %w", err)
		}
	}
	return nil
}

// killMaster kills the process of the first master the status lists with SIGKILL; the
// stand-in kubelet restarts it, as a container runtime would.
func killMaster(ctx context.Context, c client.Client, kubelet *redispods.Kubelet, key client.ObjectKey) error {
	rc, _, pids, err := masterProcesses(ctx, c, kubelet, key)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// The status says Ready until the operator's next look sees the crash.
	deadline := time.Now().Add(2 * time.Minute)
	for isReady(rc) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still Ready 2 minutes after its master was killed", key.Name)
		}
		time.Sleep(100 * time.Millisecond)
		if err := c.Get(ctx, key, rc); err != nil {
			return err
		}
	}
	return nil
}

// stepTimes reads the operator's "step done" lines: the number of steps and the longest,
// by kind.
func stepTimes(logPath string) (count map[string]int, longest map[string]float64, err error) {
	file, err := os.Open(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = file.Close() }()
	count, longest = map[string]int{}, map[string]float64{}
	scan := bufio.NewScanner(file)
	scan.Buffer(make([]byte, 1<<20), 1<<20)
	for scan.Scan() {
		line := scan.Bytes()
		if !strings.Contains(string(line), `"step done"`) {
			continue
		}
		var entry struct {
			Kind    string  `json:"kind"`
			Seconds float64 `json:"seconds"`
		}
		if err := json.Unmarshal(line, &entry); err != nil || entry.Kind == "" {
			continue
		}
		count[entry.Kind]++
		longest[entry.Kind] = max(longest[entry.Kind], entry.Seconds)
	}
	return count, longest, scan.Err()
}

// StepTable formats the step figures as Markdown: the phases, then every step kind.
func StepTable(f StepFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d keys loaded; the writer wrote %d more, %d writes failed (each retried), longest outage %.2f s\n\n", f.Keys, f.Written, f.Failures, f.Outage)
	b.WriteString("| user action | to Ready |\n|---|---|\n")
	for _, p := range f.Phases {
		fmt.Fprintf(&b, "| %s | %.1f s |\n", p.Name, p.Seconds)
	}
	b.WriteString("\n| step kind | steps | longest |\n|---|---|---|\n")
	kinds := make([]string, 0, len(f.Count))
	for k := range f.Count {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "| %s | %d | %.2f s |\n", k, f.Count[k], f.Max[k])
	}
	return b.String()
}
