package images

import (
	"strings"
	"testing"
)

// A proxy that refuses the module fails the build with the proxy's own
// answer, naming the Helm and the module version. GOPROXY=off with an
// empty module cache refuses here without any network.
func TestHelmBinaryReportsTheProxysRefusal(t *testing.T) {
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOPROXY", "off")
	_, err := HelmBinary(t.TempDir(), 4)
	if err == nil {
		t.Fatal("HelmBinary built Helm 4 with GOPROXY=off and an empty module cache")
	}
	t.Log(err)
	for _, want := range []string{"helm 4 from the Go module proxy", "helm.sh/helm/v4@v4.3.1", "GOPROXY=off"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

func TestHelmBinaryOnlyThreeAndFour(t *testing.T) {
	if _, err := HelmBinary(t.TempDir(), 2); err == nil {
		t.Fatal("HelmBinary(2) succeeded")
	}
}
