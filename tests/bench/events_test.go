package bench

import "testing"

func TestIsEvents(t *testing.T) {
	for path, want := range map[string]bool{
		"/apis/events.k8s.io/v1/namespaces/apps/events":                          true,
		"/apis/events.k8s.io/v1/namespaces/apps/events/a.b":                      true,
		"/api/v1/namespaces/apps/events":                                         true,
		"/api/v1/namespaces/events/pods":                                         false,
		"/api/v1/namespaces/events":                                              false,
		"/apis/apps/v1/namespaces/apps/deployments/events":                       false,
		"/apis/apps.middleware-operator.io/v1/namespaces/a/appservices/x/status": false,
	} {
		if got := isEvents(path); got != want {
			t.Errorf("isEvents(%q) = %v, want %v", path, got, want)
		}
	}
}
