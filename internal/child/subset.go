package child

import (
	"bytes"
	"iter"
	"reflect"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Subset reports whether every field desired sets has the same value in live: the semantic
// compare that ignores fields the API server defaulted. It looks at the labels, annotations
// and every top-level field but metadata and status. Lists must have the same length.
//
// It walks the two typed objects side by side as their JSON would show them, the way
// apimachinery's unstructured form does (a field that desired's JSON leaves out, being
// omitempty and empty, is not compared; a type with a JSON form of its own, a Quantity or an
// IntOrString, compares by that form), without building that form: converting both objects
// to maps on every reconcile was a third of the operator's allocations (tests/bench heap
// profile at N = 1,000).
func Subset(desired, live client.Object) bool {
	d, l := reflect.ValueOf(desired), reflect.ValueOf(live)
	if d.Type() != l.Type() || d.Kind() != reflect.Pointer || d.Elem().Kind() != reflect.Struct {
		return false
	}
	return fieldsSubset(d.Elem(), l.Elem(), true) &&
		stringsSubset(desired.GetLabels(), live.GetLabels()) &&
		stringsSubset(desired.GetAnnotations(), live.GetAnnotations())
}

func stringsSubset(desired, live map[string]string) bool {
	for k, v := range desired {
		if lv, ok := live[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// jsonField is what a struct field's json tag says.
type jsonField struct {
	name                string
	omitempty, omitzero bool
}

func jsonFieldOf(f reflect.StructField) jsonField {
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	jf := jsonField{name: name}
	for opts != "" {
		var opt string
		opt, opts, _ = strings.Cut(opts, ",")
		jf.omitempty = jf.omitempty || opt == "omitempty"
		jf.omitzero = jf.omitzero || opt == "omitzero"
	}
	return jf
}

// omitted reports whether the field's JSON leaves v out.
func (jf jsonField) omitted(v reflect.Value) bool {
	return jf.name == "-" || jf.omitempty && isEmpty(v) || jf.omitzero && isZero(v)
}

// shownFields yields the name ("" when inlined) and index of each exported field of the
// struct v that v's JSON shows.
func shownFields(v reflect.Value) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if jf := jsonFieldOf(f); !jf.omitted(v.Field(i)) && !yield(jf.name, i) {
				return
			}
		}
	}
}

// fieldsSubset compares the fields of two structs of one type; top leaves out the object's
// apiVersion, kind, metadata and status.
func fieldsSubset(d, l reflect.Value, top bool) bool {
	for name, i := range shownFields(d) {
		if top && (name == "" || name == "metadata" || name == "status") {
			continue
		}
		if !valueSubset(d.Field(i), l.Field(i)) {
			return false
		}
	}
	return true
}

// valueSubset compares two values of one type: d's set fields must equal l's.
func valueSubset(d, l reflect.Value) bool {
	if k := d.Kind(); k == reflect.Pointer || k == reflect.Interface {
		switch {
		case d.IsNil():
			return true
		case l.IsNil():
			return emptyForm(d.Elem())
		case d.Elem().Type() != l.Elem().Type():
			return false
		}
		return valueSubset(d.Elem(), l.Elem())
	}
	if entry := value.TypeReflectEntryOf(d.Type()); entry.CanConvertToUnstructured() {
		du, dErr := entry.ToUnstructured(d)
		if dErr == nil && du == nil { // null, as a zero Time is: nothing set
			return true
		}
		lu, lErr := entry.ToUnstructured(l)
		return dErr == nil && lErr == nil && reflect.DeepEqual(du, lu)
	}
	switch d.Kind() {
	case reflect.Struct:
		return fieldsSubset(d, l, false)
	case reflect.Map:
		for it := d.MapRange(); it.Next(); {
			lv := l.MapIndex(it.Key())
			if !lv.IsValid() {
				if !emptyForm(it.Value()) {
					return false
				}
				continue
			}
			if !valueSubset(it.Value(), lv) {
				return false
			}
		}
		return true
	case reflect.Slice:
		switch {
		case d.IsNil():
			return true
		case d.Type().Elem().Kind() == reflect.Uint8: // a base64 string, "" when empty
			return !l.IsNil() && bytes.Equal(d.Bytes(), l.Bytes())
		case l.IsNil():
			return d.Len() == 0
		}
		fallthrough
	case reflect.Array:
		if d.Len() != l.Len() {
			return false
		}
		for i := range d.Len() {
			if !valueSubset(d.Index(i), l.Index(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return d.String() == l.String()
	case reflect.Bool:
		return d.Bool() == l.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return d.Int() == l.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return d.Uint() == l.Uint()
	case reflect.Float32, reflect.Float64:
		return d.Float() == l.Float()
	}
	return reflect.DeepEqual(d.Interface(), l.Interface())
}

// emptyForm reports whether v's JSON is an empty object or list (or null): what a field live
// leaves out still holds.
func emptyForm(v reflect.Value) bool {
	if value.TypeReflectEntryOf(v.Type()).CanConvertToUnstructured() {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || emptyForm(v.Elem())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // a base64 string
			return v.IsNil()
		}
		return v.Len() == 0
	case reflect.Map:
		return v.Len() == 0
	case reflect.Struct:
		for name, i := range shownFields(v) {
			if name != "" || !emptyForm(v.Field(i)) {
				return false
			}
		}
		return true
	}
	return false
}

// isEmpty is apimachinery's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Map, reflect.Slice:
		return v.IsNil() || v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// isZero is apimachinery's omitzero test.
func isZero(v reflect.Value) bool { return value.OmitZeroFunc(v.Type())(v) }
