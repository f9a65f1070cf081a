package gc

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/nodestatus"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
)

// fakeImages is an image store for the collector.
type fakeImages struct {
	imgs    []runtime.StoredImage
	used    map[string]bool
	removed []string
}

func (f *fakeImages) gc(usage runtime.FSUsage, now *time.Time) *Images {
	return &Images{Policy: runtime.DefaultImageGCPolicy,
		Usage: func(context.Context) (runtime.FSUsage, error) { return usage, nil },
		List:  func(context.Context) ([]runtime.StoredImage, error) { return slices.Clone(f.imgs), nil },
		InUse: func(context.Context) (map[string]bool, error) { return f.used, nil },
		Remove: func(_ context.Context, img runtime.StoredImage) error {
			f.removed = append(f.removed, img.ID)
			f.imgs = slices.DeleteFunc(f.imgs, func(s runtime.StoredImage) bool { return s.ID == img.ID })
			return nil
		},
		Pinned: func(n string) bool { return n == "pause:1" },
		Now:    func() time.Time { return *now }, Log: slog.New(slog.DiscardHandler),
	}
}

// The collector remembers first detection and last use across passes: a
// just detected image is too young, then the least recently used goes.
func TestImageGCTracksUse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeImages{imgs: []runtime.StoredImage{
		{ID: "a", Records: []string{"a:1"}, Size: 60},
		{ID: "b", Records: []string{"b:1"}, Size: 60},
		{ID: "p", Records: []string{"pause:1"}, RepoTags: []string{"pause:1"}, Size: 500},
	}, used: map[string]bool{"a:1": true}}
	g := f.gc(runtime.FSUsage{Capacity: 1000, Available: 100}, &now) // frees 100
	ctx := context.Background()
	if err := g.Collect(ctx); err != nil || len(f.removed) != 0 {
		t.Fatalf("first pass removed %v (%v), want nothing: every image is new", f.removed, err)
	}
	now = now.Add(time.Minute)
	f.used = map[string]bool{"b:1": true} // b used later than a
	if err := g.Collect(ctx); err != nil || len(f.removed) != 0 {
		t.Fatalf("second pass removed %v (%v), want nothing: younger than 2m", f.removed, err)
	}
	now = now.Add(2 * time.Minute)
	f.used = nil
	if err := g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.removed, []string{"a", "b"}) {
		t.Fatalf("removed %v, want [a b] (least recently used first, never the pause image)", f.removed)
	}
	if len(g.firstSeen) != 1 || len(g.lastUsed) != 0 {
		t.Errorf("state after removal: firstSeen %v lastUsed %v", g.firstSeen, g.lastUsed)
	}
}

// On a real containerd: with the usage injected at 90% of a disk the
// images fill, the collector removes the unused image and keeps the one a
// container references and the sandbox image.
func TestImageGCContainerd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	addr := runtimetest.StartContainerd(t)
	rt, err := containerd.New(ctx, containerd.Config{Address: addr, LogRoot: filepath.Join(dir, "pods"), StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	runtimetest.ImportTestImages(t, rt, dir, true)
	runtimetest.ContainerRecords(t, addr, containerd.DefaultNamespace)("uses-busybox", images.BusyboxRef, nil)
	before, err := rt.ListImages(ctx)
	if err != nil || len(before) != 3 {
		t.Fatalf("images before: %+v (%v), want 3", before, err)
	}
	var total int64
	for _, img := range before {
		total += img.Size
	}
	// 90% of a disk ten times the images: frees 10% of it, more than all.
	usage := runtime.FSUsage{Capacity: 10 * total, Available: total}
	g := &Images{Policy: runtime.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80},
		Usage: func(context.Context) (runtime.FSUsage, error) { return usage, nil },
		List:  rt.ListImages, InUse: rt.ImagesInUse, Remove: rt.RemoveImage,
		Pinned: func(n string) bool { return n == images.PauseRef }, Now: time.Now,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if err := g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := rt.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range after {
		names = append(names, img.RepoTags...)
	}
	slices.Sort(names)
	if want := []string{images.BusyboxRef, images.PauseRef}; !slices.Equal(names, want) {
		t.Fatalf("images after gc: %v, want %v", names, want)
	}
	if rt.ImagePresent(ctx, images.NginxRef) {
		t.Errorf("%s still in containerd", images.NginxRef)
	}
	status, err := nodestatus.CachedImages(ctx, rt.ListImages, time.Now)()
	if err != nil || len(status) != 2 || len(status[0].Names) < 2 || status[0].SizeBytes <= 0 {
		t.Errorf("node status images %+v (%v), want busybox and pause with tags and digests", status, err)
	}
	root, err := rt.ImageFSRoot(ctx)
	if err != nil || root == "" {
		t.Fatalf("image fs root %q (%v), want containerd's snapshotter root", root, err)
	}
	if u, err := StatfsUsage(root); err != nil || u.Capacity <= 0 || u.Available > u.Capacity {
		t.Errorf("statfs %s: %+v (%v)", root, u, err)
	}
}

// TestNodeImagesCached: status updates come every 10 s, the listing at
// most every nodeImagesMaxAge; a failed listing is retried at once.

func TestGCCounters(t *testing.T) {
	pods := []runtime.PodStatus{{UID: "gone", Namespace: "ns", Name: "p",
		Sandboxes:  []runtime.SandboxStatus{{ID: "sb", State: runtime.StateExited}},
		Containers: []runtime.ContainerStatus{{ID: "c0", Name: "app", State: runtime.StateExited, SandboxID: "sb"}}}}
	var kinds []string
	gc := &Containers{Policy: runtime.DefaultGCPolicy,
		List:            func(context.Context) ([]runtime.PodStatus, error) { return pods, nil },
		RemoveContainer: func(context.Context, string) error { return nil },
		RemoveSandbox:   func(context.Context, string) error { return nil },
		IsPodLive:       func(types.UID) bool { return false },
		Removed:         func(kind string) { kinds = append(kinds, kind) },
		Now:             time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := gc.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(kinds)
	if want := []string{"container", "sandbox"}; !slices.Equal(kinds, want) {
		t.Errorf("container gc counted %v, want %v", kinds, want)
	}

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeImages{imgs: []runtime.StoredImage{{ID: "a", Records: []string{"a:1"}, Size: 200}}}
	g := f.gc(runtime.FSUsage{Capacity: 1000, Available: 100}, &now)
	var reasons []string
	g.Removed = func(reason string) { reasons = append(reasons, reason) }
	g.Collect(context.Background()) // first seen Now: too young
	now = now.Add(time.Hour)
	if err := g.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reasons, []string{"space"}) || !slices.Equal(f.removed, []string{"a"}) {
		t.Errorf("image gc removed %v, counted %v", f.removed, reasons)
	}
}
