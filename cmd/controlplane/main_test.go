package main

import (
	"strings"
	"testing"

	"github.com/nodelet/nodelet/hosttools"
)

// TestNoNetTrace: built as the Makefile builds it (-tags grpcnotrace),
// the control plane links no golang.org/x/net/trace. That package's
// html/template use makes the linker keep every exported method of every
// type, a third more binary; a new import that brings it back fails here.
func TestNoNetTrace(t *testing.T) {
	out, err := hosttools.Command("go", "list", "-deps", "-tags", "grpcnotrace", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "golang.org/x/net/trace" || pkg == "html/template" {
			t.Errorf("cmd/controlplane links %s", pkg)
		}
	}
}
