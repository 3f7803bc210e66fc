package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// WriteCost is what n writes of one kind cost the API server, on a cluster doing nothing
// else: its CPU seconds and the wall time at the bench's concurrency.
type WriteCost struct {
	What             string
	APIServerSeconds float64
	WallSeconds      float64
}

// WriteCosts measures, on one fresh cluster with no operator, the kube-apiserver's CPU for
// n of each write an AppService update wave is made of: the user's merge patch of an
// AppService without a status and with the status the operator writes (n of each, then
// again with a watcher of AppServices), and a Deployment's image change as a strategic
// merge patch (the floor's) and as an update of the whole object (the operator's).
// Deployments have 0 replicas: no rollout runs. The kinds run in turn, rounds times.
// With profiles set, the kube-apiserver's CPU profile of the first 3 s of each kind's first
// round is written there (apiserver-cost-*.pprof).
func WriteCosts(ctx context.Context, n, rounds int, profiles string) ([]WriteCost, error) {
	const ns = "costs"
	env, c, _, err := freshCluster(ctx, n, ns)
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	cached, stopWatching, err := watching(ctx, env, ns)
	if err != nil {
		return nil, err
	}
	defer stopWatching()
	cpu := newCPUMeter(env.Cluster.PIDs())
	var out []WriteCost
	profiled := map[string]bool{}
	measure := func(what string, write func(ctx context.Context, i int) error) error {
		dir := profiles
		if profiled[what] {
			dir = ""
		}
		profiled[what] = true
		done := apiServerProfile(ctx, env.Cluster.Config, 3, dir, "apiserver-cost-"+strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(what))
		cpu.Reset()
		start := time.Now()
		if err := parallel(ctx, n, write); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, WriteCost{What: what, APIServerSeconds: cpu.Reset()["kube-apiserver"], WallSeconds: time.Since(start).Seconds()})
		return done()
	}
	withStatus := func(i int) *appsv1api.AppService { return app(ns, n+i, image1) } // the operator's status: see operatorStatus
	if err := parallel(ctx, n, func(ctx context.Context, i int) error {
		dep, _ := floorChildren(ns, i, image1)
		dep.Spec.Replicas = ptr.To[int32](0)
		if err := c.Create(ctx, dep); err != nil {
			return err
		}
		if err := c.Create(ctx, app(ns, i, image1)); err != nil {
			return err
		}
		if err := c.Create(ctx, withStatus(i)); err != nil {
			return err
		}
		return c.Status().Patch(ctx, withStatus(i), client.RawPatch("application/merge-patch+json", operatorStatus()))
	}); err != nil {
		return nil, err
	}
	image := func(round int) string { return fmt.Sprintf("nginx:1.%d", 30+round) }
	appServiceWrites := func(round int, suffix string) []write {
		return []write{
			{"AppService merge patch, no status" + suffix, func(ctx context.Context, i int) error { return patchImage(ctx, c, ns, i, image(round)) }},
			{"AppService merge patch, the operator's status" + suffix, func(ctx context.Context, i int) error {
				return patchImage(ctx, c, ns, n+i, image(round))
			}},
		}
	}
	deploymentWrites := func(round int) []write {
		return []write{
			{"Deployment strategic merge patch", func(ctx context.Context, i int) error {
				dep, _ := floorChildren(ns, i, image(round))
				return c.Patch(ctx, dep, client.RawPatch("application/strategic-merge-patch+json",
					fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, dep.Spec.Template.Spec.Containers[0].Name, image(round))))
			}},
			{"Deployment update of the cached object", func(ctx context.Context, i int) error {
				dep, _ := floorChildren(ns, i, image(round))
				return retry.RetryOnConflict(retry.DefaultRetry, func() error {
					live := &appsv1.Deployment{}
					if err := cached.Get(ctx, client.ObjectKeyFromObject(dep), live); err != nil {
						return err
					}
					live.Spec.Template.Spec.Containers[0].Image = image(round)
					return c.Update(ctx, live)
				})
			}},
		}
	}
	for round := range rounds {
		for _, w := range append(appServiceWrites(round, ""), deploymentWrites(round)...) {
			if err := measure(w.what, w.write); err != nil {
				return nil, err
			}
		}
	}
	// An AppService watcher, as the operator (and the bench's waits) have.
	if err := cached.Get(ctx, client.ObjectKeyFromObject(app(ns, 0, image1)), &appsv1api.AppService{}); err != nil {
		return nil, err
	}
	for round := range rounds {
		for _, w := range appServiceWrites(rounds+round, ", one watcher") {
			if err := measure(w.what, w.write); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// write is one kind of write of WriteCosts, for the i-th object.
type write struct {
	what  string
	write func(ctx context.Context, i int) error
}

// operatorStatus is a status as the operator writes it for a settled one-replica
// AppService, as a merge patch.
func operatorStatus() []byte {
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(typ, status, reason, message string) string {
		return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":%q,"lastTransitionTime":%q,"observedGeneration":2}`, typ, status, reason, message, now)
	}
	return fmt.Appendf(nil, `{"status":{"observedGeneration":2,"replicas":1,"readyReplicas":1,"availableReplicas":1,"updatedReplicas":1,"ready":"1/1","selector":"app.kubernetes.io/instance=app,app.kubernetes.io/name=AppService","conditions":[%s,%s,%s]}}`,
		cond(appsv1api.ConditionAvailable, "True", "MinimumReplicasAvailable", "1 of 1 replicas available"),
		cond(appsv1api.ConditionProgressing, "False", "RolloutComplete", "the Deployment runs the current spec"),
		cond(appsv1api.ConditionDegraded, "False", "Reconciled", "all children match the spec"))
}
