package resources

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// passwordCases are Secret values and the password they hold ("" with refused: none).
var passwordCases = map[string]struct {
	raw, want string
	refused   string // what the refusal names
}{
	"no line ending":                       {raw: "s3cret", want: "s3cret"},
	"a final LF":                           {raw: "s3cret\n", want: "s3cret"},
	"a final CR LF":                        {raw: "s3cret\r\n", want: "s3cret"},
	"only one LF is dropped":               {raw: "s3cret\n\n", refused: "line feed"},
	"an inner LF":                          {raw: "s3\ncret", refused: "line feed"},
	"an inner LF and a final one":          {raw: "s3\ncret\n", refused: "line feed"},
	"a final CR alone":                     {raw: "s3cret\r", refused: "carriage return"},
	"an inner CR":                          {raw: "s3\rcret\r\n", refused: "carriage return"},
	"a NUL":                                {raw: "s3\x00cret", refused: "NUL"},
	"empty":                                {raw: "", refused: "empty"},
	"only a LF":                            {raw: "\n", refused: "empty"},
	"only CR LF":                           {raw: "\r\n", refused: "empty"},
	"spaces, quotes and a dollar are kept": {raw: ` p"a\ss 'w$rd ` + "\n", want: ` p"a\ss 'w$rd `},
}

func TestRedisPassword(t *testing.T) {
	for name, tc := range passwordCases {
		t.Run(name, func(t *testing.T) {
			got, err := RedisPassword([]byte(tc.raw))
			var pe *PasswordError
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("RedisPassword(%q): %v, want %q", tc.raw, err, tc.want)
			case tc.refused == "" && got != tc.want:
				t.Fatalf("RedisPassword(%q) = %q, want %q", tc.raw, got, tc.want)
			case tc.refused != "" && (!errors.As(err, &pe) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("RedisPassword(%q) = %q, %v; want a PasswordError naming %q", tc.raw, got, err, tc.refused)
			}
		})
	}
}

// TestRedisPasswordFuncAgrees runs the scripts' password function with sh on every case:
// it must find the same password as RedisPassword, or refuse the same values naming the
// same character, so the nodes run the password the operator logs in with.
func TestRedisPasswordFuncAgrees(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range passwordCases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
			if err := os.WriteFile(file, []byte(tc.raw), 0o400); err != nil {
				t.Fatal(err)
			}
			script := redisPasswordFunc + `password "$1" || exit 1
printf '%s' "$pw"
`
			cmd := exec.Command("sh", "-c", script, "sh", file)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if tc.refused == "" {
				if err != nil || string(out) != tc.want {
					t.Fatalf("password %q: %q, %v (%s); want %q", tc.raw, out, err, stderr.String(), tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(stderr.String(), tc.refused) || !strings.Contains(stderr.String(), file) {
				t.Fatalf("password %q: %q, %v (%s); want a refusal naming the file and %q", tc.raw, out, err, stderr.String(), tc.refused)
			}
		})
	}
	if strings.Contains(redisPasswordFunc, "$(") || strings.Contains(redisPasswordFunc, "$$") {
		t.Error("the password function holds $( or $$, which the kubelet would expand")
	}
}
