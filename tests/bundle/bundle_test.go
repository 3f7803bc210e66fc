package bundle

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	scorecardv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// The package, its channel and the bundles of the channel, oldest first. The current bundle
// replaces the newest one in bundle-history/.
const (
	packageName = "middleware-operator"
	channel     = "stable"
)

var bundleDirs = []string{"bundle-history/0.0.9", "bundle"}

// repoRoot is the repository's top folder.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func loadBundle(t *testing.T, dir string) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(filepath.Join(repoRoot(), dir))
	if err != nil {
		t.Fatalf("while loading the bundle %s: %v", dir, err)
	}
	if b.CSV == nil {
		t.Fatalf("the bundle %s has no ClusterServiceVersion", dir)
	}
	return b
}

// TestBundlesValidate runs the default bundle validators and the operatorframework suite
// (OperatorHub, standard capabilities and categories, deprecated APIs, good practices) on
// every bundle of the channel, as `make bundle-validate` does: no error and no warning.
func TestBundlesValidate(t *testing.T) {
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.ObjectValidator,
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.AlphaDeprecatedAPIsValidator,
		validation.GoodPracticesValidator,
	)
	for _, dir := range bundleDirs {
		t.Run(dir, func(t *testing.T) {
			b := loadBundle(t, dir)
			objs := b.ObjectsToValidate()
			for _, o := range b.Objects {
				objs = append(objs, o)
			}
			objs = append(objs, map[string]string{})
			for _, result := range validators.Validate(objs...) {
				for _, e := range result.Errors {
					t.Errorf("%s: error: %s", result.Name, e)
				}
				for _, w := range result.Warnings {
					t.Errorf("%s: warning: %s", result.Name, w)
				}
			}
		})
	}
}

// TestBundleMetadata checks metadata/annotations.yaml of every bundle and that bundle.Dockerfile
// labels the image as the current bundle's annotations say.
func TestBundleMetadata(t *testing.T) {
	for _, dir := range bundleDirs {
		t.Run(dir, func(t *testing.T) {
			annotations := readAnnotations(t, filepath.Join(repoRoot(), dir, "metadata", "annotations.yaml"))
			want := map[string]string{
				"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
				"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
				"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
				"operators.operatorframework.io.bundle.package.v1":         packageName,
				"operators.operatorframework.io.bundle.channels.v1":        channel,
				"operators.operatorframework.io.bundle.channel.default.v1": channel,
				"operators.operatorframework.io.test.config.v1":            "tests/scorecard/",
			}
			for k, v := range want {
				if annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, annotations[k], v)
				}
			}
		})
	}

	annotations := readAnnotations(t, filepath.Join(repoRoot(), "bundle", "metadata", "annotations.yaml"))
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot(), "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^LABEL (\S+)=(\S+)$`).FindAllStringSubmatch(string(dockerfile), -1) {
		labels[m[1]] = m[2]
	}
	for k, v := range annotations {
		if labels[k] != v {
			t.Errorf("bundle.Dockerfile: LABEL %s=%q, want %q as in annotations.yaml", k, labels[k], v)
		}
	}
	for _, copied := range []string{"COPY bundle/manifests /manifests/", "COPY bundle/metadata /metadata/", "COPY bundle/tests/scorecard /tests/scorecard/"} {
		if !strings.Contains(string(dockerfile), copied) {
			t.Errorf("bundle.Dockerfile lacks %q", copied)
		}
	}
}

func readAnnotations(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("while parsing %s: %v", path, err)
	}
	return doc.Annotations
}

