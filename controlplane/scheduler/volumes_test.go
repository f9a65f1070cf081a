package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

// A delayed claim is matched against the volumes of its own class only.
func TestCandidateVolumesByClass(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{classIndex: volumeClass})
	for name, class := range map[string]string{"a1": "a", "a2": "a", "b1": "b", "none": ""} {
		if err := idx.Add(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{StorageClassName: class}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(class string) plugins.DelayedClaim {
		return plugins.DelayedClaim{Claim: &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)}}}
	}
	l := volumeListers{byClass: idx}
	for _, tc := range []struct {
		delayed []plugins.DelayedClaim
		want    int
	}{
		{[]plugins.DelayedClaim{claim("a")}, 2},
		{[]plugins.DelayedClaim{claim("a"), claim("a"), claim("b")}, 3},
		{[]plugins.DelayedClaim{claim("")}, 1},
		{[]plugins.DelayedClaim{claim("c")}, 0},
	} {
		got, err := l.candidateVolumes(tc.delayed)
		if err != nil || len(got) != tc.want {
			t.Errorf("%d claims: %d volumes, %v; want %d", len(tc.delayed), len(got), err, tc.want)
		}
	}
}
