package bench

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// watchEvents counts the events (BOOKMARKs aside) that arrive on a manager's watches of
// Secrets and ConfigMaps, whichever informer opened them: what the API server sends the
// operator about those kinds. It asks for JSON on those watches (the metadata client asks
// for protobuf first) so that it can read each event's type as it passes.
type watchEvents struct {
	next   http.RoundTripper
	events atomic.Int64
	// unrelated counts the events for objects whose name starts with unrelatedPrefix.
	unrelated atomic.Int64
}

// unrelatedPrefix starts the names of the Secrets no resource names, so that their events
// are told apart from a late one for the labelled Secret.
const unrelatedPrefix = "u-"

// RoundTrip passes the request on and, for a watch of Secrets or ConfigMaps, counts the
// events of the response as the caller reads them.
func (w *watchEvents) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isSecretOrConfigMapWatch(req) {
		return w.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", jsonOnly(req.Header.Get("Accept")))
	resp, err := w.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	pr, pw := io.Pipe()
	go func() {
		dec := json.NewDecoder(pr)
		for {
			var ev struct {
				Type   string
				Object struct {
					Metadata struct{ Name string }
				}
			}
			if err := dec.Decode(&ev); err != nil {
				_ = pr.CloseWithError(err)
				return
			}
			if ev.Type != "BOOKMARK" {
				w.events.Add(1)
				if strings.HasPrefix(ev.Object.Metadata.Name, unrelatedPrefix) {
					w.unrelated.Add(1)
				}
			}
		}
	}()
	resp.Body = &teeBody{body: resp.Body, copy: pw}
	return resp, nil
}

// isSecretOrConfigMapWatch reports whether req watches Secrets or ConfigMaps.
func isSecretOrConfigMapWatch(req *http.Request) bool {
	if req.Method != http.MethodGet || (req.URL.Query().Get("watch") != "true" && req.URL.Query().Get("watch") != "1") {
		return false
	}
	return strings.HasSuffix(req.URL.Path, "/secrets") || strings.HasSuffix(req.URL.Path, "/configmaps")
}

// jsonOnly keeps the JSON media types of an Accept header (application/json when none).
func jsonOnly(accept string) string {
	var keep []string
	for part := range strings.SplitSeq(accept, ",") {
		if strings.HasPrefix(strings.TrimSpace(part), "application/json") {
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	if len(keep) == 0 {
		return "application/json"
	}
	return strings.Join(keep, ",")
}

// teeBody hands what it reads to its caller and to copy; a copy that stops reading (a
// decoding error) is dropped, never blocking the caller.
type teeBody struct {
	body io.ReadCloser
	mu   sync.Mutex
	copy *io.PipeWriter
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.body.Read(p)
	t.mu.Lock()
	if n > 0 && t.copy != nil {
		if _, werr := t.copy.Write(p[:n]); werr != nil {
			t.copy = nil
		}
	}
	if err != nil && t.copy != nil {
		_ = t.copy.CloseWithError(err)
		t.copy = nil
	}
	t.mu.Unlock()
	return n, err
}

func (t *teeBody) Close() error {
	t.mu.Lock()
	if t.copy != nil {
		_ = t.copy.CloseWithError(errors.New("closed"))
		t.copy = nil
	}
	t.mu.Unlock()
	return t.body.Close()
}