// TestDescriptors makes the checks of the scorecard's olm-spec-descriptors and
// olm-status-descriptors tests, and more: every kind has an example in alm-examples, and every
// top-level spec and status field of every CRD (not only those in the examples) has a
// descriptor, so a field added without a +operator-sdk:csv marker fails here.
func TestDescriptors(t *testing.T) {
	b := loadBundle(t, "bundle")
	owned := map[string]operatorsv1alpha1.CRDDescription{}
	for _, d := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		owned[d.Kind] = d
	}

	var examples []struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples is not a JSON list of objects: %v", err)
	}
	exampled := map[string]bool{}
	for _, ex := range examples {
		exampled[ex.Kind] = true
		d, ok := owned[ex.Kind]
		if !ok {
			t.Errorf("alm-examples has a %s, which the CSV does not own", ex.Kind)
			continue
		}
		for field := range ex.Spec {
			if !slices.ContainsFunc(d.SpecDescriptors, func(s operatorsv1alpha1.SpecDescriptor) bool { return s.Path == field }) {
				t.Errorf("the %s example sets spec.%s, which has no spec descriptor", ex.Kind, field)
			}
		}
	}

	for _, crd := range b.V1CRDs {
		kind := crd.Spec.Names.Kind
		d, ok := owned[kind]
		if !ok {
			t.Errorf("the CSV does not own the CRD %s", crd.Name)
			continue
		}
		if !exampled[kind] {
			t.Errorf("alm-examples has no %s", kind)
		}
		if len(d.Resources) == 0 {
			t.Errorf("the CSV lists no resources for %s (olm-crds-have-resources)", kind)
		}
		if d.Description == "" || d.DisplayName == "" {
			t.Errorf("%s has no description or display name in the CSV", kind)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != d.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			props := v.Schema.OpenAPIV3Schema.Properties
			for field := range props["spec"].Properties {
				if !slices.ContainsFunc(d.SpecDescriptors, func(s operatorsv1alpha1.SpecDescriptor) bool { return s.Path == field }) {
					t.Errorf("%s spec.%s has no spec descriptor: add a +operator-sdk:csv:customresourcedefinitions:type=spec marker and run make bundle", kind, field)
				}
			}
			for field := range props["status"].Properties {
				if field == "observedGeneration" {
					continue // bookkeeping, not shown to users
				}
				if !slices.ContainsFunc(d.StatusDescriptors, func(s operatorsv1alpha1.StatusDescriptor) bool { return s.Path == field }) {
					t.Errorf("%s status.%s has no status descriptor: add a +operator-sdk:csv:customresourcedefinitions:type=status marker and run make bundle", kind, field)
				}
			}
		}
	}
}

// TestCSVInstall checks what OLM needs to install and run the operator in every install
// mode: all four modes supported, WATCH_NAMESPACE from olm.targetNamespaces, resource
// requests and limits, no volume (OLM would not provide its contents), and related images.
func TestCSVInstall(t *testing.T) {
	b := loadBundle(t, "bundle")
	csv := b.CSV
	for _, mode := range []operatorsv1alpha1.InstallModeType{
		operatorsv1alpha1.InstallModeTypeOwnNamespace, operatorsv1alpha1.InstallModeTypeSingleNamespace,
		operatorsv1alpha1.InstallModeTypeMultiNamespace, operatorsv1alpha1.InstallModeTypeAllNamespaces,
	} {
		if !slices.Contains(csv.Spec.InstallModes, operatorsv1alpha1.InstallMode{Type: mode, Supported: true}) {
			t.Errorf("install mode %s is not supported", mode)
		}
	}
	for _, field := range []struct{ name, value string }{
		{"description", csv.Spec.Description}, {"displayName", csv.Spec.DisplayName},
		{"maturity", csv.Spec.Maturity}, {"minKubeVersion", csv.Spec.MinKubeVersion},
		{"provider.name", csv.Spec.Provider.Name}, {"capabilities", csv.Annotations["capabilities"]},
		{"categories", csv.Annotations["categories"]}, {"containerImage", csv.Annotations["containerImage"]},
	} {
		if field.value == "" {
			t.Errorf("the CSV has no %s", field.name)
		}
	}
	if len(csv.Spec.Icon) == 0 || len(csv.Spec.Keywords) == 0 || len(csv.Spec.Links) == 0 || len(csv.Spec.Maintainers) == 0 {
		t.Errorf("the CSV lacks an icon, keywords, links or maintainers")
	}

	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(deployments) != 1 {
		t.Fatalf("the CSV has %d deployments, want 1", len(deployments))
	}
	for k, v := range resources.OperatorPodLabels() {
		// A RedisCluster's NetworkPolicy admits the operator's pods by these labels.
		if got := deployments[0].Spec.Template.Labels[k]; got != v {
			t.Errorf("the operator's pods have %s=%q, want %q (resources.OperatorPodLabels)", k, got, v)
		}
	}
	pod := deployments[0].Spec.Template.Spec
	if len(pod.Volumes) != 0 {
		t.Errorf("the operator's pod has volumes %v: under OLM nothing provides their contents", pod.Volumes)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("the operator's pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("the manager container lacks CPU/memory requests or a memory limit: %v", c.Resources)
	}
	if c.Image != csv.Annotations["containerImage"] {
		t.Errorf("the manager runs %s but the containerImage annotation says %s", c.Image, csv.Annotations["containerImage"])
	}
	watch := envVar(c.Env, "WATCH_NAMESPACE")
	if watch == nil || watch.ValueFrom == nil || watch.ValueFrom.FieldRef == nil ||
		watch.ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
		t.Errorf("WATCH_NAMESPACE is %+v, want it from the pod's olm.targetNamespaces annotation", watch)
	}
	for _, arg := range c.Args {
		if strings.Contains(arg, "cert") || strings.Contains(arg, "kubeconfig") {
			t.Errorf("the manager has the argument %q, which needs a file OLM does not provide", arg)
		}
	}

	images := map[string]string{}
	for _, ri := range csv.Spec.RelatedImages {
		images[ri.Name] = ri.Image
	}
	if images["middleware-operator"] != c.Image {
		t.Errorf("relatedImages middleware-operator = %q, want the operator's image %q", images["middleware-operator"], c.Image)
	}
	for _, name := range []string{"redis", "redis-exporter"} {
		if images[name] == "" {
			t.Errorf("relatedImages has no %s", name)
		}
	}
}

