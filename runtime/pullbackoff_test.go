package runtime

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pullBackoffOf holds the pulls of the given container=image pairs of pod
// uid-1 for the given remaining delays.
func pullBackoffOf(held map[string]time.Duration, images map[string]string) PullBackoffFunc {
	return func(uid types.UID, container, image string) (time.Duration, bool) {
		d, ok := held[container]
		if uid != "uid-1" || !ok || images[container] != image {
			return 0, false
		}
		return d, true
	}
}

// crash holds the restart of the named containers with a 20s back-off.
func crash(names ...string) BackoffFunc {
	return func(_ types.UID, name string, _ time.Time) (time.Duration, bool) {
		for _, n := range names {
			if n == name {
				return 20 * time.Second, true
			}
		}
		return 0, false
	}
}

func pullWaiting(image string) corev1.ContainerStateWaiting {
	return corev1.ContainerStateWaiting{Reason: ReasonImagePullBackOff, Message: `Back-off pulling image "` + image + `"`}
}

var crashWaitingA = corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff,
	Message: "back-off 20s restarting failed container=a pod=web_prod(uid-1)"}

func TestComputePodActionsPullBackoff(t *testing.T) {
	now := t0.Add(5 * time.Second) // crash back-off of 20s: 15s left
	images := map[string]string{"a": "img-a:1", "b": "img-b:1", "init0": "init:1", "init1": "init:1"}
	tests := []struct {
		name        string
		inits       int
		status      *PodStatus
		crash       BackoffFunc
		pull        map[string]time.Duration
		pullImages  map[string]string // the images in back-off (default: the spec's)
		wantStart   []int
		wantInit    []int
		wantWaiting map[string]corev1.ContainerStateWaiting
		wantRetry   time.Duration
		wantCreate  bool
	}{
		{name: "app container held, other starts", status: status(sb(goodSandbox())),
			pull: map[string]time.Duration{"a": 8 * time.Second}, wantStart: []int{1},
			wantWaiting: map[string]corev1.ContainerStateWaiting{"a": pullWaiting("img-a:1")}, wantRetry: 8 * time.Second},
		{name: "new sandbox: app containers held, sandbox still created", status: status(nil),
			pull:      map[string]time.Duration{"a": 8 * time.Second, "b": 3 * time.Second},
			wantStart: []int{}, wantCreate: true, wantRetry: 3 * time.Second,
			wantWaiting: map[string]corev1.ContainerStateWaiting{"a": pullWaiting("img-a:1"), "b": pullWaiting("img-b:1")}},
		{name: "another image is not in back-off", status: status(sb(goodSandbox())),
			pull: map[string]time.Duration{"a": 8 * time.Second}, pullImages: map[string]string{"a": "img-a:0"},
			wantStart: []int{0, 1}, wantWaiting: map[string]corev1.ContainerStateWaiting{}},
		{name: "first init container held: nothing after it starts", inits: 2, status: status(nil),
			pull: map[string]time.Duration{"init0": 4 * time.Second}, wantStart: []int{}, wantCreate: true,
			wantWaiting: map[string]corev1.ContainerStateWaiting{"init0": pullWaiting("init:1")}, wantRetry: 4 * time.Second},
		{name: "next init container held", inits: 2, status: status(sb(goodSandbox()), exited("init0", "init:1", 0)),
			pull: map[string]time.Duration{"init1": 4 * time.Second}, wantStart: []int{},
			wantWaiting: map[string]corev1.ContainerStateWaiting{"init1": pullWaiting("init:1")}, wantRetry: 4 * time.Second},
		{name: "RetryAfter: pull back-off sooner than crash back-off",
			status: status(sb(goodSandbox()), exited("a", "img-a:1", 1), exited("b", "img-b:1", 1)),
			crash:  crash("a"), pull: map[string]time.Duration{"b": 9 * time.Second}, wantStart: []int{}, wantRetry: 9 * time.Second,
			wantWaiting: map[string]corev1.ContainerStateWaiting{"a": crashWaitingA, "b": pullWaiting("img-b:1")}},
		{name: "RetryAfter: crash back-off sooner than pull back-off",
			status: status(sb(goodSandbox()), exited("a", "img-a:1", 1), exited("b", "img-b:1", 1)),
			crash:  crash("a"), pull: map[string]time.Duration{"b": 40 * time.Second}, wantStart: []int{}, wantRetry: 15 * time.Second,
			wantWaiting: map[string]corev1.ContainerStateWaiting{"a": crashWaitingA, "b": pullWaiting("img-b:1")}},
		{name: "in both back-offs: CrashLoopBackOff shows",
			status: status(sb(goodSandbox()), exited("a", "img-a:1", 1), running("b", "img-b:1")),
			crash:  crash("a"), pull: map[string]time.Duration{"a": 2 * time.Second}, wantStart: []int{}, wantRetry: 15 * time.Second,
			wantWaiting: map[string]corev1.ContainerStateWaiting{"a": crashWaitingA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := planPod(corev1.RestartPolicyAlways, tt.inits)
			in := images
			if tt.pullImages != nil {
				in = tt.pullImages
			}
			got := ComputePodActions(pod, PlanInputs{Status: tt.status, Now: now, Backoff: tt.crash, PullBackoff: pullBackoffOf(tt.pull, in)})
			if !reflect.DeepEqual(got.ContainersToStart, tt.wantStart) || !reflect.DeepEqual(got.InitContainersToStart, tt.wantInit) ||
				(got.NextInitContainerToStart != nil) != (tt.wantInit != nil) || got.CreateSandbox != tt.wantCreate {
				t.Errorf("start: containers %v, init %v (%v), create %v; want %v, %v, %v",
					got.ContainersToStart, got.InitContainersToStart, got.NextInitContainerToStart, got.CreateSandbox, tt.wantStart, tt.wantInit, tt.wantCreate)
			}
			if !reflect.DeepEqual(got.Waiting, tt.wantWaiting) {
				t.Errorf("Waiting = %v, want %v", got.Waiting, tt.wantWaiting)
			}
			if got.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", got.RetryAfter, tt.wantRetry)
			}
		})
	}
}

