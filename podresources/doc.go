// Package podresources is the pod resource arithmetic and the QoS class
// that the scheduler, node admission, cgroups, pod status and (later)
// eviction share, with upstream's semantics: requests and limits through
// k8s.io/component-helpers/resource (sidecars, init container peaks,
// overhead, pod-level resources), the class as upstream's ComputePodQOS.
// It is a leaf: it imports no package of this project.
package podresources
