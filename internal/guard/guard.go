// Package guard checks, with the operator's own credentials, whether the admission guard of
// config/guard holds for its token, and reports it in the log and a metric.
package guard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
)

// Marker starts every message of the admission guard's policies (config/guard): a
// refusal that carries it came from the guard.
const Marker = "middleware-operator-guard"

// State is what the operator knows of the admission guard on its own token.
type State int

// The states of the guard, as the metric middleware_operator_admission_guard reports them.
const (
	// Unknown: the check could not tell (no namespace to ask in, or the API server
	// refused the dry run for another reason).
	Unknown State = -1
	// Missing: the API server let the operator's token create (in a dry run) a
	// service-account-token Secret.
	Missing State = 0
	// Active: the guard refused it.
	Active State = 1
)

func (s State) String() string {
	switch s {
	case Active:
		return "active"
	case Missing:
		return "missing"
	}
	return "unknown"
}

// probe is the request the guard must refuse: a token Secret for the namespace's
// default ServiceAccount, which RBAC alone lets the operator create.
func probe(namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "middleware-operator-guard-probe",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
}

// Check asks the API server, with the operator's own credentials and as a dry run
// (nothing is stored), to create a service-account-token Secret in namespace. The guard is
// active when the refusal carries Marker, missing when the dry run succeeds.
func Check(ctx context.Context, c client.Writer, namespace string) (State, error) {
	if namespace == "" {
		return Unknown, fmt.Errorf("no namespace to check the admission guard in (set $POD_NAMESPACE)")
	}
	err := c.Create(ctx, probe(namespace), client.DryRunAll)
	switch {
	case err == nil:
		return Missing, nil
	case strings.Contains(err.Error(), Marker):
		return Active, nil
	}
	return Unknown, fmt.Errorf("while checking the admission guard with a dry-run Secret in namespace %s: %w", namespace, err)
}

// Reporter checks the admission guard when the operator starts and every Interval
// after (sooner while it is not active: RecheckFirst), and reports it in the log (a line on each change) and in the metric
// middleware_operator_admission_guard. It runs on every replica, leader or not.
type Reporter struct {
	Client    client.Writer
	Namespace string
	Interval  time.Duration
	Log       logr.Logger
}

// NeedLeaderElection is false: every replica reports what its own token can do.
func (g *Reporter) NeedLeaderElection() bool { return false }

// RecheckFirst is how soon a Reporter looks again while the guard is not active: a guard
// applied just after the operator started (kubectl apply of the release's install.yaml and
// guard.yaml together, whose policy the API server enforces a moment later) shows within
// seconds, not at the next Interval. The wait doubles up to Interval while it stays so.
const RecheckFirst = 5 * time.Second

// Start checks until ctx ends.
func (g *Reporter) Start(ctx context.Context) error {
	last := State(-2)
	recheck := RecheckFirst
	for {
		state, err := Check(ctx, g.Client, g.Namespace)
		metrics.AdmissionGuard.WithLabelValues().Set(float64(state))
		if state != last {
			switch state {
			case Active:
				g.Log.Info("admission guard active: the API server refuses this operator's token a service-account-token Secret, privileged or host pods and writes outside its resources' namespaces")
			case Missing:
				g.Log.Info("admission guard MISSING: this operator's token can create service-account-token Secrets and pods as any ServiceAccount wherever its RBAC reaches; a cluster admin applies it with: kubectl apply --server-side -k config/guard (docs/security.md)")
			default:
				g.Log.Info("admission guard unknown", "error", err.Error())
			}
			last = state
		}
		wait := g.Interval
		if state != Active && recheck < g.Interval {
			wait, recheck = recheck, 2*recheck
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}
