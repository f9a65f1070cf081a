package containerlogs

// The Client and the Logger speak JSON over the Logger's unix socket: one
// request, one response, in turn, on a connection the nodelet keeps open
// (the Logger ends itself only when no container is logged and no client
// is connected).

// request is one call. Op "add" registers a container (idempotent: a
// registered ID returns its FIFOs again), "remove" ends its logging once
// its output is drained (briefly), "ping" checks the Logger answers,
// "stats" returns what the logged containers' logs dropped.
type request struct {
	Op       string   `json:"op"`
	ID       string   `json:"id,omitempty"`
	LogPath  string   `json:"logPath,omitempty"`
	Rotation Rotation `json:"rotation,omitempty"`
}

// response answers a request; Error is empty on success.
type response struct {
	Error  string `json:"error,omitempty"`
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// Drops: "stats"' answer, by container ID, for the logged containers
	// whose log dropped output.
	Drops map[string]Drops `json:"drops,omitempty"`
}

// registration is a logged container, kept in DIR/streams/ID.json so a
// restarted Logger resumes it.
type registration struct {
	ID       string   `json:"id"`
	LogPath  string   `json:"logPath"`
	Rotation Rotation `json:"rotation"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr"`
}
