// Package apidoc renders docs/reference/api.md, the reference of every field of the
// project's CRDs, from the CRDs controller-gen writes to config/crd/bases: their
// openAPIV3Schema descriptions are the Go types' doc comments, so the reference says what
// the code says. go run ./hack/apidoc > docs/reference/api.md; a test fails when that file
// is stale.
package apidoc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// kindOrder is the order of the kinds on the page: the README's.
var kindOrder = []string{"AppService", "CloudManager", "RedisCluster"}

// FromDir renders the reference of the CRDs in dir (config/crd/bases).
func FromDir(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", err
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return "", fmt.Errorf("while reading %s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return Markdown(crds), nil
}

// Markdown renders the reference of crds.
func Markdown(crds []apiextensionsv1.CustomResourceDefinition) string {
	slices.SortFunc(crds, func(a, b apiextensionsv1.CustomResourceDefinition) int {
		return rank(a.Spec.Names.Kind) - rank(b.Spec.Names.Kind)
	})
	var b strings.Builder
	b.WriteString("# API reference\n\n")
	b.WriteString("Every field of the operator's custom resources, generated from the CRDs in `config/crd/bases`\n")
	b.WriteString("(whose descriptions are the Go types' doc comments in `api/`) by\n")
	b.WriteString("`go run ./hack/apidoc > docs/reference/api.md`; a test fails when this file is stale.\n")
	b.WriteString("Descriptions of fields that come from Kubernetes types are their first paragraph.\n\n")
	for _, crd := range crds {
		fmt.Fprintf(&b, "- [%s](#%s)\n", crd.Spec.Names.Kind, strings.ToLower(crd.Spec.Names.Kind))
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			writeVersion(&b, crd, v)
		}
	}
	return b.String()
}

func rank(kind string) int {
	if i := slices.Index(kindOrder, kind); i >= 0 {
		return i
	}
	return len(kindOrder)
}

func writeVersion(b *strings.Builder, crd apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) {
	n := crd.Spec.Names
	fmt.Fprintf(b, "\n## %s\n\n", n.Kind)
	fmt.Fprintf(b, "`apiVersion: %s/%s`, `kind: %s`, %s", crd.Spec.Group, v.Name, n.Kind, strings.ToLower(string(crd.Spec.Scope)))
	fmt.Fprintf(b, "; plural `%s`", n.Plural)
	if len(n.ShortNames) > 0 {
		fmt.Fprintf(b, ", short names `%s`", strings.Join(n.ShortNames, "`, `"))
	}
	if len(n.Categories) > 0 {
		fmt.Fprintf(b, ", categories `%s`", strings.Join(n.Categories, "`, `"))
	}
	b.WriteString(".")
	if s := v.Subresources; s != nil {
		if s.Status != nil {
			b.WriteString(" Subresources: `status`")
		}
		if sc := s.Scale; sc != nil {
			fmt.Fprintf(b, ", `scale` (replicas `%s`, status `%s`", sc.SpecReplicasPath, sc.StatusReplicasPath)
			if sc.LabelSelectorPath != nil {
				fmt.Fprintf(b, ", selector `%s`", *sc.LabelSelectorPath)
			}
			b.WriteString(")")
		}
		b.WriteString(".")
	}
	b.WriteString("\n")
	if !v.Served || !v.Storage {
		fmt.Fprintf(b, "\nServed: %t, storage version: %t.\n", v.Served, v.Storage)
	}
	if len(v.AdditionalPrinterColumns) > 0 {
		b.WriteString("\n`kubectl get` columns: ")
		var cols []string
		for _, c := range v.AdditionalPrinterColumns {
			cols = append(cols, fmt.Sprintf("%s (`%s`)", c.Name, c.JSONPath))
		}
		b.WriteString(strings.Join(cols, ", "))
		b.WriteString(".\n")
	}
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return
	}
	root := v.Schema.OpenAPIV3Schema
	if d := firstParagraph(root.Description); d != "" {
		fmt.Fprintf(b, "\n%s\n", d)
	}
	var rules []string
	for _, top := range []string{"spec", "status"} {
		s, ok := root.Properties[top]
		if !ok {
			continue
		}
		fmt.Fprintf(b, "\n### %s.%s\n\n", n.Kind, top)
		b.WriteString("| field | type | description |\n| --- | --- | --- |\n")
		rules = append(rules, walk(b, top, &s, slices.Contains(root.Required, top))...)
	}
	rules = append(rules, validationRules("", root)...)
	if len(rules) > 0 {
		fmt.Fprintf(b, "\n### %s validation rules\n\n", n.Kind)
		b.WriteString("Besides the types and bounds above, the API server checks these rules (CEL) and answers\nwith the message when one fails:\n\n")
		b.WriteString("| on | message |\n| --- | --- |\n")
		for _, r := range rules {
			b.WriteString(r)
		}
	}
}

