package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// AdmitRandom creates n objects drawn by gen (a random source seeded from the clock, with
// salt) in a new namespace, after setup (if any) prepared it, and returns the keys of those
// the API server accepted and how many it rejected; a rejection must name a spec or metadata
// field. The namespace is capped at pods pods: valid sizes go up to 1000, and a few such
// objects would fill the shared cluster's nodes and starve every other test of the package
// (a CI run saw pods of parallel tests stay Pending for minutes). The properties are about
// admission and status, not pods.
func (e *Env) AdmitRandom(t *testing.T, n int, salt uint64, pods int, setup func(ns string), gen func(r *rand.Rand, ns string, i int) client.Object) (keys []client.ObjectKey, rejected int) {
	t.Helper()
	ns := e.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}},
	}
	if err := e.Client.Create(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(ns)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), salt)) //nolint:gosec // test data, not secrets
	for i := range n {
		obj := gen(r, ns, i)
		err := e.Client.Create(t.Context(), obj)
		switch {
		case apierrors.IsInvalid(err):
			rejected++
			if !strings.Contains(err.Error(), "spec.") && !strings.Contains(err.Error(), "metadata.") {
				t.Errorf("%s rejected without naming a field: %v", obj.GetName(), err)
			}
		case err != nil:
			t.Fatalf("%s: %v", obj.GetName(), err)
		default:
			keys = append(keys, client.ObjectKeyFromObject(obj))
		}
	}
	return keys, rejected
}

// ReconcilePanics is controller-runtime's count of panicked reconciles of a controller.
func ReconcilePanics(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_panics_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// RandomSpecs is the property every kind's random-spec test checks: each drawn spec, valid or
// not, is either rejected at admission naming a field, or reconciled to a status of its
// generation with a Degraded condition of that generation, saying whether (and why)
// something was refused; no reconcile panics.
type RandomSpecs[T client.Object] struct {
	Controller string // the controller's name, for its panic count
	N          int    // how many specs to draw
	Salt       uint64 // mixed into the clock's seed
	Pods       int    // the namespace's pod quota
	Setup      func(ns string)
	Draw       func(r *rand.Rand, ns string, i int) T
	New        func() T
	// Status is an object's observed generation and conditions.
	Status func(T) (int64, []metav1.Condition)
	// Exempt says an accepted object is owed no status (for example, paused).
	Exempt func(T) bool
	// Check checks one accepted object once its status is of its generation.
	Check func(t *testing.T, obj T)
}

// Run draws the specs in a new namespace of e and checks the property.
func (s RandomSpecs[T]) Run(t *testing.T, e *Env) {
	t.Helper()
	panicsBefore := ReconcilePanics(t, s.Controller)
	keys, rejected := e.AdmitRandom(t, s.N, s.Salt, s.Pods, s.Setup, func(r *rand.Rand, ns string, i int) client.Object { return s.Draw(r, ns, i) })
	degraded := 0
	for _, key := range keys {
		obj := s.New()
		Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			if err := e.Client.Get(ctx, key, obj); err != nil {
				return false, err.Error()
			}
			if s.Exempt != nil && s.Exempt(obj) {
				return true, ""
			}
			observed, conds := s.Status(obj)
			d := meta.FindStatusCondition(conds, "Degraded")
			return observed == obj.GetGeneration() && d != nil && d.ObservedGeneration == obj.GetGeneration(),
				fmt.Sprintf("%s: observedGeneration %d of %d, Degraded %+v (object %+v)", key.Name, observed, obj.GetGeneration(), d, obj)
		})
		if _, conds := s.Status(obj); meta.IsStatusConditionTrue(conds, "Degraded") {
			degraded++
			d := meta.FindStatusCondition(conds, "Degraded")
			t.Logf("%s accepted but Degraded (%s): %s", key.Name, d.Reason, d.Message)
		}
		if s.Check != nil {
			s.Check(t, obj)
		}
	}
	if panics := ReconcilePanics(t, s.Controller) - panicsBefore; panics > 0 {
		t.Errorf("%.0f reconciles panicked", panics)
	}
	t.Logf("%d random specs: %d rejected at admission, %d accepted (%d of them Degraded with a reason)", s.N, rejected, len(keys), degraded)
	if rejected == 0 || len(keys) == 0 {
		t.Errorf("the generator drew only one kind of spec (%d rejected, %d accepted): the property was not exercised", rejected, len(keys))
	}
}

// badChars are characters no image reference, Kubernetes name or environment variable
// name may hold: whitespace, control characters (NUL, ESC, DEL), shell and quoting
// characters, '=' and non-ASCII letters and spaces.
var badChars = []string{" ", "\t", "\n", "\r", "\x00", "\x1b", "\x7f", "!", "\"", "$", "\\", "=", "*", ",", ";", "é", "\u00a0", "\u3000"}

// Invalid draws a value that a field taking valid-like values must refuse: valid with one
// character of badChars inserted at a random place (start, middle or end), or, for kind
// "name", a form the field's grammar refuses as a whole (a leading or final '-', capitals,
// '_'); for kind "env" the empty name.
func Invalid(r *rand.Rand, kind, valid string) string {
	if kind == "name" && r.IntN(4) == 0 {
		return []string{"-" + valid, valid + "-", strings.ToUpper(valid[:1]) + valid[1:], valid + "_x"}[r.IntN(4)]
	}
	if kind == "env" {
		// corev1.EnvVar's name has no maximum length, so no CEL rule on it fits the API
		// server's cost budget: the CRDs refuse only an empty one (Kubernetes checks the rest
		// when it creates the pods).
		return ""
	}
	at := r.IntN(len(valid) + 1)
	return valid[:at] + badChars[r.IntN(len(badChars))] + valid[at:]
}

// StringField is a string field that becomes an image, a name or an environment variable
// name: Set writes v into a valid object, Path is how the API server names it, Kind is
// "image", "name" or "env" (see Invalid) and Valid a value it accepts.
type StringField[T client.Object] struct {
	Path, Kind, Valid string
	Set               func(obj T, v string)
}

// RejectInvalidStrings creates, per field, n objects from valid (a valid object) with the
// field set to a random invalid value (Invalid), as a dry run: the API server must refuse
// every one naming the field, and accept the valid value (so the refusals are the field's).
func (e *Env) RejectInvalidStrings(t *testing.T, n int, salt uint64, valid func(ns string) client.Object, fields []StringField[client.Object]) {
	t.Helper()
	ns := e.Namespace(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), salt)) //nolint:gosec // test data, not secrets
	for _, f := range fields {
		obj := valid(ns)
		f.Set(obj, f.Valid)
		if err := e.Client.Create(t.Context(), obj, client.DryRunAll); err != nil {
			t.Errorf("%s = %q: %v, want it accepted", f.Path, f.Valid, err)
			continue
		}
		for range n {
			v := Invalid(r, f.Kind, f.Valid)
			obj := valid(ns)
			f.Set(obj, v)
			err := e.Client.Create(t.Context(), obj, client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), f.Path) {
				t.Errorf("%s = %q: %v; want Invalid naming %s", f.Path, v, err, f.Path)
			}
		}
	}
}