// A nil PullBackoff holds nothing back (and the plan is unchanged).
func TestComputePodActionsNilPullBackoff(t *testing.T) {
	pod := planPod(corev1.RestartPolicyAlways, 0)
	got := ComputePodActions(pod, PlanInputs{Status: status(sb(goodSandbox())), Now: t0})
	if !reflect.DeepEqual(got.ContainersToStart, []int{0, 1}) || len(got.Waiting) != 0 || got.RetryAfter != 0 {
		t.Errorf("nil PullBackoff: %+v", got)
	}
}

func TestPullBackoff(t *testing.T) {
	now := t0
	b := NewPullBackoff(DefaultPullBackoffInitial, DefaultPullBackoffMax, func() time.Time { return now })
	check := func(step, image string, want time.Duration) {
		t.Helper()
		d, wait := b.InBackoff("u", "c", image)
		if d != want || wait != (want > 0) {
			t.Errorf("%s: InBackoff(%s) = %v, %v; want %v", step, image, d, wait, want)
		}
	}
	check("no failure", "img:1", 0)

	// Doubling from 10s, capped at 5m; each failure after the wait ends.
	for i, want := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
		b.Failed("u", "c", "img:1")
		check("failure "+string(rune('1'+i)), "img:1", want*time.Second)
		now = now.Add(4 * time.Second)
		check("4s later", "img:1", want*time.Second-4*time.Second)
		now = now.Add(want*time.Second - 4*time.Second)
		check("wait over", "img:1", 0)
	}

	// Another image is not in back-off, and its failure starts over.
	b.Failed("u", "c", "img:1")
	check("capped", "img:1", 5*time.Minute)
	check("other image", "img:2", 0)
	b.Failed("u", "c", "img:2")
	check("other image failed", "img:2", 10*time.Second)
	check("old image", "img:1", 0)

	// Other containers and pods are apart.
	if _, wait := b.InBackoff("u", "d", "img:2"); wait {
		t.Error("other container in back-off")
	}
	if _, wait := b.InBackoff("v", "c", "img:2"); wait {
		t.Error("other pod in back-off")
	}

	// Success forgets: the next failure starts at 10s again.
	b.Failed("u", "c", "img:2")
	check("20s", "img:2", 20*time.Second)
	b.Succeeded("u", "c")
	check("succeeded", "img:2", 0)
	b.Failed("u", "c", "img:2")
	check("after success", "img:2", 10*time.Second)

	// No failure for more than twice the max: starts over.
	b.Failed("u", "c", "img:2")
	now = now.Add(2*DefaultPullBackoffMax + time.Second)
	b.Failed("u", "c", "img:2")
	check("long quiet", "img:2", 10*time.Second)

	// Forget drops the pod's containers only.
	b.Failed("u", "d", "img:3")
	b.Failed("v", "c", "img:3")
	b.Forget("u")
	check("forgotten", "img:2", 0)
	if _, wait := b.InBackoff("u", "d", "img:3"); wait {
		t.Error("Forget kept container d")
	}
	if _, wait := b.InBackoff("v", "c", "img:3"); !wait {
		t.Error("Forget dropped another pod")
	}

	// GC drops records older than twice the max; a failure later starts over.
	now = now.Add(2*DefaultPullBackoffMax + time.Second)
	b.Failed("w", "c", "img:4")
	b.GC()
	if n := len(b.entries); n != 1 {
		t.Errorf("after GC: %d entries, want 1", n)
	}
}
