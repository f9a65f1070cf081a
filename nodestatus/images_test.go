package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

func TestImageList(t *testing.T) {
	var imgs []corev1.ContainerImage
	for i := range MaxImages + 10 {
		imgs = append(imgs, corev1.ContainerImage{Names: []string{fmt.Sprintf("img-%02d", i)}, SizeBytes: int64(i)})
	}
	imgs = append(imgs,
		corev1.ContainerImage{SizeBytes: 1 << 40}, // no name: left out
		corev1.ContainerImage{Names: []string{"a", "b", "c", "d", "e", "f"}, SizeBytes: 1000})
	got := ImageList(imgs)
	if len(got) != MaxImages {
		t.Fatalf("%d images, want %d", len(got), MaxImages)
	}
	if !slices.Equal(got[0].Names, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("first %+v, want the largest with 5 names", got[0])
	}
	if got[1].Names[0] != "img-59" || got[MaxImages-1].Names[0] != "img-11" {
		t.Errorf("second %v, last %v: want largest first, the smallest cut", got[1].Names, got[MaxImages-1].Names)
	}
}

// status.images comes from Config.Images at each status update; a
// listing error keeps the last list.
func TestStatusImages(t *testing.T) {
	var imgs atomic.Pointer[[]corev1.ContainerImage]
	var listErr atomic.Bool
	calls := atomic.Int32{}
	first := []corev1.ContainerImage{
		{Names: []string{"docker.io/library/busybox:1.36"}, SizeBytes: 10},
		{Names: []string{"docker.io/library/nginx:1.22", "docker.io/library/nginx@sha256:ab"}, SizeBytes: 20},
	}
	imgs.Store(&first)
	h := newHarness(t, func(c *Config) {
		c.Images = func() ([]corev1.ContainerImage, error) {
			calls.Add(1)
			if listErr.Load() {
				return nil, errors.New("containerd down")
			}
			return *imgs.Load(), nil
		}
	})
	h.run(t)
	n := h.waitReady(t, corev1.ConditionTrue)
	if len(n.Status.Images) != 2 || n.Status.Images[0].SizeBytes != 20 || len(n.Status.Images[0].Names) != 2 {
		t.Fatalf("status.images = %+v, want nginx then busybox", n.Status.Images)
	}
	listErr.Store(true)
	h.step(t, 10*time.Second)
	h.step(t, 5*time.Minute) // a report is written even unchanged
	if got := h.node(t).Status.Images; len(got) != 2 {
		t.Fatalf("after a listing error status.images = %+v, want the last list kept", got)
	}
	listErr.Store(false)
	second := first[:1]
	imgs.Store(&second)
	h.step(t, 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "one image in the status", func() bool { return len(h.node(t).Status.Images) == 1 })
	if c := calls.Load(); c > 6 {
		t.Errorf("images listed %d times in 4 status updates", c)
	}
}

func TestNodeImagesCached(t *testing.T) {
	now := time.Unix(1000, 0)
	calls, fail := 0, false
	list := func(context.Context) ([]runtime.StoredImage, error) {
		calls++
		if fail {
			return nil, errors.New("containerd down")
		}
		return []runtime.StoredImage{{ID: "sha256:a", Size: 10, RepoTags: []string{"a:1"}}}, nil
	}
	images := CachedImages(context.Background(), list, func() time.Time { return now })
	for range 3 {
		if got, err := images(); err != nil || len(got) != 1 || got[0].SizeBytes != 10 {
			t.Fatalf("images() = %v, %v", got, err)
		}
		now = now.Add(10 * time.Second)
	}
	if calls != 1 {
		t.Errorf("%d listings within %v, want 1", calls, imagesMaxAge)
	}
	fail = true
	if _, err := images(); err == nil || calls != 2 {
		t.Errorf("listing after %v: err %v, %d calls, want a new failing listing", imagesMaxAge, err, calls)
	}
	fail = false
	if _, err := images(); err != nil || calls != 3 {
		t.Errorf("after a failure: err %v, %d calls, want a new listing", err, calls)
	}
}
