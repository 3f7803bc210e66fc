package child

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// Subset reports whether every field desired sets has the same value in live: the semantic
// compare that ignores fields the API server defaulted. It looks at the labels, annotations
// and every top-level field but metadata and status. Lists must have the same length.
func Subset(desired, live runtime.Object) (bool, error) {
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
	return subset(d, l) && subset(metaOnly(desired), metaOnly(live)), nil
}

func metaOnly(obj runtime.Object) map[string]any {
	type meta interface {
		GetLabels() map[string]string
		GetAnnotations() map[string]string
	}
	m, ok := obj.(meta)
	if !ok {
		return map[string]any{}
	}
	out := map[string]any{}
	if l := m.GetLabels(); len(l) > 0 {
		out["labels"] = toAny(l)
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		out["annotations"] = toAny(a)
	}
	return out
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// subset compares two values of the unstructured form.
func subset(desired, live any) bool {
	switch d := desired.(type) {
	case nil:
		return true
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0
		}
		for k, dv := range d {
			if !subset(dv, l[k]) {
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
			if !subset(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(desired, live)
	}
}
