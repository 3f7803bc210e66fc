package guard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestCheck: the state follows the API server's answer to the dry-run probe, and the probe
// is a dry run of a service-account-token Secret, so nothing is ever stored.
func TestCheck(t *testing.T) {
	refusal := errors.New(`admission webhook denied: ValidatingAdmissionPolicy 'middleware-operator-guard' denied request: middleware-operator-guard: the operator may not create a Secret of type kubernetes.io/service-account-token`)
	for name, tc := range map[string]struct {
		namespace string
		answer    error
		want      State
	}{
		"refused by the guard":   {namespace: "ops", answer: refusal, want: Active},
		"accepted":               {namespace: "ops", answer: nil, want: Missing},
		"refused by RBAC":        {namespace: "ops", answer: errors.New(`secrets is forbidden: User "x" cannot create resource "secrets"`), want: Unknown},
		"no namespace to ask in": {namespace: "", want: Unknown},
		"API server away":        {namespace: "ops", answer: context.DeadlineExceeded, want: Unknown},
	} {
		t.Run(name, func(t *testing.T) {
			var sent *corev1.Secret
			var dryRun []string
			s := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					sent = obj.(*corev1.Secret).DeepCopy() //nolint:forcetypeassert // the probe is a Secret
					o := &client.CreateOptions{}
					o.ApplyOptions(opts)
					dryRun = o.DryRun
					return tc.answer
				},
			}).Build()
			got, err := Check(t.Context(), c, tc.namespace)
			if got != tc.want {
				t.Fatalf("Check = %s (%v), want %s", got, err, tc.want)
			}
			if (got == Unknown) != (err != nil) {
				t.Errorf("Check = %s with error %v: an error goes with unknown only", got, err)
			}
			if tc.namespace == "" {
				return
			}
			if sent == nil || sent.Type != corev1.SecretTypeServiceAccountToken || sent.Namespace != tc.namespace ||
				sent.Annotations[corev1.ServiceAccountNameKey] == "" {
				t.Errorf("the probe was %+v, want a service-account-token Secret in %s", sent, tc.namespace)
			}
			if !slices.Equal(dryRun, []string{metav1.DryRunAll}) {
				t.Errorf("the probe's dryRun = %v, want [All]: it must never store a token Secret", dryRun)
			}
		})
	}
}

// TestReporterSeesALateGuardSoon: a guard the API server enforces only after the operator's
// first check (applied with the operator, as the release's manifests are) is reported active
// after RecheckFirst, not after Interval (an hour here).
func TestReporterSeesALateGuardSoon(t *testing.T) {
	refusal := errors.New(`ValidatingAdmissionPolicy 'middleware-operator-guard' denied request: ` + Marker)
	var calls atomic.Int32
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			if calls.Add(1) == 1 {
				return nil // not enforced yet: missing
			}
			return refusal
		},
	}).Build()
	lines := make(chan string, 10)
	log := funcr.New(func(_, args string) { lines <- args }, funcr.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	go func() { _ = (&Reporter{Client: c, Namespace: "ops", Interval: time.Hour, Log: log}).Start(ctx) }()
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, "admission guard active") {
				if d := time.Since(start); d > RecheckFirst+2*time.Second {
					t.Errorf("the guard reported active after %s, want about %s", d, RecheckFirst)
				}
				return
			}
		case <-time.After(RecheckFirst + 5*time.Second):
			t.Fatalf("no 'admission guard active' within %s of a guard enforced after the first check (%d checks)", RecheckFirst+5*time.Second, calls.Load())
		}
	}
}