// walk writes a row for each field under s (at path, s itself included when it is not the
// top), depth first with sorted names, and returns the validation rules it met.
func walk(b *strings.Builder, path string, s *apiextensionsv1.JSONSchemaProps, required bool) []string {
	fmt.Fprintf(b, "| `%s` | %s | %s |\n", path, typeOf(s, required), cell(firstParagraph(s.Description)))
	rules := validationRules(path, s)
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		child := s.Properties[k]
		rules = append(rules, walk(b, path+"."+k, &child, slices.Contains(s.Required, k))...)
	}
	if s.Items != nil && s.Items.Schema != nil && (len(s.Items.Schema.Properties) > 0 || s.Items.Schema.AdditionalProperties != nil) {
		item := s.Items.Schema
		for _, k := range sortedKeys(item.Properties) {
			child := item.Properties[k]
			rules = append(rules, walk(b, path+"[]."+k, &child, slices.Contains(item.Required, k))...)
		}
		rules = append(rules, validationRules(path+"[]", item)...)
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil && len(ap.Schema.Properties) > 0 {
		for _, k := range sortedKeys(ap.Schema.Properties) {
			child := ap.Schema.Properties[k]
			rules = append(rules, walk(b, path+".*."+k, &child, slices.Contains(ap.Schema.Required, k))...)
		}
	}
	return rules
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validationRules are the rows of s's CEL rules.
func validationRules(path string, s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, r := range s.XValidations {
		on := "`" + path + r.FieldPath + "`"
		if path+r.FieldPath == "" {
			on = "the resource"
		}
		msg := r.Message
		if msg == "" {
			msg = "`" + r.Rule + "`"
		}
		out = append(out, fmt.Sprintf("| %s | %s |\n", on, cell(msg)))
	}
	return out
}

// typeOf is the type cell: the JSON type, whether it is required, and its bounds.
func typeOf(s *apiextensionsv1.JSONSchemaProps, required bool) string {
	t := s.Type
	switch {
	case s.XIntOrString:
		t = "integer or string"
	case t == "array" && s.Items != nil && s.Items.Schema != nil:
		it := s.Items.Schema.Type
		if s.Items.Schema.XIntOrString {
			it = "integer or string"
		}
		t = "array of " + it
	case t == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		vt := s.AdditionalProperties.Schema.Type
		if s.AdditionalProperties.Schema.XIntOrString {
			vt = "integer or string"
		}
		t = "map of " + vt
	case t == "object" && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		t = "object (any fields)"
	case t == "":
		t = "any"
	}
	parts := []string{t}
	if required {
		parts = append(parts, "**required**")
	}
	if s.Default != nil {
		parts = append(parts, "default `"+string(s.Default.Raw)+"`")
	}
	if len(s.Enum) > 0 {
		var vals []string
		for _, e := range s.Enum {
			vals = append(vals, strings.Trim(string(e.Raw), `"`))
		}
		parts = append(parts, "one of `"+strings.Join(vals, "`, `")+"`")
	}
	if s.Minimum != nil {
		parts = append(parts, fmt.Sprintf("min %g", *s.Minimum))
	}
	if s.Maximum != nil {
		parts = append(parts, fmt.Sprintf("max %g", *s.Maximum))
	}
	if s.MinLength != nil {
		parts = append(parts, fmt.Sprintf("min length %d", *s.MinLength))
	}
	if s.MaxLength != nil {
		parts = append(parts, fmt.Sprintf("max length %d", *s.MaxLength))
	}
	if s.MaxItems != nil {
		parts = append(parts, fmt.Sprintf("max %d items", *s.MaxItems))
	}
	if s.Format != "" && s.Format != "int32" && s.Format != "int64" {
		parts = append(parts, "format "+s.Format)
	}
	if s.XListType != nil && *s.XListType == "map" {
		parts = append(parts, "keyed by `"+strings.Join(s.XListMapKeys, "`, `")+"`")
	}
	return cell(strings.Join(parts, ", "))
}

// firstParagraph is a description up to its first blank line, on one line.
func firstParagraph(d string) string {
	d, _, _ = strings.Cut(strings.TrimSpace(d), "\n\n")
	return strings.Join(strings.Fields(d), " ")
}

// cell escapes a table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
