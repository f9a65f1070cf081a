package buildinfo

import (
	"os"
	"strings"
	"testing"
)

// TestKubernetesMatchesGoMod fails when the k8s.io modules move to another
// release and Kubernetes does not follow (or the other way round).
func TestKubernetesMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "k8s.io/api" || !strings.HasPrefix(f[1], "v0.") {
			continue // the require line, not a replace's
		}
		found = true
		if got := "v1." + strings.TrimPrefix(f[1], "v0."); got != Kubernetes {
			t.Errorf("go.mod has k8s.io/api %s (Kubernetes %s); buildinfo.Kubernetes is %s", f[1], got, Kubernetes)
		}
	}
	if !found {
		t.Fatal("go.mod requires no k8s.io/api")
	}
}

func TestInfo(t *testing.T) {
	i := Info()
	if i.Major != "1" || i.Minor != "37" || i.GitVersion != "v1.37.2+nodelet" {
		t.Errorf("Info() = %+v", i)
	}
}
