package bench

import (
	"net/http"
	"strings"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// eventWrites counts the Events a manager's event recorder sends ("create Event",
// "patch Event" for a series), which go through a client of the recorder's own and so
// past the counting client: they are API writes too.
type eventWrites struct {
	next   http.RoundTripper
	counts *testenv.WriteCounts
}

// RoundTrip counts a write to an events resource and passes the request on.
func (t eventWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && req.Method != http.MethodGet && strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/events") ||
		err == nil && req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/events/") {
		verb := map[string]string{http.MethodPost: "create", http.MethodPatch: "patch", http.MethodPut: "update", http.MethodDelete: "delete"}[req.Method]
		t.counts.Add(verb + " Event")
	}
	return resp, err
}
