package registry

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// The workload kinds' columns, cell for cell as upstream's printers
// (pkg/printers/internalversion) print them with Wide set, as
// kube-apiserver does for server-side tables.

func statefulSetColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		ageColumn(),
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	}
}

func statefulSetRow(ss *appsv1.StatefulSet, now time.Time) []interface{} {
	names, images := containerCells(ss.Spec.Template.Spec.Containers)
	return []interface{}{
		ss.Name, fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, ptr.Deref(ss.Spec.Replicas, 0)),
		age(ss.CreationTimestamp, now), names, images,
	}
}

func daemonSetColumns() []metav1.TableColumnDefinition {
	status := appsv1.DaemonSetStatus{}.SwaggerDoc()
	return append([]metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Desired", Type: "integer", Description: status["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: status["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: status["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: status["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: status["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
		ageColumn(),
	}, templateColumns(appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"])...)
}

func daemonSetRow(ds *appsv1.DaemonSet, now time.Time) []interface{} {
	s := ds.Status
	names, images := containerCells(ds.Spec.Template.Spec.Containers)
	return []interface{}{
		ds.Name, int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled), int64(s.NumberReady),
		int64(s.UpdatedNumberScheduled), int64(s.NumberAvailable), labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		age(ds.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(ds.Spec.Selector),
	}
}

func controllerRevisionColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Controller", Type: "string", Description: "Controller of the object"},
		{Name: "Revision", Type: "string", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
		ageColumn(),
	}
}

func controllerRevisionRow(cr *appsv1.ControllerRevision, now time.Time) []interface{} {
	controller := "<none>"
	if ref := metav1.GetControllerOf(cr); ref != nil {
		// kind.group/name in lower case, as upstream's formatResourceName.
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		controller = strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
	}
	return []interface{}{cr.Name, controller, cr.Revision, age(cr.CreationTimestamp, now)}
}
