package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// root is the repository's top folder.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func read(t *testing.T, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(), page))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func pages(t *testing.T) []string {
	t.Helper()
	p, err := Pages(root())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	fence      = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```\\s*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	notSlug    = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors are the GitHub anchors of a page's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		slug := strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		a := slug
		for i := 1; out[a]; i++ {
			a = slug + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// TestRelativeLinksResolve checks every relative link of README.md and docs/: the file or
// folder exists, and a #fragment names a heading of the Markdown page it points to.
func TestRelativeLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		text := read(t, page)
		prose := inlineCode.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := filepath.Join(root(), filepath.Dir(page), path)
			if path == "" {
				file = filepath.Join(root(), page)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: the link %s points to nothing: %v", page, target, err)
				continue
			}
			if frag != "" && strings.HasSuffix(file, ".md") {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(data))[frag] {
					t.Errorf("%s: the link %s names no heading of %s", page, target, path)
				}
			}
		}
	}
}

// TestEveryPageIsReachable checks that every page under docs/ is linked from README.md or
// from a page linked from it, so a reader can find it.
func TestEveryPageIsReachable(t *testing.T) {
	seen := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		page := queue[0]
		queue = queue[1:]
		prose := inlineCode.ReplaceAllString(fence.ReplaceAllString(read(t, page), ""), "")
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			path, _, _ := strings.Cut(m[1], "#")
			if path == "" || strings.Contains(path, "://") {
				continue
			}
			target := filepath.Clean(filepath.Join(filepath.Dir(page), path))
			if info, err := os.Stat(filepath.Join(root(), target)); err == nil && info.IsDir() {
				entries, _ := os.ReadDir(filepath.Join(root(), target))
				for _, e := range entries {
					if strings.HasSuffix(e.Name(), ".md") && !seen[filepath.Join(target, e.Name())] {
						seen[filepath.Join(target, e.Name())] = true
						queue = append(queue, filepath.Join(target, e.Name()))
					}
				}
				continue
			}
			if strings.HasSuffix(target, ".md") && !seen[target] {
				seen[target] = true
				queue = append(queue, target)
			}
		}
	}
	for _, page := range pages(t) {
		if !seen[page] {
			t.Errorf("%s is not reachable by links from README.md", page)
		}
	}
}

var (
	makeTarget = regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):`)
	makeWord   = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// makeCommands are the make command lines of a page: inline code and code-block lines that
// start with "make ".
func makeCommands(text string) []string {
	var out []string
	for _, b := range Blocks(text) {
		for _, line := range strings.Split(b.Text, "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "make ") {
				out = append(out, line)
			}
		}
	}
	for _, code := range inlineCode.FindAllString(fence.ReplaceAllString(text, ""), -1) {
		if code = strings.Trim(code, "`"); strings.HasPrefix(code, "make ") {
			out = append(out, code)
		}
	}
	return out
}

