package resources

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

func TestSecurityContextsFillOnlyWhatTheUserLeftUnset(t *testing.T) {
	localhost := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")}
	cases := map[string]struct {
		in          appsv1api.Security
		wantSeccomp corev1.SeccompProfileType
		wantEscal   bool
		wantNonRoot bool
	}{
		"unset":                   {wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault},
		"non-root, nothing else":  {in: appsv1api.Security{PodSecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}}, wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault, wantNonRoot: true},
		"the user's own profile":  {in: appsv1api.Security{PodSecurityContext: &corev1.PodSecurityContext{SeccompProfile: localhost}}, wantSeccomp: corev1.SeccompProfileTypeLocalhost},
		"escalation asked for":    {in: appsv1api.Security{SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}}, wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault, wantEscal: true},
		"capabilities, no escal.": {in: appsv1api.Security{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}, wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			pod, c := PodSecurityContext(tc.in), ContainerSecurityContext(tc.in)
			if pod.SeccompProfile == nil || pod.SeccompProfile.Type != tc.wantSeccomp {
				t.Errorf("seccomp %+v, want %s", pod.SeccompProfile, tc.wantSeccomp)
			}
			if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation != tc.wantEscal {
				t.Errorf("allowPrivilegeEscalation %v, want %v", c.AllowPrivilegeEscalation, tc.wantEscal)
			}
			if got := pod.RunAsNonRoot != nil && *pod.RunAsNonRoot; got != tc.wantNonRoot {
				t.Errorf("runAsNonRoot %v, want %v", got, tc.wantNonRoot)
			}
			if tc.in.SecurityContext != nil && tc.in.SecurityContext.Capabilities != nil && c.Capabilities == nil {
				t.Error("the user's capabilities were dropped")
			}
			if !reflect.DeepEqual(before, &tc.in) {
				t.Errorf("the spec was changed in place: %+v, was %+v", tc.in, before)
			}
		})
	}
}

func TestEveryWorkloadCarriesTheSecurityDefaults(t *testing.T) {
	app := &appsv1api.AppService{Spec: appsv1api.AppServiceSpec{Image: "nginx"}}
	cm := &appsv1api.CloudManager{Spec: appsv1api.CloudManagerSpec{
		Front:    appsv1api.FrontTier{Deployment: appsv1api.TierDeployment{Name: "web", Image: "nginx"}},
		Identity: appsv1api.IdentityTier{Deployment: appsv1api.TierDeployment{Name: "id", Image: "keycloak"}},
		DB:       appsv1api.DatabaseTier{StatefulSet: appsv1api.DatabaseStatefulSet{Name: "db", Image: "mariadb", Storage: appsv1api.DatabaseStorage{Size: "1Gi"}}},
	}}
	templates := map[string]corev1.PodSpec{
		"appservice":         AppServiceDeployment(app).Spec.Template.Spec,
		"cloudmanager front": CloudManagerFrontDeployment(cm).Spec.Template.Spec,
		"cloudmanager ident": CloudManagerIdentityDeployment(cm).Spec.Template.Spec,
		"cloudmanager db":    CloudManagerStatefulSet(cm).Spec.Template.Spec,
	}
	for name, spec := range templates {
		c := spec.Containers[0].SecurityContext
		if spec.SecurityContext == nil || spec.SecurityContext.SeccompProfile == nil || c == nil || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
			t.Errorf("%s: pod security %+v, container security %+v", name, spec.SecurityContext, c)
		}
	}
}
