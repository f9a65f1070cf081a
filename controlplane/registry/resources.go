package registry

// DefaultOptions returns the options upstream's kube-apiserver uses by
// default: 300 seconds for both default NoExecute tolerations.
func DefaultOptions() Options {
	return Options{
		DefaultNotReadyTolerationSeconds:    300,
		DefaultUnreachableTolerationSeconds: 300,
	}
}

// All returns every resource the control plane serves, each freshly built
// (callers may modify what they get). Resources of the same group version
// are adjacent and ordered as upstream's discovery lists them.
func All(opts Options) []*Resource {
	return []*Resource{
		configMapResource(),
		endpointsResource(),
		eventResource(),
		namespaceResource(),
		nodeResource(),
		podResource(opts),
		secretResource(),
		serviceAccountResource(),
		serviceResource(),
		deploymentResource(),
		replicaSetResource(),
		leaseResource(),
		endpointSliceResource(),
	}
}
