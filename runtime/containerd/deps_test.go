package containerd_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/hosttools"
)

const (
	module       = "github.com/nodelet/nodelet"
	clientPkg    = "github.com/containerd/containerd/v2/client"
	executorPkg  = module + "/runtime/containerd"
	makefileTags = `(?m)^BUILDTAGS\s*:?=\s*(.*)$`
)

// clientImporters may import containerd's client themselves, besides the
// executor (and its tests). Each runs or watches a containerd of its own
// rather than the node's pods: the private containerd of the tests, the
// lab's, and the e2e harness's (which counts the node containerd's exec
// events and serves the upstream kubelet's CRI namespace).
var clientImporters = []string{
	executorPkg,
	module + "/runtime/runtimetest",
	module + "/lab",
	module + "/test/e2e",
}

// pureRooms may not depend on the executor or containerd's client, even
// transitively, tests included: they decide and report, the executor acts.
var pureRooms = []string{"runtime", "status", "pleg", "stats", "nodeapi"}

// TestContainerdClientStaysInTheExecutor: built as the Makefile builds it,
// only the executor (and the harnesses above) import containerd's client,
// and the pure packages do not reach it or the executor at all. A new
// import that breaks either rule fails here rather than in review.
func TestContainerdClientStaysInTheExecutor(t *testing.T) {
	root := moduleRoot(t)
	tags := buildTags(t, root)
	for _, line := range goList(t, root, "-tags", tags, "-f",
		"{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if slices.Contains(fields[1:], clientPkg) && !slices.Contains(clientImporters, fields[0]) {
			t.Errorf("%s imports %s: go through %s (containerd.Runtime) instead", fields[0], clientPkg, executorPkg)
		}
	}
	for _, room := range pureRooms {
		for _, line := range goList(t, root, "-tags", tags, "-deps", "-test", "./"+room) {
			// A test variant reads "path [path.test]".
			if dep := strings.Fields(line)[0]; dep == clientPkg || dep == executorPkg {
				t.Errorf("%s/%s depends on %s; it may use package runtime and consumer-owned interfaces only", module, room, dep)
			}
		}
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out := goList(t, ".", "-m", "-f", "{{.Dir}}")
	if len(out) != 1 {
		t.Fatalf("go list -m: %q, want the module's directory", out)
	}
	return out[0]
}

// buildTags are the Makefile's BUILDTAGS, so that the check sees the
// imports of the binaries as they are built.
func buildTags(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatalf("read the Makefile for BUILDTAGS: %v", err)
	}
	m := regexp.MustCompile(makefileTags).FindSubmatch(data)
	if m == nil {
		t.Fatalf("no BUILDTAGS in %s/Makefile", root)
	}
	return strings.Join(strings.Fields(string(m[1])), ",")
}

// goList runs go list in dir and returns its output lines.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := hosttools.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
