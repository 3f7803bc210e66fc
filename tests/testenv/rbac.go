package testenv

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// Grant is one verb on one resource of one API group ("" for the core group); Resource may
// name a subresource as "redisclusters/status".
type Grant struct{ Group, Resource, Verb string }

func (g Grant) String() string { return fmt.Sprintf("%s %s.%s", g.Verb, g.Resource, g.Group) }

// RequestLog records the grant each request through a wrapped transport needs.
type RequestLog struct {
	mu   sync.Mutex
	seen map[Grant]int
}

// Wrap is a rest.Config WrapTransport that records every request.
func (l *RequestLog) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if g, ok := GrantOf(req.Method, req.URL.Path, req.URL.Query().Get("watch")); ok {
			l.mu.Lock()
			if l.seen == nil {
				l.seen = map[Grant]int{}
			}
			l.seen[g]++
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// Used is the set of grants the recorded requests needed.
func (l *RequestLog) Used() map[Grant]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[Grant]int, len(l.seen))
	for g, n := range l.seen {
		out[g] = n
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// GrantOf is the grant a request to the API server needs, as the API server's authorizer
// derives it from the method and path; false for discovery and other non-resource paths.
func GrantOf(method, path, watch string) (Grant, bool) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(seg) >= 3 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		group, seg = seg[1], seg[3:]
	default:
		return Grant{}, false
	}
	if len(seg) >= 3 && seg[0] == "namespaces" {
		seg = seg[2:] // a namespaced resource
	}
	resource, name := seg[0], ""
	if len(seg) > 1 {
		name = seg[1]
	}
	if len(seg) > 2 {
		resource += "/" + seg[2]
	}
	var verb string
	switch method {
	case http.MethodGet:
		switch {
		case name != "":
			verb = "get"
		case watch == "true" || watch == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if name == "" {
			verb = "deletecollection"
		}
	default:
		return Grant{}, false
	}
	return Grant{group, resource, verb}, true
}

var rbacMarker = regexp.MustCompile(`\+kubebuilder:rbac:groups=([^,]*),resources=([^,]+),verbs=(\S+)`)

// GrantsOf are the grants the kubebuilder RBAC markers of the files (relative to the
// repository root) ask for.
func GrantsOf(files ...string) ([]Grant, error) {
	var out []Grant
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(RepoRoot(), f))
		if err != nil {
			return nil, err
		}
		for _, m := range rbacMarker.FindAllStringSubmatch(string(b), -1) {
			group := strings.Trim(m[1], `"`)
			for _, r := range strings.Split(m[2], ";") {
				for _, v := range strings.Split(m[3], ";") {
					if g := (Grant{group, r, v}); !slices.Contains(out, g) {
						out = append(out, g)
					}
				}
			}
		}
	}
	return out, nil
}

// ClusterRoleFile is the operator's ClusterRole of grants on cluster-scoped resources.
const ClusterRoleFile = "config/rbac/cluster_role.yaml"

// RoleGrants are the grants of the rules of a Role or ClusterRole file (relative to the
// repository root).
func RoleGrants(file string) ([]Grant, error) {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), file))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		return nil, fmt.Errorf("while reading %s: %w", file, err)
	}
	var out []Grant
	for _, rule := range role.Rules {
		for _, group := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, v := range rule.Verbs {
					out = append(out, Grant{group, r, v})
				}
			}
		}
	}
	return out, nil
}

// CheckGrants compares the grants the markers give with the ones the requests used: it
// returns the grants never used (except the ones in mayBeUnused, each of which the caller
// says why) and the requests no grant allows.
func CheckGrants(granted []Grant, used map[Grant]int, mayBeUnused map[Grant]string) (unused, missing []string) {
	have := map[Grant]bool{}
	for _, g := range granted {
		have[g] = true
		// An informer starts with a streaming watch (client-go's WatchListClient) where the
		// API server serves one, and with a LIST where it does not: its list grant is used
		// whenever its watch is.
		if g.Verb == "list" && used[Grant{g.Group, g.Resource, "watch"}] > 0 {
			continue
		}
		if used[g] == 0 && mayBeUnused[g] == "" {
			unused = append(unused, g.String())
		}
	}
	for g := range used {
		if !have[g] {
			missing = append(missing, g.String())
		}
	}
	slices.Sort(unused)
	slices.Sort(missing)
	return unused, missing
}

// CheckManagerGrants is for a TestMain after m.Run: when every test of the package ran and
// passed, it compares the grants the RBAC markers of files give with the requests of the
// package's managers, prints what is granted and never used or used and never granted, and
// returns the exit code (code, or 1 on a finding).
func (e *Env) CheckManagerGrants(code int, mayBeUnused map[Grant]string, files ...string) int {
	if code != 0 || flag.Lookup("test.run").Value.String() != "" || flag.Lookup("test.skip").Value.String() != "" {
		return code // only the whole package's requests show what is used
	}
	granted, err := GrantsOf(files...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "RBAC markers:", err)
		return 1
	}
	// The operator's namespaced role is the union of every controller's markers.
	all, _ := filepath.Glob(filepath.Join(RepoRoot(), "controllers", "*", "*_controller.go"))
	for i := range all {
		all[i], _ = filepath.Rel(RepoRoot(), all[i])
	}
	role, err := GrantsOf(all...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "RBAC markers:", err)
		return 1
	}
	// Its grants on cluster-scoped resources are no markers: they are bound cluster-wide.
	cluster, err := RoleGrants(ClusterRoleFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "RBAC:", err)
		return 1
	}
	role = append(role, cluster...)
	used := e.ManagerRequests.Used()
	unused, _ := CheckGrants(granted, used, mayBeUnused)
	_, missing := CheckGrants(role, used, nil)
	if len(unused) > 0 {
		fmt.Fprintf(os.Stderr, "RBAC: granted by the markers of %v but never used by the tests' requests (remove them, or say in mayBeUnused why they are needed): %v\n", files, unused)
		code = 1
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "RBAC: requested by the operator but granted by no marker of %v: %v\n", files, missing)
		code = 1
	}
	if code == 0 {
		fmt.Fprintf(os.Stderr, "RBAC: every one of the %d grants of %v was used or is explained\n", len(granted), files)
	}
	return code
}
