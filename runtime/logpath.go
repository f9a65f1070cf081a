package runtime

// Where container logs live: CRI log files (package containerlogs) under
// one root, named so that kubectl logs, the container GC and a restarted
// nodelet find them from the pod and container alone.

import (
	"fmt"
	"path/filepath"
)

// DefaultLogRoot is where container logs go unless configured otherwise.
const DefaultLogRoot = "/var/log/pods"

// ContainerLogPath is the CRI log file of a container instance:
// <root>/<namespace>_<pod>_<uid>/<container>/<attempt>.log.
func ContainerLogPath(root, namespace, pod, uid, container string, attempt uint32) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", namespace, pod, uid), container, fmt.Sprintf("%d.log", attempt))
}
