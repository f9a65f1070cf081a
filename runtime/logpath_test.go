package runtime

import "testing"

func TestContainerLogPath(t *testing.T) {
	got := ContainerLogPath("/var/log/pods", "ns", "web", "u-1", "nginx", 2)
	if got != "/var/log/pods/ns_web_u-1/nginx/2.log" {
		t.Errorf("got %s", got)
	}
}
