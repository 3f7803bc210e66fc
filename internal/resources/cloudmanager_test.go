package resources_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// seedCloudManager is the CloudManager of seed 003.
func seedCloudManager() *appsv1api.CloudManager {
	return &appsv1api.CloudManager{
		ObjectMeta: metav1.ObjectMeta{Name: "cloudmanager-sample", Namespace: "ns"},
		Spec: appsv1api.CloudManagerSpec{
			Front:    appsv1api.FrontTier{Deployment: appsv1api.TierDeployment{Name: "ake-front", Image: "nginx:1.20"}},
			Identity: appsv1api.IdentityTier{Deployment: appsv1api.TierDeployment{Name: "cm-identity", Image: "busybox:1.32.1"}},
			DB: appsv1api.DatabaseTier{
				StatefulSet: appsv1api.DatabaseStatefulSet{
					Name: "cm-db", Image: "mariadb:10.3.35",
					Storage: appsv1api.DatabaseStorage{Class: "local-path", AccessModes: corev1.ReadWriteOnce, Size: "20Gi"},
				},
				RootPass: "123456",
			},
		},
	}
}

func TestCloudManagerDeployments(t *testing.T) {
	cases := map[string]struct {
		change            func(*appsv1api.CloudManager)
		build             func(*appsv1api.CloudManager) *appsv1.Deployment
		name, component   string
		image             string
		replicas          int32
		command, args     []string
		selectorComponent string
	}{
		"seed front": {
			build: resources.CloudManagerFrontDeployment, name: "ake-front", component: "front", image: "nginx:1.20", replicas: 1,
		},
		"seed identity": {
			build: resources.CloudManagerIdentityDeployment, name: "cm-identity", component: "identity", image: "busybox:1.32.1", replicas: 1,
		},
		"front with replicas and a new image": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.Front.Deployment.Replicas = ptr.To[int32](3)
				cm.Spec.Front.Deployment.Image = "nginx:1.27"
			},
			build: resources.CloudManagerFrontDeployment, name: "ake-front", component: "front", image: "nginx:1.27", replicas: 3,
		},
		"identity scaled to zero with a command": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.Identity.Deployment.Replicas = ptr.To[int32](0)
				cm.Spec.Identity.Deployment.Command = []string{"/bin/sh", "-c"}
				cm.Spec.Identity.Deployment.Args = []string{"sleep 60m"}
			},
			build: resources.CloudManagerIdentityDeployment, name: "cm-identity", component: "identity", image: "busybox:1.32.1",
			replicas: 0, command: []string{"/bin/sh", "-c"}, args: []string{"sleep 60m"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := seedCloudManager()
			if tc.change != nil {
				tc.change(cm)
			}
			d := tc.build(cm)
			if d.Name != tc.name || d.Namespace != "ns" {
				t.Errorf("name %s/%s, want ns/%s", d.Namespace, d.Name, tc.name)
			}
			if *d.Spec.Replicas != tc.replicas {
				t.Errorf("replicas %d, want %d", *d.Spec.Replicas, tc.replicas)
			}
			c := d.Spec.Template.Spec.Containers
			if len(c) != 1 || c[0].Name != tc.component || c[0].Image != tc.image {
				t.Fatalf("containers %+v, want one %s running %s", c, tc.component, tc.image)
			}
			if !reflect.DeepEqual(c[0].Command, tc.command) || !reflect.DeepEqual(c[0].Args, tc.args) {
				t.Errorf("command %q args %q, want %q %q", c[0].Command, c[0].Args, tc.command, tc.args)
			}
			want := map[string]string{
				"app.kubernetes.io/name": "cloudmanager", "app.kubernetes.io/instance": "cloudmanager-sample",
				"app.kubernetes.io/component": tc.component,
			}
			if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, want) {
				t.Errorf("selector %v, want %v", d.Spec.Selector.MatchLabels, want)
			}
			sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) || d.Labels["app.kubernetes.io/managed-by"] != "middleware-operator" {
				t.Errorf("template labels %v, object labels %v", d.Spec.Template.Labels, d.Labels)
			}
		})
	}
}

