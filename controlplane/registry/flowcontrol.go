package registry

import (
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// flowControlResources serve flowcontrol.apiserver.k8s.io/v1 FlowSchemas
// and PriorityLevelConfigurations: cluster-scoped, with status and a
// generation bumped on spec changes, as upstream's strategies
// (pkg/registry/flowcontrol). The API server's in-flight limiter is
// upstream's classic one; these objects are served (with upstream's
// bootstrap configuration, controlplane/flowcontrol) for the tools and
// charts that read or ship them.
func flowControlResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: flowcontrolv1.SchemeGroupVersion, Name: "flowschemas", Kind: "FlowSchema", ListKind: "FlowSchemaList",
			Verbs: allVerbs(), Subresources: []string{"status"}, TrackGeneration: true,
			New:              func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
			NewList:          func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
			PrepareForCreate: mutate(func(fs *flowcontrolv1.FlowSchema) { fs.Status = flowcontrolv1.FlowSchemaStatus{} }),
			PrepareForUpdate: mutate2(func(fs, old *flowcontrolv1.FlowSchema) { fs.Status = *old.Status.DeepCopy() }),
			PrepareForStatusUpdate: mutate2(func(fs, old *flowcontrolv1.FlowSchema) {
				fs.Spec = *old.Spec.DeepCopy()
				keepMetaForStatus(&fs.ObjectMeta, &old.ObjectMeta)
			}),
			SpecChanged: changed(func(fs, old *flowcontrolv1.FlowSchema) bool {
				return !apiequality.Semantic.DeepEqual(fs.Spec, old.Spec)
			}),
			Columns: []metav1.TableColumnDefinition{
				nameColumn(),
				{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
				{Name: "MatchingPrecedence", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]},
				{Name: "DistinguisherMethod", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]},
				ageColumn(),
				{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
			},
			Row: row(flowSchemaRow),
		},
		{
			GroupVersion: flowcontrolv1.SchemeGroupVersion, Name: "prioritylevelconfigurations", Kind: "PriorityLevelConfiguration",
			ListKind: "PriorityLevelConfigurationList", Verbs: allVerbs(), Subresources: []string{"status"}, TrackGeneration: true,
			New:     func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
			NewList: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
			PrepareForCreate: mutate(func(pl *flowcontrolv1.PriorityLevelConfiguration) {
				pl.Status = flowcontrolv1.PriorityLevelConfigurationStatus{}
			}),
			PrepareForUpdate: mutate2(func(pl, old *flowcontrolv1.PriorityLevelConfiguration) { pl.Status = *old.Status.DeepCopy() }),
			PrepareForStatusUpdate: mutate2(func(pl, old *flowcontrolv1.PriorityLevelConfiguration) {
				pl.Spec = *old.Spec.DeepCopy()
				keepMetaForStatus(&pl.ObjectMeta, &old.ObjectMeta)
			}),
			SpecChanged: changed(func(pl, old *flowcontrolv1.PriorityLevelConfiguration) bool {
				return !apiequality.Semantic.DeepEqual(pl.Spec, old.Spec)
			}),
			Columns: []metav1.TableColumnDefinition{
				nameColumn(),
				{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
				{Name: "NominalConcurrencyShares", Type: "string", Description: flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]},
				{Name: "Queues", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queues"]},
				{Name: "HandSize", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["handSize"]},
				{Name: "QueueLengthLimit", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queueLengthLimit"]},
				ageColumn(),
			},
			Row: row(priorityLevelRow),
		},
	}
}

// flowSchemaRow is upstream's printer: the precedence, the distinguisher
// method or "<none>", MissingPL from the Dangling condition ("?" when
// there is none).
func flowSchemaRow(fs *flowcontrolv1.FlowSchema, now time.Time) []interface{} {
	method := "<none>"
	if fs.Spec.DistinguisherMethod != nil {
		method = string(fs.Spec.DistinguisherMethod.Type)
	}
	missing := "?"
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
		}
	}
	return []interface{}{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, fmt.Sprint(fs.Spec.MatchingPrecedence),
		method, age(fs.CreationTimestamp, now), missing}
}

// priorityLevelRow is upstream's printer: "<none>" for what an exempt
// level has not.
func priorityLevelRow(pl *flowcontrolv1.PriorityLevelConfiguration, now time.Time) []interface{} {
	shares, queues, hand, limit := "<none>", "<none>", "<none>", "<none>"
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares != nil {
			shares = fmt.Sprint(*l.NominalConcurrencyShares)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			queues, hand, limit = fmt.Sprint(q.Queues), fmt.Sprint(q.HandSize), fmt.Sprint(q.QueueLengthLimit)
		}
	}
	return []interface{}{pl.Name, string(pl.Spec.Type), shares, queues, hand, limit, age(pl.CreationTimestamp, now)}
}
