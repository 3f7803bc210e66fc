package docs

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	plannerList = regexp.MustCompile(`(?s)for _, plan := range \[\]func\([^)]*\) \(Step, bool\)\{(.*?)\} \{`)
	stepKind    = regexp.MustCompile(`\bStep[A-Za-z]+\s+StepKind = "([A-Za-z]+)"`)
	stepsRow    = regexp.MustCompile("(?m)^\\| [^|]* \\| (?:`([A-Za-z]+)`[^|]*)?\\| ([^|]*) \\|")
	backticked  = regexp.MustCompile("`([A-Za-z]+)`")
)

// plannerOrder reads NextStep's ordered list of planners and every StepKind value from the
// operator's code, wherever the planner lives.
func plannerOrder(t *testing.T) (planners, kinds []string) {
	t.Helper()
	for path, src := range operatorSources(t) {
		if m := plannerList.FindStringSubmatch(src); m != nil && strings.Contains(src, "func NextStep(") {
			for _, name := range strings.Split(m[1], ",") {
				if name = strings.TrimSpace(name); name != "" {
					planners = append(planners, name)
				}
			}
			t.Logf("NextStep's planners, from %s: %v", path, planners)
		}
		for _, m := range stepKind.FindAllStringSubmatch(src, -1) {
			kinds = append(kinds, m[1])
		}
	}
	return planners, kinds
}

// TestStepsTableMatchesThePlanner: docs/development/rediscluster-controller.md's table of
// steps lists NextStep's planners in the order the code asks them, and names every step
// kind the code has, so a planner or a step added, removed or moved in the code and not on
// the page fails here.
func TestStepsTableMatchesThePlanner(t *testing.T) {
	planners, kinds := plannerOrder(t)
	if len(planners) < 10 || len(kinds) < 20 {
		t.Fatalf("found %d planners and %d step kinds in the code: the scan is broken", len(planners), len(kinds))
	}
	page := read(t, "docs/development/rediscluster-controller.md")
	_, table, _ := strings.Cut(page, "## The steps")
	table, _, _ = strings.Cut(table, "\n## ")
	var documented []string
	named := map[string]bool{}
	for _, m := range stepsRow.FindAllStringSubmatch(table, -1) {
		if m[1] != "" {
			documented = append(documented, m[1])
		}
		for _, k := range backticked.FindAllStringSubmatch(m[2], -1) {
			named[k[1]] = true
		}
	}
	// planRotate is NextStep's closure over planRotation's result.
	want := slices.Clone(planners)
	for i, p := range want {
		if p == "planRotate" {
			want[i] = "planRotation"
		}
	}
	var inOrder []string
	for _, d := range documented {
		if slices.Contains(want, d) {
			inOrder = append(inOrder, d)
		}
	}
	if !slices.Equal(inOrder, want) {
		t.Errorf("the steps table lists the planners %v; NextStep asks %v in this order", inOrder, want)
	}
	for _, k := range kinds {
		if !named[k] {
			t.Errorf("the steps table names no step %s (a StepKind of the code)", k)
		}
	}
	for k := range named {
		if !slices.Contains(kinds, k) {
			t.Errorf("the steps table names a step %s that the code does not have", k)
		}
	}
}
