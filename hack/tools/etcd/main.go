// Command etcd is etcd's own server entry point, built from the pinned module so the local
// test cluster does not depend on a downloaded release.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
