package nodestatus

// AnnotationControllerManagedAttach on a Node lets the control plane's
// attach/detach controller attach and detach its volumes (upstream's
// volumes.kubernetes.io/controller-managed-attach-detach, which the
// kubelet sets by default): the node agent itself attaches nothing and
// waits for the VolumeAttachments the controller creates.
const AnnotationControllerManagedAttach = "volumes.kubernetes.io/controller-managed-attach-detach"