func TestCloudManagerTierSelectorsDoNotOverlap(t *testing.T) {
	cm := seedCloudManager()
	front, identity := resources.CloudManagerFrontDeployment(cm), resources.CloudManagerIdentityDeployment(cm)
	db := resources.CloudManagerStatefulSet(cm)
	pods := map[string]map[string]string{
		"front": front.Spec.Template.Labels, "identity": identity.Spec.Template.Labels, "db": db.Spec.Template.Labels,
	}
	selectors := map[string]*metav1.LabelSelector{"front": front.Spec.Selector, "identity": identity.Spec.Selector, "db": db.Spec.Selector}
	for owner, s := range selectors {
		for podsOf, l := range pods {
			if got := labels.SelectorFromSet(s.MatchLabels).Matches(labels.Set(l)); got != (owner == podsOf) {
				t.Errorf("the %s selector matches the %s pods: %v", owner, podsOf, got)
			}
		}
	}
	other := seedCloudManager()
	other.Name = "other"
	if labels.SelectorFromSet(front.Spec.Selector.MatchLabels).Matches(labels.Set(resources.CloudManagerFrontDeployment(other).Spec.Template.Labels)) {
		t.Error("the front selector of one CloudManager matches the front pods of another")
	}
}

func TestCloudManagerDBService(t *testing.T) {
	s := resources.CloudManagerDBService(seedCloudManager())
	if s.Name != "cm-db" || s.Namespace != "ns" || s.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s/%s clusterIP %q, want the headless ns/cm-db", s.Namespace, s.Name, s.Spec.ClusterIP)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 3306 || s.Spec.Ports[0].TargetPort.IntValue() != 3306 {
		t.Errorf("ports %+v, want 3306 -> 3306", s.Spec.Ports)
	}
	if s.Spec.Selector["app.kubernetes.io/component"] != "db" || s.Spec.Selector["app.kubernetes.io/instance"] != "cloudmanager-sample" {
		t.Errorf("selector %v", s.Spec.Selector)
	}
}

func TestCloudManagerStatefulSet(t *testing.T) {
	cases := map[string]struct {
		change       func(*appsv1api.CloudManager)
		class        *string
		mode         corev1.PersistentVolumeAccessMode
		size         string
		replicas     int32
		secret, key  string
		image        string
		retainOnDown bool
	}{
		"seed": {
			class: ptr.To("local-path"), mode: corev1.ReadWriteOnce, size: "20Gi", replicas: 1,
			secret: "cloudmanager-sample-db-auth", key: "password", image: "mariadb:10.3.35",
		},
		"secret reference with the default key": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.DB.RootPass = ""
				cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: "mine"}
			},
			class: ptr.To("local-path"), mode: corev1.ReadWriteOnce, size: "20Gi", replicas: 1,
			secret: "mine", key: "password", image: "mariadb:10.3.35",
		},
		"secret reference with a key": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.DB.RootPass = ""
				cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: "mine", Key: "root"}
			},
			class: ptr.To("local-path"), mode: corev1.ReadWriteOnce, size: "20Gi", replicas: 1,
			secret: "mine", key: "root", image: "mariadb:10.3.35",
		},
		"default class and access mode, more replicas, 20480Mi": {
			change: func(cm *appsv1api.CloudManager) {
				cm.Spec.DB.StatefulSet.Storage = appsv1api.DatabaseStorage{Size: "20480Mi"}
				cm.Spec.DB.StatefulSet.Replicas = ptr.To[int32](3)
				cm.Spec.DB.StatefulSet.Image = "mariadb:11"
			},
			mode: corev1.ReadWriteOnce, size: "20Gi", replicas: 3,
			secret: "cloudmanager-sample-db-auth", key: "password", image: "mariadb:11",
		},
		"ReadWriteMany": {
			change: func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Storage.AccessModes = corev1.ReadWriteMany },
			class:  ptr.To("local-path"), mode: corev1.ReadWriteMany, size: "20Gi", replicas: 1,
			secret: "cloudmanager-sample-db-auth", key: "password", image: "mariadb:10.3.35",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := seedCloudManager()
			if tc.change != nil {
				tc.change(cm)
			}
			s := resources.CloudManagerStatefulSet(cm)
			if s.Name != "cm-db" || s.Spec.ServiceName != "cm-db" || *s.Spec.Replicas != tc.replicas {
				t.Errorf("name %s serviceName %s replicas %d", s.Name, s.Spec.ServiceName, *s.Spec.Replicas)
			}
			if len(s.Spec.VolumeClaimTemplates) != 1 {
				t.Fatalf("%d volumeClaimTemplates, want 1", len(s.Spec.VolumeClaimTemplates))
			}
			claim := s.Spec.VolumeClaimTemplates[0]
			if claim.Name != "data" || !reflect.DeepEqual(claim.Spec.StorageClassName, tc.class) ||
				!reflect.DeepEqual(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{tc.mode}) {
				t.Errorf("claim %s class %v modes %v, want data %v [%s]", claim.Name, ptr.Deref(claim.Spec.StorageClassName, "<nil>"),
					claim.Spec.AccessModes, ptr.Deref(tc.class, "<nil>"), tc.mode)
			}
			if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse(tc.size)) != 0 || got.String() != tc.size {
				t.Errorf("storage request %s, want %s", got.String(), tc.size)
			}
			p := s.Spec.PersistentVolumeClaimRetentionPolicy
			if p == nil || p.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Errorf("retention policy %+v, want deleted with the StatefulSet and kept on scale-down", p)
			}
			c := s.Spec.Template.Spec.Containers
			if len(c) != 1 || c[0].Image != tc.image {
				t.Fatalf("containers %+v", c)
			}
			env := c[0].Env
			if len(env) != 1 || env[0].Name != "MARIADB_ROOT_PASSWORD" || env[0].Value != "" || env[0].ValueFrom == nil ||
				env[0].ValueFrom.SecretKeyRef.Name != tc.secret || env[0].ValueFrom.SecretKeyRef.Key != tc.key {
				t.Errorf("env %+v, want MARIADB_ROOT_PASSWORD from %s/%s", env, tc.secret, tc.key)
			}
			if len(c[0].VolumeMounts) != 1 || c[0].VolumeMounts[0].Name != "data" || c[0].VolumeMounts[0].MountPath != "/var/lib/mysql" {
				t.Errorf("mounts %+v", c[0].VolumeMounts)
			}
			if !labels.SelectorFromSet(s.Spec.Selector.MatchLabels).Matches(labels.Set(s.Spec.Template.Labels)) {
				t.Error("the selector does not match the pod template")
			}
			if strings.Contains(fmt.Sprintf("%+v", s), "123456") {
				t.Error("the StatefulSet holds the root password")
			}
		})
	}
}

