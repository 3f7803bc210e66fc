package apps_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// randomCloudManager draws a valid spec (random sizes, storage and root password source),
// then changes up to two fields to values at and around the boundaries the API knows of:
// tier names (colliding, too long, not DNS labels), images, replicas, commands, the
// database's storage, and a root password given twice or from a Secret that does not exist.
func randomCloudManager(r *rand.Rand, ns string, i int) *appsv1api.CloudManager {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	size := func(xs ...int32) *int32 {
		if i := r.IntN(len(xs) + 1); i < len(xs) {
			return ptr.To(xs[i])
		}
		return nil
	}
	cm := &appsv1api.CloudManager{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prop-%03d", i), Namespace: ns}}
	// Each CloudManager names its own children (the same names would make all but the first
	// Degraded for not owning them, hiding every other outcome).
	web, identity, db := fmt.Sprintf("web-%d", i), fmt.Sprintf("identity-%d", i), fmt.Sprintf("db-%d", i)
	cm.Spec.Front.Deployment = appsv1api.TierDeployment{Name: web, Image: "nginx:1.27", Replicas: size(0, 1, 2, 1000)}
	cm.Spec.Identity.Deployment = appsv1api.TierDeployment{Name: identity, Image: "keycloak:26.0", Replicas: size(0, 1, 2)}
	cm.Spec.DB.StatefulSet = appsv1api.DatabaseStatefulSet{
		Name: db, Image: "mariadb:10.3.35", Replicas: size(0, 1),
		Storage: appsv1api.DatabaseStorage{Class: pick("", "local-path"), Size: pick("1Gi", "20Gi")},
	}
	if r.IntN(3) > 0 { // the test namespace enforces "restricted": without this, pods are refused
		cm.Spec.Front.Deployment.Security = testenv.RestrictedSecurity()
		cm.Spec.Identity.Deployment.Security = testenv.RestrictedSecurity()
		cm.Spec.DB.StatefulSet.Security = testenv.RestrictedSecurity()
	}
	switch r.IntN(3) {
	case 1:
		cm.Spec.DB.RootPass = "s3cret"
	case 2:
		cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: "db-root", Key: "password"}
	}
	tiers := []*appsv1api.TierDeployment{&cm.Spec.Front.Deployment, &cm.Spec.Identity.Deployment}
	mutations := []func(){
		func() { tiers[r.IntN(2)].Name = pick("", "Front", web, identity, db, "web-0", strings.Repeat("d", 64)) },
		func() { tiers[r.IntN(2)].Image = pick("", "nginx 1.27", strings.Repeat("x", 600)) },
		func() { tiers[r.IntN(2)].Replicas = ptr.To(pick32(r, -1, 1001)) },
		func() { tiers[r.IntN(2)].Command = []string{pick("/bin/sh", "", strings.Repeat("c", 5000))} },
		func() { cm.Spec.DB.StatefulSet.Name = pick("", "DB", web, strings.Repeat("s", 53)) },
		func() { cm.Spec.DB.StatefulSet.Replicas = ptr.To(pick32(r, -1, 1001)) },
		func() { cm.Spec.DB.StatefulSet.Storage.Class = "Bad Class!" },
		func() {
			cm.Spec.DB.StatefulSet.Storage.AccessModes = corev1.PersistentVolumeAccessMode(pick("ReadWriteMany", "ReadWriteOncePod", "Bogus"))
		},
		func() { cm.Spec.DB.StatefulSet.Storage.Size = pick("0", "-1Gi", "lots", "") },
		func() {
			cm.Spec.DB.RootPass, cm.Spec.DB.RootPasswordSecretRef = "s3cret", &appsv1api.SecretKeyReference{Name: "db-root"}
		},
		func() {
			cm.Spec.DB.RootPass = ""
			cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: pick("missing", "Bad_Name"), Key: pick("password", "bad key", "absent")}
		},
	}
	for range r.IntN(3) {
		mutations[r.IntN(len(mutations))]()
	}
	return cm
}

func pick32(r *rand.Rand, xs ...int32) int32 { return xs[r.IntN(len(xs))] }

// TestCloudManagerRandomSpecsAreRejectedOrReconciled is the property: every spec, valid or
// not, is either rejected at admission naming a spec field, or reconciled to a status for
// its generation with a Degraded condition saying whether (and why) something was refused;
// no reconcile panics.
func TestCloudManagerRandomSpecsAreRejectedOrReconciled(t *testing.T) {
	t.Parallel()
	rootSecret := func(ns string) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-root", Namespace: ns}, StringData: map[string]string{"password": "from-secret"}}
		if err := env.Client.Create(t.Context(), secret); err != nil {
			t.Fatal(err)
		}
	}
	testenv.RandomSpecs[*appsv1api.CloudManager]{
		Controller: "cloudmanager", N: 40, Salt: 11, Pods: 10, Setup: rootSecret,
		Draw: randomCloudManager,
		New:  func() *appsv1api.CloudManager { return &appsv1api.CloudManager{} },
		Status: func(cm *appsv1api.CloudManager) (int64, []metav1.Condition) {
			return cm.Status.ObservedGeneration, cm.Status.Conditions
		},
	}.Run(t, env)
}

// TestCloudManagerInvalidStringsAreRejected: the three tiers' images and names and the root
// password Secret's name refuse random invalid values naming the field.
func TestCloudManagerInvalidStringsAreRejected(t *testing.T) {
	t.Parallel()
	cm := func(o client.Object) *appsv1api.CloudManager { return o.(*appsv1api.CloudManager) } //nolint:forcetypeassert // only CloudManagers
	type field = testenv.StringField[client.Object]
	env.RejectInvalidStrings(t, 12, 32, func(ns string) client.Object {
		c := seedCloudManager(t, ns)
		c.Name = "strings"
		return c
	}, []field{
		{Path: "spec.front.deployment.image", Kind: "image", Valid: "nginx:1.20", Set: func(o client.Object, v string) { cm(o).Spec.Front.Deployment.Image = v }},
		{Path: "spec.identity.deployment.image", Kind: "image", Valid: "quay.io/keycloak/keycloak:21.1", Set: func(o client.Object, v string) { cm(o).Spec.Identity.Deployment.Image = v }},
		{Path: "spec.db.statefulSet.image", Kind: "image", Valid: "mariadb:10.3.35", Set: func(o client.Object, v string) { cm(o).Spec.DB.StatefulSet.Image = v }},
		{Path: "spec.front.deployment.name", Kind: "name", Valid: "web-front", Set: func(o client.Object, v string) { cm(o).Spec.Front.Deployment.Name = v }},
		{Path: "spec.identity.deployment.name", Kind: "name", Valid: "web-identity", Set: func(o client.Object, v string) { cm(o).Spec.Identity.Deployment.Name = v }},
		{Path: "spec.db.statefulSet.name", Kind: "name", Valid: "web-db", Set: func(o client.Object, v string) { cm(o).Spec.DB.StatefulSet.Name = v }},
		{Path: "spec.db.rootPasswordSecretRef.name", Kind: "name", Valid: "db-root", Set: func(o client.Object, v string) {
			cm(o).Spec.DB.RootPass, cm(o).Spec.DB.RootPasswordSecretRef = "", &appsv1api.SecretKeyReference{Name: v, Key: "password"}
		}},
	})
}
