package apps_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

func TestCloudManagerInvalidSpecsAreRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cases := map[string]struct {
		change func(*appsv1api.CloudManager)
		want   []string // every fragment must be in the API server's message
	}{
		"front name not a DNS label": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Front.Deployment.Name = "Ake_Front" },
			want:   []string{"spec.front.deployment.name", "must be a DNS label"},
		},
		"identity name too long": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Identity.Deployment.Name = strings.Repeat("a", 64) },
			want:   []string{"spec.identity.deployment.name", "63"},
		},
		"database name too long for a StatefulSet": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Name = strings.Repeat("d", 53) },
			want:   []string{"spec.db.statefulSet.name", "52"},
		},
		"identity named like the front": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Identity.Deployment.Name = "ake-front" },
			want:   []string{"spec.identity.deployment.name", "must differ from spec.front.deployment.name"},
		},
		"database named like identity": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Name = "cm-identity" },
			want:   []string{"spec.db.statefulSet.name", "must differ"},
		},
		"no front image": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Front.Deployment.Image = "" },
			want:   []string{"spec.front.deployment.image"},
		},
		"image with a space": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Image = "mariadb 10" },
			want:   []string{"spec.db.statefulSet.image", "must be an image reference"},
		},
		"negative replicas": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Identity.Deployment.Replicas = ptr.To[int32](-1) },
			want:   []string{"spec.identity.deployment.replicas", "greater than or equal to 0"},
		},
		"size not a quantity": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Storage.Size = "20GB" },
			want:   []string{"spec.db.statefulSet.storage.size", "must be a positive quantity such as 20Gi"},
		},
		"zero size": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Storage.Size = "0" },
			want:   []string{"spec.db.statefulSet.storage.size", "must be a positive quantity"},
		},
		"unknown access mode": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Storage.AccessModes = "ReadWriteSometimes" },
			want:   []string{"spec.db.statefulSet.storage.accessModes", "Unsupported value", "ReadWriteOnce"},
		},
		"storage class not a name": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Storage.Class = "Local Path" },
			want:   []string{"spec.db.statefulSet.storage.class", "StorageClass name"},
		},
		"rootPass and a Secret reference": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: "db-root"}
			},
			want: []string{"spec.db", "rootPass and spec.db.rootPasswordSecretRef are mutually exclusive"},
		},
		"Secret reference without a valid name": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.DB.RootPass = ""
				cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: "DB_root"}
			},
			want: []string{"spec.db.rootPasswordSecretRef.name", "must be a Secret name"},
		},
		"a front image with a tab": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Front.Deployment.Image = "nginx:\t1.20" },
			want:   []string{"spec.front.deployment.image", "must be an image reference"},
		},
		"an identity image with a space": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.Identity.Deployment.Image = "keycloak 21" },
			want:   []string{"spec.identity.deployment.image", "must be an image reference"},
		},
		"a database image with a newline": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Image = "mariadb:10.3\n" },
			want:   []string{"spec.db.statefulSet.image", "must be an image reference"},
		},
		"name too long for a label": {
			change: func(cm *appsv1api.CloudManager) { cm.Name = strings.Repeat("c", 64) },
			want:   []string{"metadata.name must be at most 63 characters"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := seedCloudManager(t, ns)
			cm.Name = "invalid"
			tc.change(cm)
			err := env.Client.Create(t.Context(), cm, client.DryRunAll)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err.Error(), w)
				}
			}
		})
	}
}

func TestCloudManagerStorageChangesOnlyWithANewStatefulSet(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key := createCM(t, seedCloudManager(t, ns))

	// Dry runs of updates, retried while the operator's status writes change the version.
	dryRun := func(change func(*appsv1api.CloudManager)) error {
		for {
			cm := mustGetCM(t, key)
			change(cm)
			if err := env.Client.Update(t.Context(), cm, client.DryRunAll); !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	err := dryRun(func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Storage.Size = "50Gi" })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.db.statefulSet.storage can change only together with spec.db.statefulSet.name") {
		t.Fatalf("a new size for the same StatefulSet: want Invalid naming the fields, got %v", err)
	}
	if err := dryRun(func(cm *appsv1api.CloudManager) {
		cm.Spec.DB.StatefulSet.Storage.Size = "50Gi"
		cm.Spec.DB.StatefulSet.Storage.AccessModes = corev1.ReadWriteMany
		cm.Spec.DB.StatefulSet.Name = "cm-db-big"
	}); err != nil {
		t.Errorf("a new storage with a new StatefulSet name: %v", err)
	}
}
