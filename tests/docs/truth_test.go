package docs

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/caching"
)

// These checks hold the lists the docs give (controllers, kinds, finalizers, labels and
// annotations, condition reasons, API groups, RBAC grants) to what the code and the
// generated manifests say, so a change of the code that leaves a page behind fails here.

// notOperatorCode are the folders under internal/ that are compiled out of the operator as
// it ships (crash points, behind a build tag); the rest of the test machinery lives under
// tests/ (TestShippedCodeImportsNoTestMachinery).
var notOperatorCode = []string{"crashpoint"}

// operatorSources are the operator's Go sources (no tests, no test machinery), by path
// relative to the repository.
func operatorSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{"api", "controllers", "internal"} {
		err := filepath.WalkDir(filepath.Join(root(), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && dir == "internal" && slices.Contains(notOperatorCode, d.Name()) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root(), path)
			out[rel] = string(data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out["main.go"] = read(t, "main.go")
	return out
}

// userPages are the pages a user reads: README.md, CHANGELOG.md and docs/, without the
// dated measurements of docs/development/benchmarks.
func userPages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range append(pages(t), "CHANGELOG.md") {
		if !strings.HasPrefix(p, filepath.Join("docs", "development", "benchmarks")) {
			out = append(out, p)
		}
	}
	return out
}

// rules reads the RBAC rules of a Role or ClusterRole manifest.
func rules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(read(t, file)), &role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return role.Rules
}

var (
	tableRow  = regexp.MustCompile(`(?m)^\|([^|\n]*)\|([^|\n]*)\|`)
	backticks = regexp.MustCompile("`([^`]+)`")
)

// grantsOf reads the first cell of a grants table row, "`a`, `b` (`group`): get, list",
// as its resources and verbs.
func grantsOf(cell string) (resources, verbs []string) {
	names, verbList, ok := strings.Cut(cell, ":")
	if !ok {
		return nil, nil
	}
	for _, m := range backticks.FindAllStringSubmatch(names, -1) {
		if !strings.Contains(m[1], ".") { // a group in parentheses, not a resource
			resources = append(resources, m[1])
		}
	}
	for v := range strings.SplitSeq(verbList, ",") {
		if v = strings.TrimSpace(v); v != "" {
			verbs = append(verbs, v)
		}
	}
	return resources, verbs
}

// TestRBACTableMatchesTheRole: docs/security.md's grants table names, in its manager-role
// rows, every resource and verb of config/rbac/role.yaml (generated from the markers), and
// nothing the role does not grant.
func TestRBACTableMatchesTheRole(t *testing.T) {
	granted := map[string]bool{}
	for _, r := range rules(t, "config/rbac/role.yaml") {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				granted[res+": "+v] = true
			}
		}
	}
	if len(granted) < 40 {
		t.Fatalf("config/rbac/role.yaml grants %d resource verbs: the parse is broken", len(granted))
	}
	documented := map[string]bool{}
	for _, m := range tableRow.FindAllStringSubmatch(read(t, "docs/security.md"), -1) {
		if strings.TrimSpace(m[2]) != "manager-role" {
			continue
		}
		resources, verbs := grantsOf(m[1])
		for _, res := range resources {
			for _, v := range verbs {
				documented[res+": "+v] = true
			}
		}
	}
	for g := range granted {
		if !documented[g] {
			t.Errorf("config/rbac/role.yaml grants %s; docs/security.md's table has no manager-role row for it", g)
		}
	}
	for g := range documented {
		if !granted[g] {
			t.Errorf("docs/security.md's table says manager-role grants %s; config/rbac/role.yaml does not", g)
		}
	}
}

// TestCompatibilityNamesEveryAPIGroup: docs/compatibility.md's list of the API groups the
// operator uses names every group its RBAC grants something in (the operator's own groups
// aside), with its version.
func TestCompatibilityNamesEveryAPIGroup(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root(), "config", "rbac", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]bool{}
	for _, f := range files {
		rel, _ := filepath.Rel(root(), f)
		text := read(t, rel)
		if !strings.Contains(text, "kind: ClusterRole\n") && !strings.Contains(text, "kind: Role\n") {
			continue
		}
		for _, r := range rules(t, rel) {
			for _, g := range r.APIGroups {
				if !strings.HasSuffix(g, ".middleware-operator.io") {
					groups[g] = true
				}
			}
		}
	}
	if len(groups) < 8 {
		t.Fatalf("the RBAC manifests grant in %d API groups: the parse is broken", len(groups))
	}
	page := read(t, "docs/compatibility.md")
	for g := range groups {
		want := "`" + g + "/v"
		if g == "" {
			want = "`v1`"
		}
		if !strings.Contains(page, want) {
			t.Errorf("the operator is granted access in the API group %q; docs/compatibility.md's list of groups lacks %s...`", g, want)
		}
	}
}