func envVar(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}

// TestScorecard runs `make scorecard` (the scorecard-test program on bundle/) and checks the
// six basic and OLM tests of bundle/tests/scorecard/config.yaml all ran and passed.
func TestScorecard(t *testing.T) {
	cmd := exec.Command(testenv.Tool(t, "scorecard"), "-o", "json", filepath.Join(repoRoot(), "bundle"))
	out, err := cmd.Output()
	var list scorecardv1alpha3.TestList
	if jsonErr := json.Unmarshal(out, &list); jsonErr != nil {
		t.Fatalf("scorecard: %v, output not a TestList: %v\n%s", err, jsonErr, out)
	}
	passed := map[string]bool{}
	for _, test := range list.Items {
		for _, r := range test.Status.Results {
			passed[r.Name] = r.State == scorecardv1alpha3.PassState
			if r.State != scorecardv1alpha3.PassState {
				t.Errorf("scorecard test %s: %s, errors %v, suggestions %v", r.Name, r.State, r.Errors, r.Suggestions)
			}
		}
	}
	for _, name := range []string{"basic-check-spec", "olm-bundle-validation", "olm-crds-have-validation",
		"olm-crds-have-resources", "olm-spec-descriptors", "olm-status-descriptors"} {
		if _, ran := passed[name]; !ran {
			t.Errorf("scorecard test %s did not run", name)
		}
	}
	if err != nil && !t.Failed() {
		t.Errorf("scorecard: %v", err)
	}
}

