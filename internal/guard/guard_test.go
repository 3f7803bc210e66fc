package guard

import (
	"context"
	"errors"
	"slices"
	"testing"

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
