package runtime

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// GCPolicy is the container garbage collection policy (upstream kubelet's
// kubecontainer.GCPolicy).
type GCPolicy struct {
	// MinAge is how long after its creation a dead container may go.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of one container of
	// one pod are kept, newest first (< 0: no limit).
	MaxPerPodContainer int
	// MaxContainers is how many dead containers the node keeps in all
	// (< 0: no limit).
	MaxContainers int
}

// DefaultGCPolicy is upstream's default: one dead instance per container,
// no node limit, no minimum age.
var DefaultGCPolicy = GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}

// RemovalKind tells what a Removal removes.
type RemovalKind string

const (
	RemoveContainerKind RemovalKind = "container"
	RemoveSandboxKind   RemovalKind = "sandbox"
)

// Removal is one container or sandbox the garbage collection removes.
type Removal struct {
	Kind   RemovalKind
	PodUID types.UID
	Pod    string // namespace/name, for logs
	ID     string
	Name   string // the container's name; "" for sandboxes
	// LogPath is the container's log file to remove with it; "" when it
	// has none or a kept instance writes the same file.
	LogPath string
	Reason  string
}

// Reasons of removals.
const (
	GCReasonPodGone      = "pod removed"
	GCReasonPerContainer = "dead instances per container"
	GCReasonNodeLimit    = "dead containers on the node"
	GCReasonOldSandbox   = "old dead sandbox"
)

// gcCandidate is one dead container instance that may be removed.
type gcCandidate struct {
	pod       *PodStatus
	cs        *ContainerStatus
	protected bool // the latest instance or latest exited one of a live pod
}

// PlanContainerGC decides which dead containers and sandboxes to remove,
// as upstream's kubelet: dead (exited) containers older than MinAge are
// evictable; pods that are not live lose them all; otherwise each
// container keeps its MaxPerPodContainer newest dead instances and the
// node its MaxContainers newest (spread evenly over the containers
// first, then oldest first). Unlike upstream, a live pod always keeps the
// latest instance and the latest exited instance of each container: the
// plan's back-off, the restart count (the next attempt's label) and
// `kubectl logs --previous` rely on them. Running or unknown containers
// are never removed. Dead sandboxes other than a live pod's newest are
// removed once they hold no container. Containers come first in the
// result, then sandboxes.
func PlanContainerGC(policy GCPolicy, pods []PodStatus, now time.Time, isPodLive func(types.UID) bool) []Removal {
	live := map[types.UID]bool{}
	units := map[string][]gcCandidate{} // by uid/name, newest first
	var keys []string
	var out []Removal
	for i := range pods {
		p := &pods[i]
		live[p.UID] = isPodLive(p.UID)
		for key, unit := range evictableUnits(p, live[p.UID], now.Add(-policy.MinAge)) {
			if live[p.UID] {
				units[key] = unit
				keys = append(keys, key)
				continue
			}
			for _, c := range unit {
				out = append(out, containerRemoval(c, GCReasonPodGone))
			}
		}
	}
	slices.Sort(keys)
	if policy.MaxPerPodContainer >= 0 {
		out = append(out, limitPerUnit(units, keys, policy.MaxPerPodContainer, GCReasonPerContainer)...)
	}
	if policy.MaxContainers >= 0 {
		out = append(out, limitNode(units, keys, policy.MaxContainers)...)
	}
	out = withLogPaths(out, pods)
	return append(out, planSandboxes(pods, live, out)...)
}

// evictableUnits groups a pod's dead containers older than newest by
// container name, newest first. A live pod's latest instance and latest
// exited instance of each name are marked protected.
func evictableUnits(p *PodStatus, live bool, newest time.Time) map[string][]gcCandidate {
	byName := map[string][]*ContainerStatus{}
	for i := range p.Containers {
		cs := &p.Containers[i]
		byName[cs.Name] = append(byName[cs.Name], cs)
	}
	units := map[string][]gcCandidate{}
	for name, list := range byName {
		slices.SortStableFunc(list, newerFirst)
		latestExited := slices.IndexFunc(list, func(cs *ContainerStatus) bool { return cs.State == StateExited })
		for i, cs := range list {
			dead := cs.State == StateExited || (!live && cs.State == StateCreated)
			if !dead || cs.CreatedAt.After(newest) {
				continue
			}
			key := string(p.UID) + "/" + name
			units[key] = append(units[key], gcCandidate{pod: p, cs: cs, protected: live && (i == 0 || i == latestExited)})
		}
	}
	return units
}

