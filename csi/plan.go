package csi

import (
	"slices"
	"strings"
	"time"
)

// registration is a registration socket the Watcher has registered: the
// driver it named and the socket's modification time then (a socket made
// again at the same path is a new registration).
type registration struct {
	Name    string
	ModTime time.Time
}

type actionKind int

const (
	actDeregister actionKind = iota
	actRegister
)

func (k actionKind) String() string {
	if k == actRegister {
		return "register"
	}
	return "deregister"
}

// action is one step of a plan.
type action struct {
	Kind   actionKind
	Socket string
	// Name is the driver to deregister (register learns it from GetInfo).
	Name string
}

// plan compares the sockets seen in the registration directory (path →
// modification time) with those registered, as upstream's plugin manager
// reconciles its desired and actual states: a registered socket that is
// gone or was made again is deregistered, a seen socket that is not
// registered (again) is registered. Deregistrations come first, then
// registrations, each in path order.
func plan(seen map[string]time.Time, registered map[string]registration) []action {
	var dereg, reg []action
	for sock, r := range registered {
		mt, ok := seen[sock]
		if !ok || !mt.Equal(r.ModTime) {
			dereg = append(dereg, action{Kind: actDeregister, Socket: sock, Name: r.Name})
		}
	}
	for sock, mt := range seen {
		if r, ok := registered[sock]; !ok || !mt.Equal(r.ModTime) {
			reg = append(reg, action{Kind: actRegister, Socket: sock})
		}
	}
	bySocket := func(a, b action) int { return strings.Compare(a.Socket, b.Socket) }
	slices.SortFunc(dereg, bySocket)
	slices.SortFunc(reg, bySocket)
	return append(dereg, reg...)
}
