package containerd_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/images"
)

// TestStopSignalFromImage stops a container of an image whose STOPSIGNAL
// is SIGQUIT (the nginx test image, which carries a shell): the process
// sees SIGQUIT, not SIGTERM.
func TestStopSignalFromImage(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	tar, _, err := images.Nginx(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.ImportArchive(ctx, tar); err != nil {
		t.Fatal(err)
	}
	nginx, err := f.rt.EnsureImage(ctx, images.NginxRef, corev1.PullNever)
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod("stopper", corev1.Container{Name: "c", Image: images.NginxRef,
		Command: []string{"sh", "-c", "trap 'exit 7' QUIT; trap 'exit 9' TERM; echo ready; while :; do sleep 0.1; done"}})
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.rt.CreateContainer(ctx, pod, &pod.Spec.Containers[0], runtime.ContainerConfig{SandboxID: sb, Image: nginx, ImageName: images.NginxRef})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitLog(t, podStatus(t, f.rt, "uid-stopper").LatestContainer("c").LogPath, "ready")
	if err := f.rt.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := podStatus(t, f.rt, "uid-stopper").LatestContainer("c"); c == nil || c.ExitCode != 7 {
		t.Fatalf("stopped container = %+v, want exit 7 (SIGQUIT, the image's STOPSIGNAL)", c)
	}
	if err := f.rt.RemoveSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
}
