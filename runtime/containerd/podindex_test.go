package containerd

import (
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

func listed(pairs ...string) []containers.Container {
	var out []containers.Container
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, containers.Container{ID: pairs[i+1], Labels: map[string]string{runtime.LabelPodUID: pairs[i]}})
	}
	return out
}

func (x *podIndex) ids(t *testing.T, uid types.UID) []string {
	t.Helper()
	ids, ok := x.containers(uid)
	if !ok {
		t.Fatal("index not primed")
	}
	slices.Sort(ids)
	return ids
}

// A full list replaces the index but never hides a container created
// after the list began; removals and creates show at once.
func TestPodIndex(t *testing.T) {
	x := newPodIndex()
	if _, ok := x.containers("a"); ok {
		t.Fatal("primed before any list")
	}
	x.replace(listed("a", "sb-a", "a", "c-a", "b", "sb-b"), x.begin())
	if got := x.ids(t, "a"); !slices.Equal(got, []string{"c-a", "sb-a"}) {
		t.Fatalf("pod a: %v", got)
	}
	// A list that began before a create does not hide it.
	since := x.begin()
	x.add("a", "c2-a")
	x.replace(listed("a", "sb-a", "b", "sb-b"), since)
	if got := x.ids(t, "a"); !slices.Equal(got, []string{"c2-a", "sb-a"}) {
		t.Fatalf("pod a after a list older than its create: %v, want c2-a kept and c-a gone", got)
	}
	// A list that began after the create is the truth.
	x.replace(listed("a", "sb-a", "b", "sb-b"), x.begin())
	if got := x.ids(t, "a"); !slices.Equal(got, []string{"sb-a"}) {
		t.Fatalf("pod a after a newer list: %v", got)
	}
	x.remove("sb-b")
	if got := x.ids(t, "b"); len(got) != 0 {
		t.Fatalf("pod b after its removal: %v", got)
	}
	x.add("", "no-pod") // not a pod's container: ignored
	if _, ok := x.owner["no-pod"]; ok {
		t.Fatal("a container without a pod UID was indexed")
	}
}
