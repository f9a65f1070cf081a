package registry

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Column definitions and rows below follow upstream's printers
// (pkg/printers/internalversion) cell for cell: integers are int64 cells,
// everything else strings.

// maxListed is how many addresses or ports a list cell shows before
// "+ N more...".
const maxListed = 3

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
}

func templateColumns(selectorDoc string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: selectorDoc},
	}
}

// containerCells lists the containers' names and images, comma-separated.
func containerCells(containers []corev1.Container) (string, string) {
	names := make([]string, len(containers))
	images := make([]string, len(containers))
	for i, c := range containers {
		names[i], images[i] = c.Name, c.Image
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

func deploymentColumns() []metav1.TableColumnDefinition {
	return append([]metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
		{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
		ageColumn(),
	}, templateColumns(appsv1.DeploymentSpec{}.SwaggerDoc()["selector"])...)
}

func deploymentRow(d *appsv1.Deployment, now time.Time) []interface{} {
	desired := int32(0)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	selector := "<invalid>"
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = sel.String()
	}
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	return []interface{}{
		d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired), int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas), age(d.CreationTimestamp, now), names, images, selector,
	}
}

func replicaSetColumns() []metav1.TableColumnDefinition {
	return append([]metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
		ageColumn(),
	}, templateColumns(appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"])...)
}

func replicaSetRow(rs *appsv1.ReplicaSet, now time.Time) []interface{} {
	desired := int64(0)
	if rs.Spec.Replicas != nil {
		desired = int64(*rs.Spec.Replicas)
	}
	names, images := containerCells(rs.Spec.Template.Spec.Containers)
	return []interface{}{
		rs.Name, desired, int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), age(rs.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(rs.Spec.Selector),
	}
}

func nodeColumns() []metav1.TableColumnDefinition {
	info, status := corev1.NodeSystemInfo{}.SwaggerDoc(), corev1.NodeStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		ageColumn(),
		{Name: "Version", Type: "string", Description: info["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: status["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: status["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: info["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: info["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: info["containerRuntimeVersion"]},
	}
}

// nodeRow shows Ready/NotReady (Unknown without a Ready condition), plus
// SchedulingDisabled for a cordoned node, and the roles from
// node-role.kubernetes.io/<role> and kubernetes.io/role labels.
func nodeRow(n *corev1.Node, now time.Time) []interface{} {
	var status []string
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = []string{string(c.Type)}
			} else {
				status = []string{"Not" + string(c.Type)}
			}
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	roles := sets.New[string]()
	for k, v := range n.Labels {
		if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && role != "" {
			roles.Insert(role)
		} else if k == "kubernetes.io/role" && v != "" {
			roles.Insert(v)
		}
	}
	rolesCell := orNone(strings.Join(sets.List(roles), ","))
	info := n.Status.NodeInfo
	return []interface{}{
		n.Name, strings.Join(status, ","), rolesCell, age(n.CreationTimestamp, now), info.KubeletVersion,
		nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP),
		orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion),
	}
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

func namespaceColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		ageColumn(),
	}
}

func namespaceRow(ns *corev1.Namespace, now time.Time) []interface{} {
	return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
}

func serviceColumns() []metav1.TableColumnDefinition {
	doc := corev1.ServiceSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Cluster-IP", Type: "string", Description: doc["clusterIP"]},
		{Name: "External-IP", Type: "string", Description: doc["externalIPs"]},
		{Name: "Port(s)", Type: "string", Description: doc["ports"]},
		ageColumn(),
		{Name: "Selector", Type: "string", Priority: 1, Description: doc["selector"]},
	}
}

func serviceRow(svc *corev1.Service, now time.Time) []interface{} {
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	ports := make([]string, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		ports[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	return []interface{}{
		svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), orNone(strings.Join(ports, ",")),
		age(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector),
	}
}

func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := sets.New[string]()
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				lb.Insert(ing.IP)
			} else if ing.Hostname != "" {
				lb.Insert(ing.Hostname)
			}
		}
		all := append(sets.List(lb), svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

func endpointsColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
		ageColumn(),
	}
}