var (
	numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
	countClaim  = regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight|nine|ten|[0-9]+) (controllers|CRDs|finalizers)\b|\b(the only) (finalizer)\b`)
	setup       = regexp.MustCompile(`&[a-z]+\.([A-Za-z]+)Reconciler\{|\b[a-z]+ := &[a-z]+\.([A-Za-z]+)Reconciler\{`)
	finalizer   = regexp.MustCompile(`(?m)^const [A-Za-z]*Finalizer = "([^"]+)"`)
)

// controllerKinds are the kinds whose controllers internal/operator sets up.
func controllerKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	for _, m := range setup.FindAllStringSubmatch(read(t, "internal/operator/operator.go"), -1) {
		kinds = append(kinds, m[1]+m[2])
	}
	return kinds
}

// crdKinds are the kinds of config/crd/bases.
func crdKinds(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(), "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range files {
		var crd struct {
			Spec struct {
				Names struct{ Kind string } `json:"names"`
			} `json:"spec"`
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	return kinds
}

// finalizers are the finalizer constants of the operator's code.
func finalizers(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, src := range operatorSources(t) {
		for _, m := range finalizer.FindAllStringSubmatch(src, -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

// TestCountsMatchTheCode: a page that counts the controllers, the CRDs or the finalizers
// ("five controllers", "three CRDs", "the only finalizer") gives the number the code has;
// docs/architecture.md names each controller, README.md's table and CHANGELOG.md each kind.
func TestCountsMatchTheCode(t *testing.T) {
	controllers, kinds, fins := controllerKinds(t), crdKinds(t), finalizers(t)
	if len(controllers) < 3 || len(kinds) < 3 || len(fins) < 1 {
		t.Fatalf("found %d controllers %v, %d kinds %v, %d finalizers %v: the scan is broken", len(controllers), controllers, len(kinds), kinds, len(fins), fins)
	}
	want := map[string]int{"controllers": len(controllers), "crds": len(kinds), "finalizers": len(fins), "finalizer": len(fins)}
	for _, page := range userPages(t) {
		for i, line := range strings.Split(read(t, page), "\n") {
			for _, m := range countClaim.FindAllStringSubmatch(line, -1) {
				noun, n := strings.ToLower(m[2]), numberWords[strings.ToLower(m[1])]
				if m[3] != "" {
					noun, n = m[4], 1
				}
				if n == 0 {
					n = atoi(m[1])
				}
				if n != want[noun] {
					t.Errorf("%s:%d says %q; the code has %d %s", page, i+1, m[0], want[noun], noun)
				}
			}
		}
	}
	arch := read(t, "docs/architecture.md")
	for _, k := range controllers {
		if !strings.Contains(arch, "**"+k+"**") {
			t.Errorf("docs/architecture.md does not describe the %s controller (a **%s** item)", k, k)
		}
	}
	readme, changelog := read(t, "README.md"), read(t, "CHANGELOG.md")
	for _, k := range kinds {
		if !strings.Contains(readme, "| `"+k+"` |") {
			t.Errorf("README.md's table of kinds lacks %s", k)
		}
		if !strings.Contains(changelog, "`"+k+"`") {
			t.Errorf("CHANGELOG.md never announces %s", k)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

var (
	metadataKey = regexp.MustCompile(`"((?:[a-z0-9-]+\.)*(?:kubernetes\.io|middleware-operator\.io)/[A-Za-z0-9._-]+)"`)
	apiVersion  = regexp.MustCompile(`/v[0-9]+((alpha|beta)[0-9]+)?$`)
	// keyIdentifiers are the constants of Kubernetes' packages the operator names keys by.
	keyIdentifiers = map[string]string{
		"corev1.LabelTopologyZone":              corev1.LabelTopologyZone,
		"corev1.LabelHostname":                  corev1.LabelHostname,
		"appsv1.ControllerRevisionHashLabelKey": appsv1.ControllerRevisionHashLabelKey,
		"appsv1.StatefulSetPodNameLabel":        appsv1.StatefulSetPodNameLabel,
	}
	keyIdentifier = regexp.MustCompile(`\b(?:corev1|appsv1)\.[A-Za-z]*Label[A-Za-z]*\b`)
	docKey        = regexp.MustCompile("`((?:[a-z0-9-]+\\.)*middleware-operator\\.io/[A-Za-z0-9._-]+)")
)

// guardPolicy is the admission guard's policy (config/guard), which reads labels too.
const guardPolicy = "config/guard/guard.yaml"

var guardKey = regexp.MustCompile(`'((?:[a-z0-9-]+\.)*middleware-operator\.io/[A-Za-z0-9._-]+)'`)

// codeKeys are the label, annotation and finalizer keys the operator's code and its
// admission guard name, and the files naming them.
func codeKeys(t *testing.T) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, m := range guardKey.FindAllStringSubmatch(read(t, guardPolicy), -1) {
		keys[m[1]] = guardPolicy
	}
	for path, src := range operatorSources(t) {
		for _, m := range metadataKey.FindAllStringSubmatch(src, -1) {
			if !apiVersion.MatchString(m[1]) {
				keys[m[1]] = path
			}
		}
		for _, id := range keyIdentifier.FindAllString(src, -1) {
			value, ok := keyIdentifiers[id]
			if !ok {
				t.Errorf("%s names the key %s, which this test does not know: add it to keyIdentifiers", path, id)
				continue
			}
			keys[value] = path
		}
	}
	return keys
}

// TestLabelsAndAnnotationsPageListsEveryKey: docs/labels-and-annotations.md lists every
// label, annotation and finalizer key the operator's code names, and only those; and no
// page names a middleware-operator.io key that the code does not have (an annotation
// renamed in the code and not in the docs).
func TestLabelsAndAnnotationsPageListsEveryKey(t *testing.T) {
	keys := codeKeys(t)
	if len(keys) < 15 {
		t.Fatalf("found %d keys in the code: the scan is broken: %v", len(keys), keys)
	}
	page := read(t, "docs/labels-and-annotations.md")
	listed := map[string]bool{}
	for _, m := range tableRow.FindAllStringSubmatch(page, -1) {
		if k := backticks.FindStringSubmatch(m[1]); k != nil {
			listed[k[1]] = true
		}
	}
	for k, path := range keys {
		if !listed[k] {
			t.Errorf("%s names the key %s; docs/labels-and-annotations.md does not list it", path, k)
		}
	}
	sources := strings.Join(append(mapValues(operatorSources(t)), read(t, guardPolicy)), "\n")
	for k := range listed {
		if _, ok := keys[k]; !ok && !strings.Contains(sources, `"`+k+`"`) && !strings.Contains(sources, `'`+k+`'`) {
			t.Errorf("docs/labels-and-annotations.md lists %s, which the operator's code never names", k)
		}
	}
	for _, p := range userPages(t) {
		for _, m := range docKey.FindAllStringSubmatch(read(t, p), -1) {
			if _, ok := keys[m[1]]; !ok && !apiVersion.MatchString(m[1]) {
				t.Errorf("%s names %s, which is no key of the operator's code", p, m[1])
			}
		}
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// reasonTablePages are the pages whose tables headed "reason" explain condition reasons.
var reasonTablePages = []string{"docs/troubleshooting.md", "docs/backup.md", "docs/recovery.md"}

// TestReasonTablesNameReasonsOfTheCode: each reason the reason tables explain is one the
// code can set (a string the operator's code has), so a reason removed or renamed in the
// code, or one the docs invent, fails here; TestTroubleshootingNamesEveryReason checks the
// other way.
func TestReasonTablesNameReasonsOfTheCode(t *testing.T) {
	sources := strings.Join(mapValues(operatorSources(t)), "\n")
	checked := 0
	for _, p := range reasonTablePages {
		inReasons := false
		for line := range strings.SplitSeq(read(t, p), "\n") {
			cells := strings.Split(line, "|")
			switch {
			case len(cells) < 3:
				inReasons = false
				continue
			case strings.EqualFold(strings.TrimSpace(cells[1]), "reason"):
				inReasons = true
				continue
			case !inReasons:
				continue
			}
			for _, m := range backticks.FindAllStringSubmatch(cells[1], -1) {
				checked++
				if !strings.Contains(sources, `"`+m[1]+`"`) {
					t.Errorf("%s explains the reason %s, which the operator's code never sets", p, m[1])
				}
			}
		}
	}
	if checked < 40 {
		t.Errorf("checked only %d reasons: the table scan is broken", checked)
	}
}

// cachedWords are how docs/architecture.md names each kind the cache holds.
var cachedWords = map[string]string{
	"Deployment": "Deployments", "StatefulSet": "StatefulSets", "Service": "Services", "ConfigMap": "ConfigMaps",
	"Secret": "Secrets", "PodDisruptionBudget": "PDBs", "NetworkPolicy": "NetworkPolicies", "Pod": "pods",
	"PersistentVolumeClaim": "claims",
}

var notCached = regexp.MustCompile(`(?i)\b([A-Za-z]+) are not cached\b|\bnot cached: ([A-Za-z]+)`)

// TestArchitectureNamesWhatIsCached: docs/architecture.md names every kind of child the
// operator's cache holds (internal/caching.Owned), and no page says one of them is not
// cached.
func TestArchitectureNamesWhatIsCached(t *testing.T) {
	arch := read(t, "docs/architecture.md")
	cached := map[string]bool{}
	for obj := range caching.Owned() {
		kind := reflect.TypeOf(obj).Elem().Name()
		word, ok := cachedWords[kind]
		if !ok {
			t.Errorf("the cache holds %s, which this test has no word for: add it to cachedWords", kind)
			continue
		}
		cached[strings.ToLower(word)] = true
		if !strings.Contains(arch, word) {
			t.Errorf("the operator caches %s; docs/architecture.md never names %s", kind, word)
		}
	}
	for _, p := range userPages(t) {
		for i, line := range strings.Split(read(t, p), "\n") {
			for _, m := range notCached.FindAllStringSubmatch(line, -1) {
				if cached[strings.ToLower(m[1]+m[2])] {
					t.Errorf("%s:%d says %q; internal/caching caches them", p, i+1, m[0])
				}
			}
		}
	}
}

// TestShippedCodeImportsNoTestMachinery: neither the operator nor the kubectl plugin links
// a package of the tests/ tree (the local cluster, its pod runner, test stores and servers):
// `go list -deps` of both names none.
func TestShippedCodeImportsNoTestMachinery(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "../..", "../../cmd/kubectl-middleware").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	const module = "github.com/middleware-operator/middleware-operator/"
	var ours int
	for _, d := range deps {
		if !strings.HasPrefix(d, module) {
			continue
		}
		ours++
		if strings.HasPrefix(d, module+"tests/") {
			t.Errorf("shipped code links the test machinery package %s", d)
		}
	}
	if ours < 10 {
		t.Fatalf("go list -deps named %d of the module's packages, want the operator's (%v)", ours, deps)
	}
}

// TestSourceLayoutNamesEveryPackage: docs/architecture.md's source layout lists every
// package of the operator (api/, controllers/, internal/ folders with Go code) by its path,
// and every folder it lists exists: a package moved or added without the page fails here.
func TestSourceLayoutNamesEveryPackage(t *testing.T) {
	page := read(t, "docs/architecture.md")
	_, layout, ok := strings.Cut(page, "## Source layout")
	if !ok {
		t.Fatal("docs/architecture.md has no Source layout section")
	}
	listed := map[string]bool{}
	for line := range strings.SplitSeq(layout, "\n") {
		first, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.HasSuffix(first, "/") && (strings.HasPrefix(first, "api/") || strings.HasPrefix(first, "controllers/") || strings.HasPrefix(first, "internal/")) {
			listed[strings.TrimSuffix(first, "/")] = true
		}
	}
	packages := map[string]bool{}
	for path := range operatorSources(t) {
		if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." { // main.go, listed as a file
			packages[dir] = true
		}
	}
	for _, dir := range []string{"internal/crashpoint"} { // compiled out of the operator, listed all the same
		packages[dir] = true
	}
	for p := range packages {
		if !listed[p] {
			t.Errorf("docs/architecture.md's source layout does not list the package %s/", p)
		}
	}
	for p := range listed {
		if !packages[p] {
			t.Errorf("docs/architecture.md's source layout lists %s/, which holds no package of the operator", p)
		}
	}
	if len(packages) < 20 {
		t.Errorf("found only %d packages: the scan is broken", len(packages))
	}
}
