package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestAppServiceUserFlow applies the seed sample with kubectl, watches it become Available,
// scales it, changes its image, and deletes it.
func TestAppServiceUserFlow(t *testing.T) {
	ns := env.NamespaceAt(t, "baseline") // the sample's nginx runs as root, as most namespaces allow
	kubectl(t, "apply", "-n", ns, "-f", "config/samples/apps_v1_appservice.yaml")
	waitFor := func(what, jsonpath, want string) {
		t.Helper()
		testenv.Eventually(t, 90*time.Second, func(context.Context) (bool, string) {
			out, err := kubectlErr("get", "-n", ns, what, "-o", "jsonpath="+jsonpath)
			return err == nil && strings.TrimSpace(out) == want, what + " " + jsonpath + " = " + out + ", want " + want
		})
	}
	waitFor("appservice/nginx-app", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	waitFor("appservice/nginx-app", "{.status.ready}", "2/2")
	waitFor("service/nginx-app", "{.spec.ports[0].nodePort}", "30002")

	table := kubectl(t, "get", "-n", ns, "appservices")
	for _, col := range []string{"NAME", "READY", "IMAGE", "AVAILABLE", "AGE", "nginx-app", "2/2", "nginx:1.7.9"} {
		if !strings.Contains(table, col) {
			t.Errorf("kubectl get appservices lacks %q:\n%s", col, table)
		}
	}
	if out := kubectl(t, "get", "-n", ns, "appsvc"); !strings.Contains(out, "nginx-app") {
		t.Errorf("the short name appsvc does not list the AppService:\n%s", out)
	}

	kubectl(t, "patch", "-n", ns, "appservice/nginx-app", "--type=merge", "-p", `{"spec":{"size":3}}`)
	waitFor("deployment/nginx-app", "{.status.availableReplicas}", "3")
	waitFor("appservice/nginx-app", "{.status.ready}", "3/3")

	kubectl(t, "patch", "-n", ns, "appservice/nginx-app", "--type=merge", "-p", `{"spec":{"image":"nginx:1.27"}}`)
	waitFor("deployment/nginx-app", "{.spec.template.spec.containers[0].image}", "nginx:1.27")
	waitFor("appservice/nginx-app", `{.status.conditions[?(@.type=="Progressing")].status}`, "False")

	kubectl(t, "delete", "-n", ns, "appservice/nginx-app", "--wait=true")
	testenv.Eventually(t, 90*time.Second, func(context.Context) (bool, string) {
		out, _ := kubectlErr("get", "-n", ns, "deployments,services", "-o", "name")
		return strings.TrimSpace(out) == "", "children left: " + out
	})
}

// TestMetricsNeedAuthorization checks the metrics endpoint is served over HTTPS and only to
// callers allowed to GET /metrics.
func TestMetricsNeedAuthorization(t *testing.T) {
	code, _, err := metricsGet("")
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("anonymous GET /metrics = %d, want 401 or 403", code)
	}
	code, body, err := metricsGet(localcluster.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
		t.Errorf("admin GET /metrics = %d, body has reconcile metrics: %v", code, strings.Contains(body, "controller_runtime_reconcile_total"))
	}
}
