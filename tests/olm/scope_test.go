package olm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// ownNamespace is where TestInstallModesScopeTheOperator installs the operator for itself
// alone (OwnNamespace); allNamespaces where it then installs it for every namespace.
const (
	ownNamespace  = "mwo-own"
	allNamespaces = "mwo-all"
	// elsewhereSecret is a Secret of otherNamespace that no resource names.
	elsewhereSecret = "bank-credentials"
)

// TestInstallModesScopeTheOperator installs the current bundle through OLM twice on one
// cluster, with the admission guard of config/guard applied first: in both modes the
// operator's log reports it active and the examples still reconcile. OwnNamespace first: the operator reconciles the CSV's examples (all three kinds)
// in its namespace with the RBAC OLM granted from the CSV's permissions, leaves an
// AppService in another namespace alone, and its ServiceAccount's token is Forbidden from
// reading or listing Secrets outside its namespace (requests with the real token, and a
// SubjectAccessReview for the ServiceAccount). Then, uninstalled and installed again in
// AllNamespaces mode, the same bundle reconciles that other namespace's AppService: OLM
// grants the permissions cluster-wide only there (docs/security.md).
func TestInstallModesScopeTheOperator(t *testing.T) {
	ph := newPhase(t)
	f := &flow{t: t, logDir: t.TempDir(), ns: ownNamespace, targets: []string{ownNamespace}, appsNS: ownNamespace}
	f.oldVersion, f.newVersion = bundleVersions(t)
	f.startCluster(1)
	f.installOLM()
	f.buildOperator()
	port := testenv.FreePorts(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "catalog")
	writeCatalog(t, dir, f.newVersion) // the current bundle alone: installed, not upgraded to
	opm := f.serveCatalog("opm", dir, port)
	f.createCatalogSource(port, opm)
	if err := f.cl.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: otherNamespace, Name: elsewhereSecret},
		StringData: map[string]string{"password": "not the operator's"}}); err != nil {
		t.Fatal(err)
	}
	ph.done("local cluster, OLM and the catalog of " + csvName(f.newVersion) + " ready")

	// The admission guard, as docs/installation.md tells an admin to apply it after OLM.
	if err := testenv.Apply(t.Context(), f.cl, []string{testenv.GuardFile}); err != nil {
		t.Fatal(err)
	}
	f.subscribe()
	f.waitInstalled(f.newVersion, "")
	crs := f.createExamples()
	operator := f.runOperator("operator-own")
	f.waitGuardReported(operator, "operator-own")
	f.waitReconciled(crs, operator)
	f.checkOutsideUntouched()
	ph.done("OwnNamespace: the examples reconciled in " + ownNamespace + ", the AppService of " + otherNamespace + " untouched")
	f.checkSecretAccess(true)
	ph.done("OwnNamespace: the operator's token is Forbidden from the Secrets of " + otherNamespace)

	operator.Stop(10 * time.Second)
	f.uninstall() // the CatalogSource too
	f.createCatalogSource(port, opm)
	f.ns, f.targets, f.appsNS = allNamespaces, nil, otherNamespace
	if err := f.cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: allNamespaces}}); err != nil {
		t.Fatal(err)
	}
	if err := f.cluster.WaitForDefaultServiceAccount(t.Context(), allNamespaces); err != nil {
		t.Fatal(err)
	}
	f.subscribe()
	f.waitInstalled(f.newVersion, "")
	operator = f.runOperator("operator-all")
	f.waitGuardReported(operator, "operator-all")
	outsider := &unstructured.Unstructured{}
	outsider.SetGroupVersionKind(appServiceGVK)
	outsider.SetNamespace(otherNamespace)
	outsider.SetName("outsider")
	f.waitReconciled([]*unstructured.Unstructured{outsider}, operator)
	f.checkSecretAccess(false)
	ph.done("AllNamespaces: the AppService of " + otherNamespace + " reconciled, Secrets readable everywhere")
}

// waitGuardReported waits for the operator's log to say the admission guard holds for its
// token (the start-up check of internal/operator.GuardReporter).
func (f *flow) waitGuardReported(operator *localcluster.Process, name string) {
	eventually(f.t, time.Minute, "the operator's log reports the admission guard active", func(context.Context) (bool, string) {
		data, err := os.ReadFile(filepath.Join(f.logDir, name+".log"))
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(data), "admission guard active"), "no 'admission guard active' in " + name + ".log"
	}, operator)
}

// checkSecretAccess checks what the operator's ServiceAccount token (the one runOperator
// used) may do with the Secrets of otherNamespace: with scoped, get and list are
// Forbidden and a SubjectAccessReview for the ServiceAccount denies them; without, the
// token reads the Secret (AllNamespaces). Its own namespace's Secrets are readable either way.
func (f *flow) checkSecretAccess(scoped bool) {
	t := f.t
	ctx := t.Context()
	cfg := rest.AnonymousClientConfig(f.cluster.Config)
	cfg.BearerToken = f.token
	as, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := f.operatorPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	user := fmt.Sprintf("system:serviceaccount:%s:%s", f.ns, d.Spec.Template.Spec.ServiceAccountName)

	err = as.Get(ctx, client.ObjectKey{Namespace: otherNamespace, Name: elsewhereSecret}, &corev1.Secret{})
	switch {
	case scoped && !apierrors.IsForbidden(err):
		t.Errorf("%s read Secret %s/%s: %v, want Forbidden", user, otherNamespace, elsewhereSecret, err)
	case !scoped && err != nil:
		t.Errorf("%s (AllNamespaces) could not read Secret %s/%s: %v", user, otherNamespace, elsewhereSecret, err)
	}
	if scoped {
		for ns, list := range map[string]*corev1.SecretList{otherNamespace: {}, "": {}} {
			if err := as.List(ctx, list, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
				t.Errorf("%s listed the Secrets of namespace %q: %v, want Forbidden", user, ns, err)
			}
		}
	}
	if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(f.ns)); err != nil {
		t.Errorf("%s cannot list the Secrets of its own namespace %s: %v", user, f.ns, err)
	}

	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + f.ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: otherNamespace, Verb: "get", Resource: "secrets", Name: elsewhereSecret}}}
	if err := f.cl.Create(ctx, sar); err != nil {
		t.Fatal(err)
	}
	if sar.Status.Allowed == scoped {
		t.Errorf("SubjectAccessReview: %s may get Secret %s/%s: %v (%s), want %v", user, otherNamespace, elsewhereSecret, sar.Status.Allowed, sar.Status.Reason, !scoped)
	}
}
