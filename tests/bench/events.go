package bench

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// eventWrites counts the Events a manager's event recorder sends ("create Event",
// "patch Event" for a series), which go through a client of the recorder's own and so
// past the counting client: they are API writes too. It also counts, in podLists, the
// LISTs of pods (a stalled rollout's check, through the API reader, past the cache).
type eventWrites struct {
	next     http.RoundTripper
	counts   *testenv.WriteCounts
	podLists *atomic.Int64
}

// RoundTrip counts a write to an events resource, or a LIST of pods, and passes the
// request on.
func (t eventWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if verb, ok := writeVerbs[req.Method]; ok && err == nil && isEvents(req.URL.Path) {
		t.counts.Add(verb + " Event")
	}
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") && req.URL.Query().Get("watch") == "" && t.podLists != nil {
		t.podLists.Add(1)
	}
	return resp, err
}

// writeVerbs are the HTTP methods that write, by the verb the bench prints.
var writeVerbs = map[string]string{http.MethodPost: "create", http.MethodPatch: "patch", http.MethodPut: "update", http.MethodDelete: "delete"}

// isEvents reports whether an API path names the events resource or one event:
// /api/v1[/namespaces/NS]/events[/NAME] or /apis/GROUP/VERSION[/namespaces/NS]/events[/NAME].
func isEvents(path string) bool {
	segments := strings.Split(strings.Trim(path, "/"), "/")
	resource := 2 // after api/v1
	if segments[0] == "apis" {
		resource = 3 // after apis/GROUP/VERSION
	}
	if len(segments) > resource+2 && segments[resource] == "namespaces" {
		resource += 2
	}
	return len(segments) > resource && segments[resource] == "events"
}
