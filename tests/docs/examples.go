// Package docs checks the documentation against the repository: every relative link of
// README.md and docs/ resolves, every `make` target the pages name exists, the configuration
// page names exactly the operator's flags, the troubleshooting page every condition reason,
// and every YAML example is an object of a known kind that decodes strictly into its Go
// type. Examples is shared with tests/e2e, which dry-runs them on the local cluster.
package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Example is one object of a YAML block of a documentation page.
type Example struct {
	// File is the page, relative to the repository; Line is the line of the block's
	// opening fence and End the line of its closing one.
	File      string
	Line, End int
	// APIVersion and Kind are the object's; Data is its YAML.
	APIVersion, Kind string
	Data             []byte
}

func (e Example) String() string { return fmt.Sprintf("%s:%d %s", e.File, e.Line, e.Kind) }

// Pages are README.md and every Markdown file under docs/, relative to root.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, rel)
		}
		return nil
	})
	return pages, err
}

// Block is a fenced code block of a page.
type Block struct {
	Lang string
	Line int // the line of its opening fence, from 1
	Text string
}

// Blocks are the fenced code blocks of a Markdown text.
func Blocks(text string) []Block {
	var out []Block
	var cur *Block
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &Block{Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), Line: n}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.Text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteString("\n")
		}
	}
	return out
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// Examples are the objects of every yaml block of the pages under root.
func Examples(root string) ([]Example, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var out []Example
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		for _, b := range Blocks(string(data)) {
			if b.Lang != "yaml" && b.Lang != "yml" {
				continue
			}
			for _, doc := range docSeparator.Split(b.Text, -1) {
				if len(bytes.TrimSpace([]byte(doc))) == 0 {
					continue
				}
				var head struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
				}
				if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
					return nil, fmt.Errorf("%s:%d: a YAML example does not parse: %w", page, b.Line, err)
				}
				out = append(out, Example{File: page, Line: b.Line, End: b.Line + strings.Count(b.Text, "\n") + 1, APIVersion: head.APIVersion, Kind: head.Kind, Data: []byte(doc)})
			}
		}
	}
	return out, nil
}
