// Command mkimages writes the project's locally built images (busybox,
// nginx under two tags) as OCI archives into a directory, for nodes with
// no registry: a nodelet imports them with --image-dir. `make up` uses it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nodelet/nodelet/test/images"
)

func main() {
	dir := flag.String("o", "", "directory to write the image archives into (required)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "mkimages: -o DIR is required")
		os.Exit(2)
	}
	if _, ref, err := images.Busybox(*dir); err != nil {
		fail(err)
	} else {
		fmt.Println(ref)
	}
	_, refs, err := images.Nginx(*dir)
	if err != nil {
		fail(err)
	}
	for _, r := range refs {
		fmt.Println(r)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkimages:", err)
	os.Exit(1)
}
