package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Annotations the controller maintains, as upstream names them.
const (
	// RevisionAnnotation numbers rollouts on ReplicaSets and the Deployment.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions a ReplicaSet
	// served (set when a rollback reuses it).
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's replicas when the
	// ReplicaSet was last sized.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is replicas+maxSurge when the ReplicaSet was
	// last sized; proportional scaling reads it.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"

	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	rollbackToAnnotation  = "deprecated.deployment.rollback.to"

	// maxRevHistoryChars bounds the revision-history annotation.
	maxRevHistoryChars = 2000
)

// annotationsToSkip are not copied from the Deployment to its ReplicaSets.
var annotationsToSkip = map[string]bool{
	lastAppliedAnnotation:     true,
	RevisionAnnotation:        true,
	RevisionHistoryAnnotation: true,
	DesiredReplicasAnnotation: true,
	MaxReplicasAnnotation:     true,
	rollbackToAnnotation:      true,
}

// ComputeHash is the pod-template-hash of template: FNV-32a over the
// template's spew dump (the same dump upstream hashes), then collisionCount
// as 8 little-endian bytes when set, rendered with rand.SafeEncodeString. It
// matches upstream's controller.ComputeHash so ReplicaSets keep their names
// across controller implementations.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// equalIgnoreHash compares pod templates without the pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// findNewReplicaSet returns the oldest ReplicaSet whose template equals the
// Deployment's (ignoring the hash label), or nil. A rollback to an earlier
// template therefore finds that template's ReplicaSet again.
func findNewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rss...)
	sort.Sort(byCreation(sorted))
	for _, rs := range sorted {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// oldReplicaSets returns every ReplicaSet but newRS.
func oldReplicaSets(rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS == nil || rs.UID != newRS.UID {
			out = append(out, rs)
		}
	}
	return out
}

// revision parses obj's revision annotation (0 if absent or malformed).
func revision(m metav1.Object) int64 {
	v, err := strconv.ParseInt(m.GetAnnotations()[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revision(rs))
	}
	return m
}

func intAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// setReplicasAnnotations records desired and max replicas on rs; it reports
// whether anything changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range map[string]int32{DesiredReplicasAnnotation: desired, MaxReplicasAnnotation: maxReplicas} {
		s := strconv.Itoa(int(v))
		if rs.Annotations[k] != s {
			rs.Annotations[k] = s
			changed = true
		}
	}
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

// setNewReplicaSetAnnotations copies the Deployment's annotations (but the
// skipped ones) to the new ReplicaSet, raises its revision to newRevision
// if lower (remembering the old one in revision-history: that is a
// rollback), and for a ReplicaSet about to be created records the replicas
// annotations. It reports whether rs changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range d.Annotations {
		if annotationsToSkip[k] || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	oldStr, had := rs.Annotations[RevisionAnnotation]
	old, err := strconv.ParseInt(oldStr, 10, 64)
	if err != nil && oldStr != "" {
		return false // not ours to fix
	}
	if old < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			rs.Annotations[RevisionHistoryAnnotation] = appendRevisionHistory(rs.Annotations[RevisionHistoryAnnotation], oldStr)
		}
	}
	if !exists && setReplicasAnnotations(rs, deploymentReplicas(d), deploymentReplicas(d)+maxSurge(d)) {
		changed = true
	}
	return changed
}

// appendRevisionHistory appends rev to the comma-separated history, dropping
// the oldest entries to stay within maxRevHistoryChars.
func appendRevisionHistory(history, rev string) string {
	if history == "" {
		return rev
	}
	revs := append(strings.Split(history, ","), rev)
	for len(revs) > 1 && len(strings.Join(revs, ",")) > maxRevHistoryChars {
		revs = revs[1:]
	}
	return strings.Join(revs, ",")
}

// cleanupPlan returns the old ReplicaSets to delete so that at most
// revisionHistoryLimit remain: lowest revisions first, and only those with
// no pods, zero replicas, an observed spec and no deletion under way.
func cleanupPlan(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	diff := len(alive) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(alive, func(i, j int) bool {
		ri, rj := revision(alive[i]), revision(alive[j])
		if ri == rj {
			return byCreation(alive).Less(i, j)
		}
		return ri < rj
	})
	var out []*appsv1.ReplicaSet
	for _, rs := range alive[:diff] {
		if rs.Status.Replicas != 0 || specReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		out = append(out, rs)
	}
	return out
}
