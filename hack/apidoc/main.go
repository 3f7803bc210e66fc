// Command apidoc prints docs/reference/api.md: the reference of every field of the CRDs in
// config/crd/bases. Run it from the repository's top folder.
package main

import (
	"fmt"
	"os"

	"github.com/middleware-operator/middleware-operator/internal/apidoc"
)

func main() {
	out, err := apidoc.FromDir("config/crd/bases")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(out)
}
