// Package pleg is the pod lifecycle event generator, as upstream's
// kubelet pleg/generic.go: it relists the runtime's pods every Period (and
// at once when the runtime hints that something happened), diffs the new
// records against the old ones per container and per sandbox, and sends
// lifecycle events without ever blocking. It keeps the latest runtime
// status of every pod in a Cache and reports its own health.
package pleg

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// EventType is the kind of a lifecycle event.
type EventType string

const (
	// ContainerStarted: a container is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: a container is no longer running.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: a container is gone from the runtime.
	ContainerRemoved EventType = "ContainerRemoved"
	// SandboxChanged: a sandbox appeared, changed state or went away.
	SandboxChanged EventType = "SandboxChanged"
	// PodSync: something else changed (a container created or in an
	// unknown state); the pod should be synced.
	PodSync EventType = "PodSync"
)

// Event is one lifecycle event of one pod.
type Event struct {
	PodUID types.UID
	Type   EventType
	// Data is the container or sandbox ID.
	Data string
}

// state of one container or sandbox in a record; absent means it does not
// exist.
type state = runtime.State

const stateNonExistent state = "non-existent"

// computeEvents diffs the old and new records of one pod (either may be
// nil: the pod appeared or disappeared) and returns its events, containers
// in the order of the new record then the vanished ones, sandboxes last.
func computeEvents(uid types.UID, old, cur *runtime.PodStatus) []Event {
	var events []Event
	oldC, curC := containerStates(old), containerStates(cur)
	for _, id := range unionIDs(containerIDs(cur), containerIDs(old)) {
		events = append(events, containerEvents(uid, id, lookup(oldC, id), lookup(curC, id))...)
	}
	oldS, curS := sandboxStates(old), sandboxStates(cur)
	for _, id := range unionIDs(sandboxIDs(cur), sandboxIDs(old)) {
		if o, n := lookup(oldS, id), lookup(curS, id); o != n {
			events = append(events, Event{PodUID: uid, Type: SandboxChanged, Data: id})
		}
	}
	return events
}

// containerEvents is upstream's generateEvents for one container.
func containerEvents(uid types.UID, id string, old, cur state) []Event {
	if old == cur {
		return nil
	}
	ev := func(t EventType) Event { return Event{PodUID: uid, Type: t, Data: id} }
	switch cur {
	case runtime.StateRunning:
		return []Event{ev(ContainerStarted)}
	case runtime.StateExited:
		return []Event{ev(ContainerDied)}
	case stateNonExistent:
		if old == runtime.StateExited {
			return []Event{ev(ContainerRemoved)} // its death was already reported
		}
		return []Event{ev(ContainerDied), ev(ContainerRemoved)}
	}
	return []Event{ev(PodSync)} // created or unknown
}

func lookup(m map[string]state, id string) state {
	if s, ok := m[id]; ok {
		return s
	}
	return stateNonExistent
}

func containerStates(s *runtime.PodStatus) map[string]state {
	m := map[string]state{}
	if s != nil {
		for _, c := range s.Containers {
			m[c.ID] = c.State
		}
	}
	return m
}

func sandboxStates(s *runtime.PodStatus) map[string]state {
	m := map[string]state{}
	if s != nil {
		for _, sb := range s.Sandboxes {
			m[sb.ID] = sb.State
		}
	}
	return m
}

func containerIDs(s *runtime.PodStatus) []string {
	if s == nil {
		return nil
	}
	ids := make([]string, len(s.Containers))
	for i, c := range s.Containers {
		ids[i] = c.ID
	}
	return ids
}

func sandboxIDs(s *runtime.PodStatus) []string {
	if s == nil {
		return nil
	}
	ids := make([]string, len(s.Sandboxes))
	for i, sb := range s.Sandboxes {
		ids[i] = sb.ID
	}
	return ids
}

// unionIDs returns a's IDs then b's that are not in a, without duplicates.
func unionIDs(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, list := range [][]string{a, b} {
		for _, id := range list {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}