func TestCloudManagerSecret(t *testing.T) {
	cases := map[string]struct {
		name     string
		password []byte
	}{
		"seed rootPass":      {name: "cloudmanager-sample", password: []byte("123456")},
		"generated password": {name: "other", password: []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZ")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := seedCloudManager()
			cm.Name = tc.name
			s := resources.CloudManagerSecret(cm, tc.password)
			if s.Name != tc.name+"-db-auth" || s.Namespace != "ns" || s.Type != corev1.SecretTypeOpaque {
				t.Errorf("Secret %s/%s type %s", s.Namespace, s.Name, s.Type)
			}
			if string(s.Data["password"]) != string(tc.password) || string(s.Data["username"]) != "root" || len(s.StringData) != 0 {
				t.Errorf("data keys %d, username %q", len(s.Data), s.Data["username"])
			}
			if name, key := resources.CloudManagerPasswordSource(cm); name != s.Name || key != "password" {
				t.Errorf("the database reads %s/%s, not the Secret", name, key)
			}
		})
	}
}

func TestCloudManagerStorageSize(t *testing.T) {
	cases := map[string]struct {
		size, want, err string
	}{
		"seed":      {size: "20Gi", want: "20Gi"},
		"bytes":     {size: "1073741824", want: "1073741824"},
		"decimal":   {size: "500M", want: "500M"},
		"not unit":  {size: "20GB", err: "is not a quantity"},
		"zero":      {size: "0", err: "must be positive"},
		"negative":  {size: "-1Gi", err: "must be positive"},
		"not a num": {size: "big", err: "is not a quantity"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := seedCloudManager()
			cm.Spec.DB.StatefulSet.Storage.Size = tc.size
			q, err := resources.CloudManagerStorageSize(cm)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "spec.db.statefulSet.storage.size") {
					t.Errorf("error %v, want one naming the field and saying %q", err, tc.err)
				}
				return
			}
			if err != nil || q.String() != tc.want {
				t.Errorf("got %s, %v; want %s", q.String(), err, tc.want)
			}
		})
	}
}