// endpointsRow lists up to three ready address:port pairs (bare addresses
// for subsets without ports).
func endpointsRow(ep *corev1.Endpoints, now time.Time) []interface{} {
	if len(ep.Subsets) == 0 {
		return []interface{}{ep.Name, "<none>", age(ep.CreationTimestamp, now)}
	}
	var list []string
	count := 0
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) < maxListed {
					list = append(list, a.IP)
				}
			}
			continue
		}
		for _, port := range ss.Ports {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) < maxListed {
					list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
				}
			}
		}
	}
	cell := strings.Join(list, ",")
	if count > maxListed {
		cell = fmt.Sprintf("%s + %d more...", cell, count-maxListed)
	}
	return []interface{}{ep.Name, cell, age(ep.CreationTimestamp, now)}
}

func endpointSliceColumns() []metav1.TableColumnDefinition {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "AddressType", Type: "string", Description: doc["addressType"]},
		{Name: "Ports", Type: "string", Description: doc["ports"]},
		{Name: "Endpoints", Type: "string", Description: doc["endpoints"]},
		ageColumn(),
	}
}

func endpointSliceRow(s *discoveryv1.EndpointSlice, now time.Time) []interface{} {
	var ports, addrs []string
	for _, p := range s.Ports {
		switch {
		case p.Port != nil:
			ports = append(ports, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			ports = append(ports, *p.Name)
		default:
			ports = append(ports, "*")
		}
	}
	for _, e := range s.Endpoints {
		addrs = append(addrs, e.Addresses...)
	}
	return []interface{}{s.Name, string(s.AddressType), listWithMore(ports), listWithMore(addrs), age(s.CreationTimestamp, now)}
}

func listWithMore(list []string) string {
	if len(list) == 0 {
		return "<unset>"
	}
	if len(list) > maxListed {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:maxListed], ","), len(list)-maxListed)
	}
	return strings.Join(list, ",")
}

func eventColumns() []metav1.TableColumnDefinition {
	doc := corev1.Event{}.SwaggerDoc()
	ref := corev1.ObjectReference{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Reason", Type: "string", Description: doc["reason"]},
		{Name: "Object", Type: "string", Description: doc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: ref["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
		{Name: "Message", Type: "string", Description: doc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	}
}

// eventRow falls back from the legacy timestamps and count to the events.k8s.io
// ones (eventTime, series), as upstream's printer does.
func eventRow(e *corev1.Event, now time.Time) []interface{} {
	first := age(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		first = microAge(e.EventTime, now)
	}
	last := age(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last = microAge(e.Series.LastObservedTime, now)
		count = e.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}
	component, host := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if host == "" {
		host = e.ReportingInstance
	}
	source := component
	if host != "" {
		source += ", " + host
	}
	return []interface{}{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, source,
		strings.TrimSpace(e.Message), first, int64(count), e.Name}
}

func configMapColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
		ageColumn(),
	}
}

func configMapRow(cm *corev1.ConfigMap, now time.Time) []interface{} {
	return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
}

func secretColumns() []metav1.TableColumnDefinition {
	doc := corev1.Secret{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Data", Type: "string", Description: doc["data"]},
		ageColumn(),
	}
}

func secretRow(s *corev1.Secret, now time.Time) []interface{} {
	return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}
}

func serviceAccountColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]},
		ageColumn(),
	}
}

func serviceAccountRow(sa *corev1.ServiceAccount, now time.Time) []interface{} {
	return []interface{}{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp, now)}
}

func leaseColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		ageColumn(),
	}
}

func leaseRow(l *coordinationv1.Lease, now time.Time) []interface{} {
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []interface{}{l.Name, holder, age(l.CreationTimestamp, now)}
}
