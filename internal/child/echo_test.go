package child

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEchoes: only the first event after a write, carrying the write's resourceVersion, is
// its echo; the record is spent by that event either way, and a deletion drops it.
func TestEchoes(t *testing.T) {
	obj := func(name, rv string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	var e Echoes
	if e.Echo(obj("a", "1")) {
		t.Error("an event with no write recorded was an echo")
	}
	e.Wrote(obj("a", "2"))
	if e.Echo(obj("b", "2")) {
		t.Error("another object's event was an echo")
	}
	if !e.Echo(obj("a", "2")) {
		t.Error("the event of the write was not its echo")
	}
	if e.Echo(obj("a", "2")) {
		t.Error("a second event with the same resourceVersion was an echo")
	}
	e.Wrote(obj("a", "3"))
	if e.Echo(obj("a", "4")) || e.Echo(obj("a", "3")) {
		t.Error("the record outlived an event of another writer")
	}
	e.Wrote(obj("a", "5"))
	e.Forget(obj("a", "5"))
	if e.Echo(obj("a", "5")) {
		t.Error("the record outlived the object's deletion")
	}
}
