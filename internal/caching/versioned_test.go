package caching

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// versions is a metadata reader that knows one resourceVersion per name.
type versions map[string]string

func (v versions) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	rv, ok := v[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.SetResourceVersion(rv)
	return nil
}

func (v versions) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// secrets is an API reader of Secrets that counts its reads.
type secrets struct {
	objs  map[string]*corev1.Secret
	reads int
}

func (s *secrets) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.reads++
	src, ok := s.objs[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	src.DeepCopyInto(obj.(*corev1.Secret)) //nolint:forcetypeassert // Secrets only
	return nil
}

func (s *secrets) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestVersionedReadsEachVersionOnce(t *testing.T) {
	ctx := context.Background()
	api := &secrets{objs: map[string]*corev1.Secret{
		"pw": {ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "ns", ResourceVersion: "1"}, Data: map[string][]byte{"password": []byte("one")}},
	}}
	refs := versions{"pw": "1"}
	v := &Versioned{Refs: refs, API: api}
	key := client.ObjectKey{Namespace: "ns", Name: "pw"}
	read := func() string {
		t.Helper()
		got := &corev1.Secret{}
		if err := v.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return string(got.Data["password"])
	}

	for range 3 {
		if got := read(); got != "one" {
			t.Fatalf("password %q, want one", got)
		}
	}
	if api.reads != 1 {
		t.Errorf("%d API reads for three Gets of one version, want 1", api.reads)
	}

	// The copy handed out is the caller's: changing it changes nothing kept.
	mine := &corev1.Secret{}
	_ = v.Get(ctx, key, mine)
	mine.Data["password"] = []byte("changed")
	if got := read(); got != "one" {
		t.Errorf("a caller's change reached the kept copy: %q", got)
	}

	// A new version is read again.
	api.objs["pw"] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "ns", ResourceVersion: "2"}, Data: map[string][]byte{"password": []byte("two")}}
	refs["pw"] = "2"
	if got := read(); got != "two" || api.reads != 2 {
		t.Errorf("after a change: password %q after %d API reads, want two after 2", got, api.reads)
	}

	// Gone from the metadata cache (deleted, or not seen yet): the API server decides.
	delete(refs, "pw")
	delete(api.objs, "pw")
	if err := v.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a deleted Secret: %v, want NotFound", err)
	}

	// Without a metadata cache every Get is an API read.
	plain := &Versioned{API: &secrets{objs: map[string]*corev1.Secret{"pw": {ObjectMeta: metav1.ObjectMeta{Name: "pw", ResourceVersion: "1"}}}}}
	for range 2 {
		_ = plain.Get(ctx, key, &corev1.Secret{})
	}
	if n := plain.API.(*secrets).reads; n != 2 { //nolint:forcetypeassert // set above
		t.Errorf("%d API reads without a metadata cache, want 2", n)
	}
	if err := v.Get(ctx, key, &corev1.Pod{}); err == nil {
		t.Error("a Pod was served: Versioned serves Secrets and ConfigMaps only")
	}
}

func TestVersionedLabelsWhatItReadsFromTheAPI(t *testing.T) {
	ctx := context.Background()
	user := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "ns", Labels: map[string]string{"app": "mine"}},
		Data: map[string][]byte{"password": []byte("one")}}
	patches := 0
	api := fake.NewClientBuilder().WithObjects(user).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, p, opts...)
		},
	}).Build()
	v := &Versioned{API: api, Writer: api}
	key := client.ObjectKeyFromObject(user)
	got := &corev1.Secret{}
	if err := v.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	stored := &corev1.Secret{}
	if err := api.Get(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	if stored.Labels[WatchLabel] != WatchLabelValue || stored.Labels["app"] != "mine" {
		t.Errorf("labels after the first read %v, want %s=%s beside the user's own", stored.Labels, WatchLabel, WatchLabelValue)
	}
	if string(stored.Data["password"]) != "one" || got.Labels[WatchLabel] != WatchLabelValue {
		t.Errorf("the label patch changed the data (%q) or the caller got the unlabelled object (%v)", stored.Data["password"], got.Labels)
	}
	if err := v.Get(ctx, key, &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	if patches != 1 {
		t.Errorf("%d label patches for two reads, want 1 (a labelled object is not patched again)", patches)
	}
	if !ReferencesSelector().Matches(labels.Set(stored.Labels)) || ReferencesSelector().Matches(labels.Set{"app": "mine"}) {
		t.Errorf("selector %v: must select the labelled object and nothing else", ReferencesSelector())
	}

	// A refused patch is an error that says how to fix it.
	refusing := fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "ns"}}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "conf", nil)
		}}).Build()
	err := (&Versioned{API: refusing, Writer: refusing}).Get(ctx, client.ObjectKey{Namespace: "ns", Name: "conf"}, &corev1.ConfigMap{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "set the label yourself") {
		t.Errorf("a refused label patch: %v, want Forbidden naming the fix", err)
	}
}

// TestVersionedForget: a forgotten object leaves no copy (its content does not outlive it),
// and the next Get reads it from the API server again.
func TestVersionedForget(t *testing.T) {
	api := &secrets{objs: map[string]*corev1.Secret{
		"pw": {ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "ns", ResourceVersion: "1"}, Data: map[string][]byte{"password": []byte("one")}},
	}}
	v := &Versioned{Refs: versions{"pw": "1"}, API: api}
	key := client.ObjectKey{Namespace: "ns", Name: "pw"}
	if err := v.Get(t.Context(), key, &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	v.Forget("Secret", key)
	if n := len(v.kept); n != 0 {
		t.Fatalf("%d copies kept after Forget, want none", n)
	}
	if err := v.Get(t.Context(), key, &corev1.Secret{}); err != nil || api.reads != 2 {
		t.Errorf("the Get after Forget: %v after %d API reads, want a second read", err, api.reads)
	}
}