// TestUpgradeChain checks that each bundle replaces the one before it, with growing versions,
// and that the catalog's channel has those edges; opm validate checks the rest of the catalog.
func TestUpgradeChain(t *testing.T) {
	var names []string
	for i, dir := range bundleDirs {
		csv := loadBundle(t, dir).CSV
		names = append(names, csv.Name)
		if want := fmt.Sprintf("%s.v%s", packageName, csv.Spec.Version.String()); csv.Name != want {
			t.Errorf("%s: the CSV is named %s, want %s", dir, csv.Name, want)
		}
		switch {
		case i == 0 && csv.Spec.Replaces != "":
			t.Errorf("%s: the oldest bundle replaces %s", dir, csv.Spec.Replaces)
		case i > 0 && csv.Spec.Replaces != names[i-1]:
			t.Errorf("%s: replaces %q, want %q", dir, csv.Spec.Replaces, names[i-1])
		}
	}

	data, err := os.ReadFile(filepath.Join(repoRoot(), "catalog", packageName, "channel-"+channel+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ch struct {
		Schema  string `json:"schema"`
		Package string `json:"package"`
		Entries []struct {
			Name     string `json:"name"`
			Replaces string `json:"replaces"`
		} `json:"entries"`
	}
	if err := yaml.Unmarshal(data, &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Schema != "olm.channel" || ch.Package != packageName || len(ch.Entries) != len(names) {
		t.Fatalf("the catalog's channel %s is %+v, want the %d bundles %v", channel, ch, len(names), names)
	}
	for i, e := range ch.Entries {
		want := ""
		if i > 0 {
			want = names[i-1]
		}
		if e.Name != names[i] || e.Replaces != want {
			t.Errorf("channel entry %d is %s replacing %q, want %s replacing %q", i, e.Name, e.Replaces, names[i], want)
		}
	}

	if out, err := exec.Command(testenv.Tool(t, "opm"), "validate", filepath.Join(repoRoot(), "catalog")).CombinedOutput(); err != nil {
		t.Errorf("opm validate catalog: %v\n%s", err, out)
	}
}

// TestBundleObjects checks that manifests/ holds what OLM installs from a bundle: the CSV,
// every CRD of config/crd/bases, the metrics Service and the metrics-reader ClusterRole, and
// nothing of a kind a registry+v1 bundle cannot carry.
func TestBundleObjects(t *testing.T) {
	b := loadBundle(t, "bundle")
	supported := []string{"ClusterServiceVersion", "CustomResourceDefinition", "Secret", "ClusterRole",
		"ClusterRoleBinding", "ConfigMap", "ServiceAccount", "Service", "Role", "RoleBinding",
		"PrometheusRule", "ServiceMonitor", "PodDisruptionBudget", "PriorityClass", "VerticalPodAutoscaler",
		"ConsoleYAMLSample", "ConsoleQuickStart", "ConsoleCLIDownload", "ConsoleLink", "NetworkPolicy"}
	got := map[string]bool{}
	for _, o := range b.Objects {
		got[o.GetKind()+"/"+o.GetName()] = true
		if !slices.Contains(supported, o.GetKind()) {
			t.Errorf("%s %s: a registry+v1 bundle cannot carry this kind", o.GetKind(), o.GetName())
		}
		if o.GetNamespace() != "" && o.GetKind() != "ClusterServiceVersion" { // operator-sdk's "placeholder"
			t.Errorf("%s %s has the namespace %s: OLM installs it into the operator's namespace", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	want := []string{
		"ClusterRole/middleware-operator-metrics-reader",
		"Service/middleware-operator-controller-manager-metrics-service",
	}
	files, err := filepath.Glob(filepath.Join(repoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, f := range files {
		// controller-gen names each file <group>_<plural>.yaml; the CRD is <plural>.<group>.
		group, plural, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".yaml"), "_")
		want = append(want, "CustomResourceDefinition/"+plural+"."+group)
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("bundle/manifests has no %s (run make bundle)", w)
		}
	}
}

// clusterScopedGrants are the only grants the CSV's clusterPermissions may hold, and why:
// everything else the operator does is namespaced and belongs in permissions, which OLM
// grants in the OperatorGroup's target namespaces only.
var clusterScopedGrants = map[string]string{
	"create selfsubjectaccessreviews.authorization.k8s.io": "asks whether the operator may manage NetworkPolicies (config/rbac/cluster_role.yaml)",
	"create tokenreviews.authentication.k8s.io":            "authenticates callers of the metrics endpoint (metrics_auth_role.yaml)",
	"create subjectaccessreviews.authorization.k8s.io":     "authorizes callers of the metrics endpoint (metrics_auth_role.yaml)",
}

// clusterScoped are cluster-scoped resources a rule in permissions could name by mistake: a
// Role cannot grant them, so such a rule would silently grant nothing.
var clusterScoped = []string{"nodes", "namespaces", "persistentvolumes", "customresourcedefinitions", "clusterroles",
	"clusterrolebindings", "storageclasses", "selfsubjectaccessreviews", "subjectaccessreviews", "tokenreviews",
	"certificatesigningrequests", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "apiservices"}

// TestCSVPermissionsScoped checks the split of the operator's grants (docs/security.md): the
// namespaced rules in permissions, the three cluster-scoped grants alone in
// clusterPermissions, and no deletecollection or wildcard anywhere.
func TestCSVPermissionsScoped(t *testing.T) {
	csv := loadBundle(t, "bundle").CSV
	spec := csv.Spec.InstallStrategy.StrategySpec
	each := func(perms []operatorsv1alpha1.StrategyDeploymentPermissions, f func(grant, resource, verb string)) {
		for _, p := range perms {
			for _, rule := range p.Rules {
				for _, group := range rule.APIGroups {
					for _, resource := range rule.Resources {
						for _, verb := range rule.Verbs {
							g := strings.TrimSuffix(fmt.Sprintf("%s %s.%s", verb, resource, group), ".")
							f(g, resource, verb)
						}
					}
				}
			}
		}
	}
	check := func(grant, resource, verb string) {
		if verb == "*" || resource == "*" || verb == "deletecollection" {
			t.Errorf("the CSV grants %s: name each verb and resource the operator uses, and no deletecollection", grant)
		}
	}
	each(spec.ClusterPermissions, func(grant, resource, verb string) {
		check(grant, resource, verb)
		if clusterScopedGrants[grant] == "" {
			t.Errorf("clusterPermissions grants %s: namespaced rules belong in permissions (a RoleBinding in config/components/namespaced), a new cluster-scoped one in clusterScopedGrants with its reason", grant)
		}
	})
	namespaced := map[string]bool{}
	each(spec.Permissions, func(grant, resource, verb string) {
		check(grant, resource, verb)
		namespaced[grant] = true
		if slices.Contains(clusterScoped, strings.Split(resource, "/")[0]) {
			t.Errorf("permissions grants %s, a cluster-scoped resource a Role cannot grant: put it in config/rbac/cluster_role.yaml", grant)
		}
	})
	for _, want := range []string{"get secrets", "list secrets", "create statefulsets.apps", "list redisclusters.redis.middleware-operator.io", "update leases.coordination.k8s.io"} {
		if !namespaced[want] {
			t.Errorf("permissions lacks %s", want)
		}
	}
}
