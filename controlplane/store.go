package controlplane

import (
	"path/filepath"
	"time"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
	"github.com/nodelet/nodelet/controlplane/storage/etcd"
)

// EtcdConfig is where a control plane keeps its objects in etcd v3, with
// upstream kube-apiserver's flag names (--etcd-servers, ...).
type EtcdConfig struct {
	// Servers are etcd's client URLs; none keeps the objects in bbolt.
	Servers []string
	// CAFile, CertFile and KeyFile: the CA of etcd's serving certificates
	// and this control plane's client certificate and key (https servers).
	CAFile, CertFile, KeyFile string
	// Prefix is the key prefix of every object (default "/registry").
	Prefix string
	// CompactionInterval is how often etcd's history is compacted (0:
	// every 5 minutes; negative: never, when something else compacts).
	CompactionInterval time.Duration
}

// openStore opens the objects' store: etcd when servers are configured,
// otherwise bbolt's state.db in the data directory.
func (c *ControlPlane) openStore() (storage.Store, error) {
	e := c.cfg.Etcd
	if len(e.Servers) == 0 {
		db, err := bolt.Open(bolt.Config{Path: filepath.Join(c.cfg.DataDir, "state.db"), Log: c.cfg.Log})
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	db, err := etcd.New(etcd.Config{
		Endpoints: e.Servers, CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile,
		Prefix: e.Prefix, CompactInterval: e.CompactionInterval, Log: c.cfg.Log,
	})
	if err != nil {
		return nil, err
	}
	return db, nil
}