// TestMakeTargetsExist checks every `make <target>` the pages name is a Makefile target.
func TestMakeTargetsExist(t *testing.T) {
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(read(t, "Makefile"), -1) {
		targets[m[1]] = true
	}
	checked := 0
	for _, page := range pages(t) {
		for _, cmd := range makeCommands(read(t, page)) {
			for _, word := range strings.Fields(cmd)[1:] {
				if !makeWord.MatchString(word) {
					break // a variable (IMG=...), a comment, or the end of the command
				}
				checked++
				if !targets[word] {
					t.Errorf("%s: `%s` names the target %s, which the Makefile lacks", page, cmd, word)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d make targets found in the docs: the parser is broken", checked)
	}
}

var (
	helpFlag  = regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`)
	docFlag   = regexp.MustCompile("`--([a-z0-9-]+)")
	tableFlag = regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)`")
)

// TestConfigurationPageNamesEveryFlag builds the operator and checks that
// docs/configuration.md's table lists each flag of its --help, and that every --flag the
// page names is one of them.
func TestConfigurationPageNamesEveryFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 2 with the usage
	var flags []string
	for _, m := range helpFlag.FindAllStringSubmatch(string(help), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) < 20 {
		t.Fatalf("--help lists %d flags: %s", len(flags), help)
	}
	page := read(t, "docs/configuration.md")
	var table []string
	for _, m := range tableFlag.FindAllStringSubmatch(page, -1) {
		table = append(table, m[1])
	}
	for _, f := range flags {
		if !slices.Contains(table, f) {
			t.Errorf("docs/configuration.md's table lacks the flag --%s", f)
		}
	}
	for _, m := range docFlag.FindAllStringSubmatch(page, -1) {
		if !slices.Contains(flags, m[1]) {
			t.Errorf("docs/configuration.md names --%s, which the operator does not have", m[1])
		}
	}
}

var reasonConst = regexp.MustCompile(`Reason[A-Za-z]*\s*=\s*"([A-Za-z]+)"`)

// TestTroubleshootingNamesEveryReason checks every condition reason constant of the
// controllers is explained in docs/troubleshooting.md.
func TestTroubleshootingNamesEveryReason(t *testing.T) {
	page := read(t, "docs/troubleshooting.md")
	found := 0
	for _, dir := range []string{"controllers", "internal"} {
		err := filepath.WalkDir(filepath.Join(root(), dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				for _, m := range reasonConst.FindAllStringSubmatch(sc.Text(), -1) {
					found++
					if !strings.Contains(page, "`"+m[1]+"`") {
						rel, _ := filepath.Rel(root(), path)
						t.Errorf("docs/troubleshooting.md does not explain the reason %s (%s)", m[1], rel)
					}
				}
			}
			return sc.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 30 {
		t.Errorf("found only %d reason constants: the scan is broken", found)
	}
}

// notDecoded are kinds the docs show whose Go types this module does not have.
var notDecoded = map[schema.GroupVersionKind]bool{
	{Group: "kustomize.config.k8s.io", Version: "v1beta1", Kind: "Kustomization"}: true,
	{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}:              true,
}

// TestYAMLExamplesAreKnownObjects checks every YAML example is an object of a kind the
// operator, Kubernetes or OLM defines, and decodes strictly (no unknown or misspelt field)
// into its Go type.
func TestYAMLExamplesAreKnownObjects(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(appsv1api.AddToScheme(scheme))
	utilruntime.Must(redisv1alpha1.AddToScheme(scheme))
	utilruntime.Must(operatorsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(operatorsv1.AddToScheme(scheme))
	examples, err := Examples(root())
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 15 {
		t.Fatalf("found only %d YAML examples", len(examples))
	}
	for _, e := range examples {
		gv, err := schema.ParseGroupVersion(e.APIVersion)
		if err != nil || e.Kind == "" {
			t.Errorf("%s: not an object with apiVersion and kind (%q, %q)", e, e.APIVersion, e.Kind)
			continue
		}
		gvk := gv.WithKind(e.Kind)
		if notDecoded[gvk] {
			continue
		}
		obj, err := scheme.New(gvk)
		if err != nil {
			t.Errorf("%s: %s is not a known kind: %v", e, gvk, err)
			continue
		}
		if err := yaml.UnmarshalStrict(e.Data, obj); err != nil {
			t.Errorf("%s: does not decode into %s: %v", e, gvk, err)
		}
	}
}

// TestSamplesAreShownAsTheyAre checks that an example a page attributes to a file of
// config/samples (naming its path within three lines of the block) shows it unchanged.
func TestSamplesAreShownAsTheyAre(t *testing.T) {
	examples, err := Examples(root())
	if err != nil {
		t.Fatal(err)
	}
	samples, err := filepath.Glob(filepath.Join(root(), "config", "samples", "*_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, s := range samples {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		var sample map[string]any
		if err := yaml.Unmarshal(data, &sample); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root(), s)
		for _, e := range examples {
			var ex map[string]any
			if err := yaml.Unmarshal(e.Data, &ex); err != nil {
				t.Fatal(err)
			}
			if !near(read(t, e.File), rel, e.Line-3, e.End+3) || ex["kind"] != sample["kind"] || !sameName(ex, sample) {
				continue
			}
			compared++
			a, _ := yaml.Marshal(ex)
			b, _ := yaml.Marshal(sample)
			if string(a) != string(b) {
				t.Errorf("%s shows %s differently from the file:\n%s\nwant:\n%s", e, rel, a, b)
			}
		}
	}
	if compared < 3 {
		t.Errorf("only %d examples compared with their samples", compared)
	}
}

// near reports whether s occurs in text between the lines from and to (from 1).
func near(text, s string, from, to int) bool {
	for i, line := range strings.Split(text, "\n") {
		if i+1 >= from && i+1 <= to && strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func sameName(a, b map[string]any) bool {
	ma, _ := a["metadata"].(map[string]any)
	mb, _ := b["metadata"].(map[string]any)
	return ma != nil && mb != nil && ma["name"] == mb["name"]
}
