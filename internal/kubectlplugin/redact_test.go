package kubectlplugin

import (
	"encoding/base64"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestRedact(t *testing.T) {
	for name, tc := range map[string]struct {
		in        string
		secrets   []string // must be gone
		keep      []string // must stay
		redaction []string
	}{
		"a Secret's data and stringData": {
			in: `{"kind":"Secret","metadata":{"name":"pw","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"stringData\":{\"password\":\"hunter2\"}}"},` +
				`"managedFields":[{"manager":"kubectl"}]},"data":{"password":"` + base64.StdEncoding.EncodeToString([]byte("s3cr3t-pass")) + `"},"stringData":{"token":"hunter2"}}`,
			secrets:   []string{"hunter2", base64.StdEncoding.EncodeToString([]byte("s3cr3t-pass")), "managedFields"},
			keep:      []string{"name: pw"},
			redaction: []string{"password: <redacted 11 bytes>", "token: <redacted 7 bytes>"},
		},
		"a CloudManager's rootPass": {
			in:        `{"kind":"CloudManager","spec":{"db":{"rootPass":"mariadb-root","statefulSet":{"name":"db"}}}}`,
			secrets:   []string{"mariadb-root"},
			keep:      []string{"name: db"},
			redaction: []string{"rootPass: <redacted 12 bytes>"},
		},
		"environment variables whose name looks secret": {
			in: `{"kind":"Deployment","spec":{"template":{"spec":{"containers":[{"name":"app","env":[` +
				`{"name":"DB_PASSWORD","value":"pw-in-env"},{"name":"API_TOKEN","value":"tok-in-env"},{"name":"LOG_LEVEL","value":"debug"},` +
				`{"name":"REF","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]}]}}}}`,
			secrets:   []string{"pw-in-env", "tok-in-env"},
			keep:      []string{"value: debug", "secretKeyRef"},
			redaction: []string{"value: <redacted 9 bytes>"},
		},
		"a ConfigMap's secret-looking lines": {
			in: `{"kind":"ConfigMap","data":{"redis.conf":"maxmemory 100mb\nrequirepass conf-pass\n  masterauth conf-pass\n# requirepass commented\n` +
				`user app on >acl-pass ~* +@all\n","app.properties":"db.password=props-pass\nport=80"}}`,
			secrets:   []string{"conf-pass", "acl-pass", "props-pass"},
			keep:      []string{"maxmemory 100mb", "port=80", "# requirepass commented"},
			redaction: []string{"requirepass <redacted 9 bytes>", "user app on ><redacted 8 bytes> ~* +@all", "db.password= <redacted 10 bytes>"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.in), &obj); err != nil {
				t.Fatal(err)
			}
			Redact(obj)
			out, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			text := string(out)
			for _, s := range tc.secrets {
				if strings.Contains(text, s) {
					t.Errorf("%q survived redaction:\n%s", s, text)
				}
			}
			for _, s := range append(tc.keep, tc.redaction...) {
				if !strings.Contains(text, s) {
					t.Errorf("%q missing after redaction:\n%s", s, text)
				}
			}
		})
	}
}
