package bench

import (
	"context"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// settlePoll is how often traceSettle looks at the watched Deployments and AppServices.
const settlePoll = 250 * time.Millisecond

// SettleTrace is, for the operator's update wave, when each AppService's Deployment was
// first seen rolled out (the new image, every replica available) and when the AppService's
// status was first seen settled on it: the operator's own part of "every status settled",
// apart from how fast the cluster rolled the Deployments out.
type SettleTrace struct {
	// RolledOut is when the last Deployment was seen rolled out, seconds after the wave's
	// start: the floor's measure, taken on the operator's own cluster.
	RolledOut float64 `json:"rolledOutSeconds"`
	// LagP50, LagP99 and LagMax are the seconds from a Deployment seen rolled out to its
	// AppService seen settled, over every AppService (0 when the status came first, within
	// a poll); Over1s counts the AppServices whose lag passed one second.
	LagP50 float64 `json:"lagP50Seconds"`
	LagP99 float64 `json:"lagP99Seconds"`
	LagMax float64 `json:"lagMaxSeconds"`
	Over1s int     `json:"lagOver1s"`
}

// traceSettle polls c (a cache) every settlePoll from start until the returned function is
// called, which returns the trace of the n AppServices of ns updated to image.
func traceSettle(ctx context.Context, c client.Reader, ns, image string, start time.Time) func() SettleTrace {
	rolled, settled := map[string]float64{}, map[string]float64{}
	stop := pollInBackground(ctx, settlePoll, func(ctx context.Context) bool {
		now := time.Since(start).Seconds()
		deps := &appsv1.DeploymentList{}
		if err := c.List(ctx, deps, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err == nil {
			for _, d := range deps.Items {
				if _, seen := rolled[d.Name]; !seen && rolledOut(&d, image) {
					rolled[d.Name] = now
				}
			}
		}
		apps := &appsv1api.AppServiceList{}
		if err := c.List(ctx, apps, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err == nil {
			for _, a := range apps.Items {
				if _, seen := settled[a.Name]; !seen && a.Spec.Image == image && settledStatus(&a) {
					settled[a.Name] = now
				}
			}
		}
		return false
	})
	return func() SettleTrace {
		stop()
		return settleTraceOf(rolled, settled)
	}
}

// pollInBackground calls look every period on its own goroutine until look returns true or
// the returned function is called; that function returns once look is no longer running.
func pollInBackground(ctx context.Context, period time.Duration, look func(context.Context) bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil && !look(ctx) {
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// settleTraceOf computes the trace from the times each Deployment was seen rolled out and
// each AppService (of the same name) seen settled.
func settleTraceOf(rolled, settled map[string]float64) SettleTrace {
	var out SettleTrace
	var lags []float64
	for name, r := range rolled {
		out.RolledOut = max(out.RolledOut, r)
		s, ok := settled[name]
		if !ok {
			continue
		}
		lag := max(s-r, 0)
		lags = append(lags, lag)
		if lag > 1 {
			out.Over1s++
		}
	}
	if len(lags) > 0 {
		out.LagP50, out.LagP99, out.LagMax = percentile(lags, 50), percentile(lags, 99), slices.Max(lags)
	}
	return out
}

// rolledOut reports whether d has rolled out image as `kubectl rollout status` sees it: its
// controller observed its spec, every replica runs the new template and is available, and
// no pod of an older one is left.
func rolledOut(d *appsv1.Deployment, image string) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
		d.Status.UpdatedReplicas == want && d.Status.Replicas == want && d.Status.AvailableReplicas == want
}

// settledStatus reports whether a's status describes its spec, Available and not Progressing.
func settledStatus(a *appsv1api.AppService) bool {
	return a.Status.ObservedGeneration == a.Generation && meta.IsStatusConditionTrue(a.Status.Conditions, "Available") &&
		meta.IsStatusConditionFalse(a.Status.Conditions, "Progressing")
}
