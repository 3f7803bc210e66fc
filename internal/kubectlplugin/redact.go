package kubectlplugin

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
)

// lastApplied is the annotation kubectl apply writes: the whole object as applied, a
// Secret's data or a CloudManager's rootPass included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// secretLike matches the names of environment variables and configuration keys whose
// values are kept out of a report.
var secretLike = regexp.MustCompile(`(?i)pass|secret|token|credential|private|auth|key`)

// Redacted is what stands for a value of n bytes in a report.
func Redacted(n int) string { return fmt.Sprintf("<redacted %d bytes>", n) }

// Redact removes from obj, an object as unstructured JSON, every value a report must not
// hold: a Secret's data and stringData (each value replaced by Redacted of its length), a
// CloudManager's spec.db.rootPass, the value of every environment variable whose name looks
// secret, a ConfigMap's lines whose key looks secret (requirepass, masterauth, ...), the
// last-applied-configuration annotation; and the managedFields, which say nothing to a
// reader of the report.
func Redact(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
		if ann, ok := md["annotations"].(map[string]any); ok {
			if v, ok := ann[lastApplied].(string); ok {
				ann[lastApplied] = Redacted(len(v))
			}
		}
	}
	switch obj["kind"] {
	case "Secret":
		redactValues(obj, "data", true)
		redactValues(obj, "stringData", false)
	case "ConfigMap":
		if data, ok := obj["data"].(map[string]any); ok {
			for k, v := range data {
				if s, ok := v.(string); ok {
					data[k] = RedactConfigText(s)
				}
			}
		}
		redactValues(obj, "binaryData", true)
	case "CloudManager":
		if db, ok := nested(obj, "spec", "db"); ok {
			if v, ok := db["rootPass"].(string); ok {
				db["rootPass"] = Redacted(len(v))
			}
		}
	}
	redactEnv(obj)
}

// redactValues replaces each value of the map at key with Redacted of its length (of the
// decoded bytes when encoded is set).
func redactValues(obj map[string]any, key string, encoded bool) {
	m, ok := obj[key].(map[string]any)
	if !ok {
		return
	}
	for k, v := range m {
		s, _ := v.(string)
		n := len(s)
		if encoded {
			if raw, err := base64.StdEncoding.DecodeString(s); err == nil {
				n = len(raw)
			}
		}
		m[k] = Redacted(n)
	}
}

// redactEnv walks v and replaces the value of every {name, value} pair (an environment
// variable) whose name looks secret.
func redactEnv(v any) {
	switch t := v.(type) {
	case map[string]any:
		if name, ok := t["name"].(string); ok && secretLike.MatchString(name) {
			if s, ok := t["value"].(string); ok {
				t["value"] = Redacted(len(s))
			}
		}
		for _, child := range t {
			redactEnv(child)
		}
	case []any:
		for _, child := range t {
			redactEnv(child)
		}
	}
}

// RedactConfigText redacts the value of each line of a configuration file (redis.conf,
// key=value or key: value) whose key looks secret, and every ACL password (">secret").
func RedactConfigText(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		key, rest, sep := splitConfigLine(trimmed)
		switch {
		case strings.EqualFold(key, "user"):
			lines[i] = redactACLPasswords(line)
		case secretLike.MatchString(key) && strings.TrimSpace(rest) != "":
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			lines[i] = indent + key + sep + Redacted(len(strings.TrimSpace(rest)))
		}
	}
	return strings.Join(lines, "\n")
}

// splitConfigLine splits "key value", "key=value" or "key: value" at its first separator.
func splitConfigLine(line string) (key, rest, sep string) {
	i := strings.IndexAny(line, " \t=:")
	if i < 0 {
		return line, "", ""
	}
	sep = line[i : i+1]
	if sep == ":" || sep == "=" {
		sep += " "
	}
	return line[:i], line[i+1:], sep
}

// redactACLPasswords replaces each ">password" and "#hash" of an ACL user line.
func redactACLPasswords(line string) string {
	fields := strings.Fields(line)
	for i, f := range fields {
		if len(f) > 1 && (f[0] == '>' || f[0] == '#' || f[0] == '<') {
			fields[i] = f[:1] + Redacted(len(f)-1)
		}
	}
	return strings.Join(fields, " ")
}

// nested returns the map at the path of keys in obj.
func nested(obj map[string]any, keys ...string) (map[string]any, bool) {
	cur := obj
	for _, k := range keys {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}
