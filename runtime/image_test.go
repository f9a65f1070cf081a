package runtime

import (
	"errors"
	"testing"
)

func TestNormalizeImageRef(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nginx", "docker.io/library/nginx:latest"},
		{"nginx:1.22", "docker.io/library/nginx:1.22"},
		{"library/busybox:1.36", "docker.io/library/busybox:1.36"},
		{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"},
		{"nginx@sha256:0123456789012345678901234567890123456789012345678901234567890123", "docker.io/library/nginx@sha256:0123456789012345678901234567890123456789012345678901234567890123"},
	}
	for _, tt := range tests {
		got, err := NormalizeImageRef(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeImageRef(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "Nginx", "a//b", "nginx:"} {
		if _, err := NormalizeImageRef(bad); !errors.Is(err, ErrInvalidImageName) {
			t.Errorf("NormalizeImageRef(%q) = %v, want ErrInvalidImageName", bad, err)
		}
	}
}
