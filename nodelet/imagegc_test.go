package nodelet

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

func (f *fakeImages) gc(usage runtime.FSUsage, now *time.Time) *imageGC {
	return &imageGC{policy: runtime.DefaultImageGCPolicy,
		usage: func(context.Context) (runtime.FSUsage, error) { return usage, nil },
		list:  func(context.Context) ([]runtime.StoredImage, error) { return slices.Clone(f.imgs), nil },
		inUse: func(context.Context) (map[string]bool, error) { return f.used, nil },
		remove: func(_ context.Context, img runtime.StoredImage) error {
			f.removed = append(f.removed, img.ID)
			f.imgs = slices.DeleteFunc(f.imgs, func(s runtime.StoredImage) bool { return s.ID == img.ID })
			return nil
		},
		pinned: func(n string) bool { return n == "pause:1" },
		now:    func() time.Time { return *now }, log: slog.New(slog.DiscardHandler),
		firstSeen: map[string]time.Time{}, lastUsed: map[string]time.Time{}}
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
	if err := g.collect(ctx); err != nil || len(f.removed) != 0 {
		t.Fatalf("first pass removed %v (%v), want nothing: every image is new", f.removed, err)
	}
	now = now.Add(time.Minute)
	f.used = map[string]bool{"b:1": true} // b used later than a
	if err := g.collect(ctx); err != nil || len(f.removed) != 0 {
		t.Fatalf("second pass removed %v (%v), want nothing: younger than 2m", f.removed, err)
	}
	now = now.Add(2 * time.Minute)
	f.used = nil
	if err := g.collect(ctx); err != nil {
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
	importTestImages(t, rt, dir)
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
	g := &imageGC{policy: runtime.ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80},
		usage: func(context.Context) (runtime.FSUsage, error) { return usage, nil },
		list:  rt.ListImages, inUse: rt.ImagesInUse, remove: rt.RemoveImage,
		pinned: func(n string) bool { return n == images.PauseRef }, now: time.Now,
		log:       slog.New(slog.NewTextHandler(t.Output(), nil)),
		firstSeen: map[string]time.Time{}, lastUsed: map[string]time.Time{}}
	if err := g.collect(ctx); err != nil {
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
	status, err := nodeImages(ctx, rt.ListImages, time.Now)()
	if err != nil || len(status) != 2 || len(status[0].Names) < 2 || status[0].SizeBytes <= 0 {
		t.Errorf("node status images %+v (%v), want busybox and pause with tags and digests", status, err)
	}
	root, err := rt.ImageFSRoot(ctx)
	if err != nil || root == "" {
		t.Fatalf("image fs root %q (%v), want containerd's snapshotter root", root, err)
	}
	if u, err := statfsUsage(root); err != nil || u.Capacity <= 0 || u.Available > u.Capacity {
		t.Errorf("statfs %s: %+v (%v)", root, u, err)
	}
}

func TestImageGCConfig(t *testing.T) {
	cfg := Config{}
	if err := setImageGCDefaults(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ImageGCHighThresholdPercent != 85 || cfg.ImageGCLowThresholdPercent != 80 || cfg.ImageMinimumGCAge != 2*time.Minute {
		t.Errorf("defaults %d %d %s, want 85 80 2m", cfg.ImageGCHighThresholdPercent, cfg.ImageGCLowThresholdPercent, cfg.ImageMinimumGCAge)
	}
	for _, c := range []Config{{ImageGCHighThresholdPercent: 70}, {ImageGCLowThresholdPercent: 90}, {ImageGCHighThresholdPercent: 101}} {
		if err := setImageGCDefaults(&c); err == nil {
			t.Errorf("%d/%d: valid, want an error", c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent)
		}
	}
}

func importTestImages(t testing.TB, rt *containerd.Runtime, dir string) {
	t.Helper()
	pauseBin, err := images.BuildPause(dir)
	if err != nil {
		t.Fatal(err)
	}
	pauseTar, _, err := images.Pause(dir, pauseBin)
	if err != nil {
		t.Fatal(err)
	}
	busyboxTar, _, err := images.Busybox(dir)
	if err != nil {
		t.Fatal(err)
	}
	nginxTar, _, err := images.Nginx(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tar := range []string{pauseTar, busyboxTar, nginxTar} {
		if _, err := rt.ImportArchive(context.Background(), tar); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNodeImagesCached: status updates come every 10 s, the listing at
// most every nodeImagesMaxAge; a failed listing is retried at once.
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
	images := nodeImages(context.Background(), list, func() time.Time { return now })
	for range 3 {
		if got, err := images(); err != nil || len(got) != 1 || got[0].SizeBytes != 10 {
			t.Fatalf("images() = %v, %v", got, err)
		}
		now = now.Add(10 * time.Second)
	}
	if calls != 1 {
		t.Errorf("%d listings within %v, want 1", calls, nodeImagesMaxAge)
	}
	fail = true
	if _, err := images(); err == nil || calls != 2 {
		t.Errorf("listing after %v: err %v, %d calls, want a new failing listing", nodeImagesMaxAge, err, calls)
	}
	fail = false
	if _, err := images(); err != nil || calls != 3 {
		t.Errorf("after a failure: err %v, %d calls, want a new listing", err, calls)
	}
}
