package apps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// PodCheckAfter is how long a rollout goes without progress, with pods not ready, before
// the AppService's pods are read to say why: a container that cannot start (an image that
// cannot be pulled, a crash loop) then shows in the status and a Warning within about this
// long, not only at the Deployment's progress deadline (10 minutes by default), which is all
// the Deployment itself reports. The operator keeps no pods in memory; a check is one LIST
// of the AppService's pods, made only while its rollout stands still.
const PodCheckAfter = 30 * time.Second

// PodChecksPerSecond bounds the pod LISTs of the whole operator: a LIST with a label
// selector makes the API server scan every pod of the namespace, and in a fleet-wide
// rollout on a saturated cluster (tests/bench, 5,000 AppServices) thousands of rollouts
// stand still with pods Pending at once: unbounded, their checks every PodCheckAfter kept
// the statuses from settling for over 20 minutes. A lone failing rollout is still seen
// within about PodCheckAfter; in a fleet-wide stall each is seen in turn.
const PodChecksPerSecond = 1

// PodCheckMaxInterval bounds the wait between two looks at a rollout that stands still:
// the looks come after it has stood still for PodCheckAfter, then twice, four times... as
// long, so an AppService left with an image that cannot be pulled costs a pod LIST every
// 5 minutes, not every 30 s, for as long as nobody fixes it.
const PodCheckMaxInterval = 5 * time.Minute

// podCheck says whether the pods of d's rollout are read now (due) and, either way, how
// long until the next look (0: none needed, the rollout is over): once d has reported no
// progress (its Progressing condition's lastUpdateTime) for after while some of its pods
// are not ready, and again each time the stillness has doubled, at least after and at most
// PodCheckMaxInterval apart, while that lasts. The steps of a rollout do not reach the
// reconcile (see deploymentNews), so a rollout under way is looked at again as well even
// while nothing is to be read.
func podCheck(d *appsv1.Deployment, size int32, now time.Time, after time.Duration) (due bool, next time.Duration) {
	if d == nil || !rollingOut(d, size) {
		return false, 0
	}
	last := d.CreationTimestamp.Time
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.LastUpdateTime.After(last) {
			last = c.LastUpdateTime.Time
		}
	}
	still := now.Sub(last)
	if still < after {
		return false, after - still
	}
	next = min(still, max(after, PodCheckMaxInterval))
	// Every pod ready: the Deployment controller is behind, no pod has anything to say.
	return d.Status.ReadyReplicas < d.Status.Replicas || d.Status.Replicas == 0, next
}

// podFailureHints are the reasons a container waits that no wait ends, each with what to
// fix; the kubelet reports them in the pod's container statuses.
var podFailureHints = map[string]string{
	"ErrImagePull":               "check spec.image and the registry's credentials",
	"ImagePullBackOff":           "check spec.image and the registry's credentials",
	"InvalidImageName":           "spec.image is not a valid image reference",
	"ErrImageNeverPull":          "the image is not on the node and the pull policy is Never",
	"CrashLoopBackOff":           "the container keeps exiting: see its logs (kubectl logs --previous)",
	"CreateContainerConfigError": "the container's configuration names something missing (a Secret or ConfigMap key)",
	"CreateContainerError":       "the runtime could not create the container",
	"RunContainerError":          "the runtime could not start the container",
}

// podsFailing is the first (by pod name) container of pods waiting for one of the reasons
// in podFailureHints, as a rollout problem named by that reason; zero when there is none.
func podsFailing(pods []corev1.Pod) rolloutProblem {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			w := c.State.Waiting
			if w == nil {
				continue
			}
			if hint, ok := podFailureHints[w.Reason]; ok {
				msg := fmt.Sprintf("pod %s, container %s: %s", p.Name, c.Name, w.Reason)
				if w.Message != "" {
					msg += ": " + w.Message
				}
				return rolloutProblem{w.Reason, msg + " (" + hint + ")"}
			}
		}
	}
	return rolloutProblem{}
}

// failingPods reads the AppService's pods through the API reader when podCheck says the
// rollout has stood still long enough and the operator's pod checks allow one more (see
// PodChecksPerSecond), and returns what stops them with the time until the next look.
func (r *AppServiceReconciler) failingPods(ctx context.Context, app *appsv1api.AppService, d *appsv1.Deployment) (rolloutProblem, time.Duration) {
	now := time.Now()
	key := types.NamespacedName{Namespace: app.Namespace, Name: app.Name}
	due, next := podCheck(d, resources.AppServiceSize(app), now, r.podCheckAfter())
	if !due {
		r.podChecks.Drop(key)
		return rolloutProblem{}, next
	}
	if mine, turn := r.podChecks.Take(key, now); !mine {
		// Another rollout's check holds the bound: this one's comes at its turn, not a
		// doubled stillness later (which, for a check due after seconds, came after the
		// AppService had stood still for many times that).
		return rolloutProblem{}, min(turn, next)
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(app.Namespace),
		client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.AppServiceKind, app.Name))); err != nil {
		// A diagnosis, not the AppService's state: tried again at the next look.
		logf.FromContext(ctx).V(1).Info("pods of a rollout that stands still not read", "error", err.Error())
		return rolloutProblem{}, next
	}
	return podsFailing(pods.Items), next
}

func (r *AppServiceReconciler) podCheckAfter() time.Duration {
	if r.PodCheckAfter > 0 {
		return r.PodCheckAfter
	}
	return PodCheckAfter
}

// podCheckTurns is the operator-wide bound on pod LISTs (PodChecksPerSecond), in turns: a
// check the bound defers keeps the moment the bound reserved for it, so checks due at once
// are made one after another at the bound's pace, each at its own turn.
type podCheckTurns struct {
	mu      sync.Mutex
	limiter *rate.Limiter
	turns   map[types.NamespacedName]time.Time
}

// newPodChecks is the operator-wide bound on pod LISTs (PodChecksPerSecond).
func newPodChecks() *podCheckTurns {
	return &podCheckTurns{limiter: rate.NewLimiter(PodChecksPerSecond, PodChecksPerSecond), turns: map[types.NamespacedName]time.Time{}}
}

// Take says whether key's check is made now; when not, how long until its turn, which is
// held for key until it comes. Nil bounds nothing.
func (c *podCheckTurns) Take(key types.NamespacedName, now time.Time) (bool, time.Duration) {
	if c == nil {
		return true, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if turn, held := c.turns[key]; held {
		if now.Before(turn) {
			return false, turn.Sub(now)
		}
		delete(c.turns, key)
		return true, 0
	}
	wait := c.limiter.ReserveN(now, 1).DelayFrom(now)
	if wait == 0 {
		return true, 0
	}
	c.turns[key] = now.Add(wait)
	return false, wait
}

// Drop forgets key's turn: its rollout no longer stands still, or it is gone.
func (c *podCheckTurns) Drop(key types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.turns, key)
}
