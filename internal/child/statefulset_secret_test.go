package child_test

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/middleware-operator/middleware-operator/internal/child"
)

func statefulSet(image, class, size string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: image}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr.To(class),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
				},
			}},
		},
	}
}

func TestMergeStatefulSet(t *testing.T) {
	cases := map[string]struct {
		change    func(*appsv1.StatefulSet)
		wantImage string
		wantReps  int32
	}{
		"new image":    {change: func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "mariadb:11" }, wantImage: "mariadb:11", wantReps: 1},
		"new replicas": {change: func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](3) }, wantImage: "mariadb:10", wantReps: 3},
		"immutable fields changed": {
			change: func(s *appsv1.StatefulSet) {
				s.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
				s.Spec.Template.Labels = map[string]string{"app": "other"}
				s.Spec.ServiceName = "other"
				s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
				s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("50Gi")
			},
			wantImage: "mariadb:10", wantReps: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := statefulSet("mariadb:10", "local-path", "20Gi")
			live.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
			desired := statefulSet("mariadb:10", "local-path", "20Gi")
			tc.change(desired)
			child.MergeStatefulSet(live, desired)
			if live.Spec.Template.Spec.Containers[0].Image != tc.wantImage || *live.Spec.Replicas != tc.wantReps {
				t.Errorf("image %s replicas %d, want %s %d", live.Spec.Template.Spec.Containers[0].Image, *live.Spec.Replicas, tc.wantImage, tc.wantReps)
			}
			if live.Spec.Selector.MatchLabels["app"] != "db" || live.Spec.ServiceName != "db" ||
				live.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
				t.Errorf("an immutable field changed: selector %v serviceName %s policy %s",
					live.Spec.Selector.MatchLabels, live.Spec.ServiceName, live.Spec.PodManagementPolicy)
			}
			if got := live.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "20Gi" {
				t.Errorf("volumeClaimTemplate size %s, want the live 20Gi", got.String())
			}
		})
	}
}

func TestMergeSecretKeeping(t *testing.T) {
	cases := map[string]struct {
		live, want string
	}{
		"live value kept":          {live: "old", want: "old"},
		"missing value filled in":  {live: "", want: "new"},
		"desired equals live kept": {live: "new", want: "new"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := &corev1.Secret{Data: map[string][]byte{"password": []byte(tc.live), "stale": []byte("x")}}
			desired := &corev1.Secret{Data: map[string][]byte{"password": []byte("new"), "username": []byte("root")}}
			child.MergeSecretKeeping("password")(live, desired)
			if string(live.Data["password"]) != tc.want || string(live.Data["username"]) != "root" || live.Data["stale"] != nil {
				t.Errorf("data %q, want password %q, username root, no stale key", live.Data, tc.want)
			}
			if string(desired.Data["password"]) != "new" {
				t.Error("the desired Secret was modified")
			}
		})
	}
}

func owner() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "ns", UID: "owner-uid"}}
}

func TestKeptSecretValue(t *testing.T) {
	controlled := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid", Controller: ptr.To(true)}}
	foreign := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "other-uid", Controller: ptr.To(true)}}
	cases := map[string]struct {
		secret *corev1.Secret
		getErr error
		want   string
		err    bool
	}{
		"missing": {},
		"ours with a value": {
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled}, Data: map[string][]byte{"password": []byte("kept")}},
			want:   "kept",
		},
		"ours without the key": {
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled}, Data: map[string][]byte{"other": []byte("x")}},
		},
		"ours with an empty value": {
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled}, Data: map[string][]byte{"password": {}}},
		},
		"someone else's": {
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: foreign}, Data: map[string][]byte{"password": []byte("theirs")}},
		},
		"unowned": {
			secret: &corev1.Secret{Data: map[string][]byte{"password": []byte("theirs")}},
		},
		"read error": {getErr: errors.New("boom"), err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(scheme)
			if tc.secret != nil {
				tc.secret.Name, tc.secret.Namespace = "s", "ns"
				b = b.WithObjects(tc.secret)
			}
			if tc.getErr != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return tc.getErr
				}})
			}
			got, err := child.KeptSecretValue(t.Context(), b.Build(), owner(), client.ObjectKey{Namespace: "ns", Name: "s"}, "password")
			if (err != nil) != tc.err || string(got) != tc.want {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
			if tc.want == "" && got != nil {
				t.Errorf("got %q, want nil so the caller generates a value", got)
			}
		})
	}
}
