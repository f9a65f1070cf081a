// Command pauseimage writes the nodelet's pause image as an OCI archive,
// for the .deb (/usr/lib/nodelet/images/pause.tar): the same archive, with
// the same digest, as the one the nodelet builds from its pause binary
// when containerd lacks the image, so a packaged node never needs to.
//
//	go run ./packaging/deb/pauseimage -binary PAUSE -o FILE
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nodelet/nodelet/nodelet"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
)

func main() {
	bin := flag.String("binary", "", "static pause binary (cmd/pause built with CGO_ENABLED=0), required")
	out := flag.String("o", "", "archive to write, required")
	flag.Parse()
	if *bin == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "pauseimage: -binary and -o are required")
		os.Exit(2)
	}
	ref, err := runtime.NormalizeImageRef(nodelet.DefaultPodInfraImage)
	if err == nil {
		err = containerd.WritePauseArchive(*out, *bin, ref)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pauseimage:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}