// newerFirst orders container instances newest first (by creation, then
// attempt).
func newerFirst(a, b *ContainerStatus) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.Attempt, a.Attempt)
}

// limitPerUnit removes what is beyond keep in each unit (oldest first),
// never a protected instance, and leaves the kept ones in units.
func limitPerUnit(units map[string][]gcCandidate, keys []string, keep int, reason string) []Removal {
	var out []Removal
	for _, key := range keys {
		unit := units[key]
		if len(unit) <= keep {
			continue
		}
		kept := unit[:keep:keep]
		for _, c := range unit[keep:] {
			if c.protected {
				kept = append(kept, c)
				continue
			}
			out = append(out, containerRemoval(c, reason))
		}
		units[key] = kept
	}
	return out
}

// limitNode brings the dead containers of live pods down to limit: first
// evenly over the units (at least one each), then oldest first.
func limitNode(units map[string][]gcCandidate, keys []string, limit int) []Removal {
	total := func() int {
		n := 0
		for _, key := range keys {
			n += len(units[key])
		}
		return n
	}
	if total() <= limit {
		return nil
	}
	out := limitPerUnit(units, keys, max(limit/max(len(keys), 1), 1), GCReasonNodeLimit)
	excess := total() - limit
	if excess <= 0 {
		return out
	}
	var all []gcCandidate
	for _, key := range keys {
		all = append(all, units[key]...)
	}
	slices.SortStableFunc(all, func(a, b gcCandidate) int { return newerFirst(b.cs, a.cs) }) // oldest first
	for _, c := range all {
		if excess == 0 {
			break
		}
		if !c.protected {
			out = append(out, containerRemoval(c, GCReasonNodeLimit))
			excess--
		}
	}
	return out
}

func containerRemoval(c gcCandidate, reason string) Removal {
	return Removal{Kind: RemoveContainerKind, PodUID: c.pod.UID, Pod: c.pod.Namespace + "/" + c.pod.Name,
		ID: c.cs.ID, Name: c.cs.Name, LogPath: c.cs.LogPath, Reason: reason}
}

// withLogPaths clears the log path of a removal when a container that
// stays writes the same file.
func withLogPaths(removals []Removal, pods []PodStatus) []Removal {
	removed := map[string]bool{}
	for _, r := range removals {
		removed[r.ID] = true
	}
	keptLogs := map[string]bool{}
	for i := range pods {
		for _, cs := range pods[i].Containers {
			if !removed[cs.ID] && cs.LogPath != "" {
				keptLogs[cs.LogPath] = true
			}
		}
	}
	for i := range removals {
		if keptLogs[removals[i].LogPath] {
			removals[i].LogPath = ""
		}
	}
	return removals
}

// planSandboxes removes the dead sandboxes that hold no container any
// more, except the newest sandbox of a live pod.
func planSandboxes(pods []PodStatus, live map[types.UID]bool, removals []Removal) []Removal {
	removed := map[string]bool{}
	for _, r := range removals {
		removed[r.ID] = true
	}
	var out []Removal
	for i := range pods {
		p := &pods[i]
		inUse := map[string]bool{}
		for _, cs := range p.Containers {
			if !removed[cs.ID] {
				inUse[cs.SandboxID] = true
			}
		}
		sbs := slices.Clone(p.Sandboxes)
		slices.SortStableFunc(sbs, func(a, b SandboxStatus) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return cmp.Compare(b.Attempt, a.Attempt)
		})
		for j, sb := range sbs {
			dead := sb.State == StateExited || (!live[p.UID] && sb.State == StateCreated)
			if !dead || inUse[sb.ID] || (live[p.UID] && j == 0) {
				continue
			}
			reason := GCReasonOldSandbox
			if !live[p.UID] {
				reason = GCReasonPodGone
			}
			out = append(out, Removal{Kind: RemoveSandboxKind, PodUID: p.UID, Pod: p.Namespace + "/" + p.Name, ID: sb.ID, Reason: reason})
		}
	}
	return out
}
