package child

import (
	"math/rand/v2"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// TestSubsetAgreesWithTheUnstructuredForm checks Subset against its definition: convert
// both objects to apimachinery's unstructured form and compare the maps (what Subset did
// before it walked the typed objects). The pairs are random objects of every kind the
// operator creates, each against a copy of itself with random fields cleared (what the
// server defaults) or against another random object, from small value sets so that both
// answers come up. One difference is by design and left out of the pairs: a nil byte slice
// in a map (a Secret's data key set to null) that live's map lacks. Subset lets it pass, as
// it does any key whose value is empty; the unstructured form passes it when live's map is
// there without the key but not when live's map is absent.
func TestSubsetAgreesWithTheUnstructuredForm(t *testing.T) {
	kinds := []func() client.Object{
		func() client.Object { return &appsv1.Deployment{} },
		func() client.Object { return &appsv1.StatefulSet{} },
		func() client.Object { return &corev1.Service{} },
		func() client.Object { return &corev1.Secret{} },
		func() client.Object { return &corev1.ConfigMap{} },
		func() client.Object { return &policyv1.PodDisruptionBudget{} },
		func() client.Object { return &networkingv1.NetworkPolicy{} },
	}
	answers := map[bool]int{}
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 17))
		fill := filler(int64(seed))
		newObj := kinds[seed%uint64(len(kinds))]
		live, desired := newObj(), newObj()
		fill.Fill(live)
		if r.IntN(3) == 0 {
			fill.Fill(desired)
		} else {
			desired = live.DeepCopyObject().(client.Object) //nolint:forcetypeassert // same type
			clearSome(reflect.ValueOf(desired).Elem(), r)
		}
		want, err := unstructuredSubset(desired, live)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got := Subset(desired, live); got != want {
			t.Fatalf("seed %d, %T: Subset = %v, the unstructured form says %v\ndesired %+v\nlive %+v", seed, live, got, want, desired, live)
		}
		answers[want]++
	}
	if answers[true] < 300 || answers[false] < 300 {
		t.Errorf("answers %v: the generated pairs must give both answers often", answers)
	}
}

// filler fills objects from small value sets, with nils and empty lists common.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.4).NumElements(0, 2).MaxDepth(8).Funcs(
		func(s *string, c randfill.Continue) { *s = []string{"", "a", "b"}[c.Intn(3)] },
		func(i *int32, c randfill.Continue) { *i = int32(c.Intn(3)) },
		func(i *int64, c randfill.Continue) { *i = int64(c.Intn(3)) },
		func(b *[]byte, c randfill.Continue) { *b = [][]byte{{}, []byte("a")}[c.Intn(2)] }, // not nil: see the doc comment above
		func(q *resource.Quantity, c randfill.Continue) {
			*q = []resource.Quantity{resource.MustParse("1"), resource.MustParse("1000m"), resource.MustParse("1Gi")}[c.Intn(3)]
		},
		func(i *intstr.IntOrString, c randfill.Continue) {
			*i = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("1"), intstr.FromString("a")}[c.Intn(3)]
		},
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(int64(c.Intn(2)), 0) },
		func(e *runtime.RawExtension, _ randfill.Continue) { *e = runtime.RawExtension{} },
		func(m *metav1.ObjectMeta, c randfill.Continue) { // only the labels and annotations are compared
			m.Labels, m.Annotations = map[string]string{}, nil
			c.Fill(&m.Labels)
			c.Fill(&m.Annotations)
		},
	)
}

// clearSome sets random fields, list items' fields, map entries and pointers of v to their
// zero value, as a server's defaults would fill them in the other direction.
func clearSome(v reflect.Value, r *rand.Rand) {
	if value.TypeReflectEntryOf(v.Type()).CanConvertToUnstructured() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			clearSome(v.Elem(), r)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() || !f.CanSet() {
				continue
			}
			if r.IntN(6) == 0 {
				f.Set(reflect.Zero(f.Type()))
			} else {
				clearSome(f, r)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			clearSome(v.Index(i), r)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if r.IntN(4) == 0 {
				v.SetMapIndex(k, reflect.Value{})
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			clearSome(e, r)
			v.SetMapIndex(k, e)
		}
	}
}

// unstructuredSubset is Subset by its definition: both objects in apimachinery's
// unstructured form, every field of desired's but metadata and status compared to live's,
// and the labels and annotations.
func unstructuredSubset(desired, live client.Object) (bool, error) {
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false, err
	}
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, err
	}
	for _, drop := range []string{"metadata", "status", "apiVersion", "kind"} {
		delete(d, drop)
		delete(l, drop)
	}
	meta := func(o client.Object) map[string]any {
		out := map[string]any{}
		if len(o.GetLabels()) > 0 {
			out["labels"] = toAny(o.GetLabels())
		}
		if len(o.GetAnnotations()) > 0 {
			out["annotations"] = toAny(o.GetAnnotations())
		}
		return out
	}
	return unstructuredSubsetOf(d, l) && unstructuredSubsetOf(meta(desired), meta(live)), nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func unstructuredSubsetOf(desired, live any) bool {
	switch d := desired.(type) {
	case nil:
		return true
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0
		}
		for k, dv := range d {
			if !unstructuredSubsetOf(dv, l[k]) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(d) == 0
		}
		if len(d) != len(l) {
			return false
		}
		for i := range d {
			if !unstructuredSubsetOf(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(desired, live)
	}
}

// BenchmarkSubset compares a Deployment with one like the server returns it (every field
// defaulted), the check a reconcile makes on each child: by walking the typed objects
// (Subset) and through the unstructured form (as Subset did before).
func BenchmarkSubset(b *testing.B) {
	desired := &appsv1.Deployment{}
	filler(1).NilChance(0).Fill(desired)
	live := desired.DeepCopy()
	filler(2).NilChance(0).Fill(&live.Status)
	clearSome(reflect.ValueOf(desired).Elem(), rand.New(rand.NewPCG(1, 2)))
	if !Subset(desired, live) {
		b.Fatal("the defaulted Deployment must pass")
	}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Subset(desired, live)
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unstructuredSubset(desired, live); err != nil {
				b.Fatal(err)
			}
		}
	})
}
