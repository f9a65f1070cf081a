package nodelet

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/podlifecycle"

	"github.com/nodelet/nodelet/kubeletmetrics"
)

// pullTimingRecorder passes the Syncer's events on and tells the pod start
// tracker when a pod's image pulls start and succeed, so that
// kubelet_pod_start_sli_duration_seconds leaves pull time out as
// upstream's does. The Syncer's Pulling and Pulled events are emitted
// exactly where upstream's image manager calls its tracker (before a pull
// and after it succeeded; a "Pulled" for an image already present is
// ignored by the tracker when no pull started). A hook on the Syncer's
// ensureImage would do the same without reading event reasons.
type pullTimingRecorder struct {
	podlifecycle.EventRecorder
	tracker *kubeletmetrics.PodStartTracker
}

func (r pullTimingRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if ref, ok := object.(*corev1.ObjectReference); ok && ref.Kind == "Pod" {
		switch reason {
		case podlifecycle.EventPulling:
			r.tracker.StartedPulling(ref.UID)
		case podlifecycle.EventPulled:
			r.tracker.FinishedPulling(ref.UID)
		}
	}
	r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
}
