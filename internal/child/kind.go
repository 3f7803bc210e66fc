package child

import (
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KindOf is the kind of a typed built-in object (its Go type name), for messages and events.
func KindOf(obj client.Object) string { return reflect.TypeOf(obj).Elem().Name() }
