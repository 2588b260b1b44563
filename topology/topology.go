package topology

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/cells"
	"gopkg.in/yaml.v3"
)

// Datastore modes.
const (
	// ModeRaft: each partition is a raft group applying cells into its replicas' SQL stores.
	ModeRaft = "raft"
	// ModeAsync: each partition is a MySQL master with minions and buffered writes.
	ModeAsync = "async"
)

// MaxShards bounds a datastore's shard count (the storage layout's limit, cells.MaxShards).
const MaxShards = cells.MaxShards

var (
	nodeIDPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	datastorePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	// ZonePattern is what a zone name (NodeSpec.Zone, DatastoreSpec.LeaderZone) must match.
	ZonePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
)

// Topology is the static description of a cluster, shared by every node (YAML):
//
//	nodes:
//	  - {id: n1, raft_addr: 127.0.0.1:7170, http_addr: 127.0.0.1:7070}
//	datastores:
//	  - name: trips
//	    mode: raft
//	    shards: 64
//	    partition_count: 4        # equal contiguous shard ranges, or an explicit list:
//	    replicas: [n1, n2, n3]    # default: every node
//	    # partitions: [{id: 0, first_shard: 0, last_shard: 31, replicas: [n1, n2, n3]}, ...]
//	  - name: rides
//	    mode: async
//	    shards: 64
//	    storage_clusters:          # one partition per storage cluster, in this order
//	      - {name: c1, master: "schemaless@tcp(10.0.0.1:3306)/", minions: ["schemaless@tcp(10.0.0.2:3306)/"]}
//	      - {name: c2, master: "schemaless@tcp(10.0.1.1:3306)/", minions: ["schemaless@tcp(10.0.1.2:3306)/"]}
//	    buffer_clusters: 1         # buffered writes: copies on other clusters' masters
//	    # partitions: [{id: 0, first_shard: 0, last_shard: 31, cluster: c1}, ...]
type Topology struct {
	// ClusterName names the cluster among the clusters that replicate to each other (see
	// docs/operations.md, "Two datacenters"): cells.ValidateClusterName's form, unique among
	// them; `schemaless serve --cluster-name` overrides it. Optional: a cluster with no name
	// cannot replicate.
	ClusterName string          `yaml:"cluster_name,omitempty"`
	Nodes       []NodeSpec      `yaml:"nodes"`
	Datastores  []DatastoreSpec `yaml:"datastores"`
	// Security names the files of every node's TLS, principals and gossip key; `schemaless
	// serve` flags override it. Optional.
	Security SecuritySpec `yaml:"security,omitempty"`
}

// SecuritySpec names a node's security files (see docs/operations.md, Security). In every
// path, "{node}" is replaced by the node's id, so one topology serves every node
// (certs/node.{node}.crt). Relative paths are relative to the working directory of serve.
type SecuritySpec struct {
	TLSCert        string `yaml:"tls_cert,omitempty"`
	TLSKey         string `yaml:"tls_key,omitempty"`
	TLSCA          string `yaml:"tls_ca,omitempty"`
	PrincipalsFile string `yaml:"principals_file,omitempty"`
	GossipKeyFile  string `yaml:"gossip_key_file,omitempty"`
}

// For returns s with "{node}" replaced by id in every path.
func (s SecuritySpec) For(id string) SecuritySpec {
	r := func(p string) string { return strings.ReplaceAll(p, "{node}", id) }
	return SecuritySpec{TLSCert: r(s.TLSCert), TLSKey: r(s.TLSKey), TLSCA: r(s.TLSCA), PrincipalsFile: r(s.PrincipalsFile), GossipKeyFile: r(s.GossipKeyFile)}
}

// NodeSpec is one node. RaftAddr is the node's transport address (host:port), carrying raft
// traffic of every partition and node-to-node forwarding; HTTPAddr serves the HTTP API;
// GossipAddr (optional) is where it gossips membership (hashicorp/memberlist, TCP and UDP).
// Zone (optional, ZonePattern) is the failure domain the node is in (a datacenter's zone, a
// rack): placement keeps a partition's voters in as many distinct zones as it can, so that no
// zone holds a majority of them when there are three zones or more (docs/operations.md,
// Zones). Nodes without a zone are all in one unnamed zone.
type NodeSpec struct {
	ID         string `yaml:"id"`
	RaftAddr   string `yaml:"raft_addr"`
	HTTPAddr   string `yaml:"http_addr"`
	GossipAddr string `yaml:"gossip_addr,omitempty"`
	Zone       string `yaml:"zone,omitempty"`
}

// DatastoreSpec is one datastore. Shards is fixed at creation. Either Partitions lists the
// partitions, or PartitionCount (default 1) splits the shards into equal contiguous ranges, each
// replicated on Replicas (default: every node).
//
// In async mode a partition is a storage cluster (StorageClusters) instead of raft replicas:
// PartitionCount defaults to the number of storage clusters and partition i is served by
// storage cluster i, or Partitions name their Cluster. Replicas must be empty.
type DatastoreSpec struct {
	Name           string          `yaml:"name"`
	Mode           string          `yaml:"mode"`
	Shards         int             `yaml:"shards"`
	PartitionCount int             `yaml:"partition_count,omitempty"`
	Replicas       []string        `yaml:"replicas,omitempty"`
	Partitions     []PartitionSpec `yaml:"partitions,omitempty"`

	// Async mode only.

	// StorageClusters are the MySQL clusters holding the cells (at least one).
	StorageClusters []StorageClusterSpec `yaml:"storage_clusters,omitempty"`
	// BufferClusters is how many other clusters' masters hold a buffered copy of each write
	// before the primary master takes it. Default 1; at most len(StorageClusters)-1.
	BufferClusters int `yaml:"buffer_clusters,omitempty"`
	// UnsafeNoBufferedWrites turns buffered writes off: a write is acknowledged once the
	// primary master committed it, and is lost if that master dies before a minion received
	// it. Off by default; it exists to show what buffered writes protect against.
	UnsafeNoBufferedWrites bool `yaml:"unsafe_no_buffered_writes,omitempty"`
	// MySQLPrefix prefixes the databases of the datastore on its storage clusters
	// ("<prefix>_<datastore>_<shard>", "<prefix>_meta"). Default "sl".
	MySQLPrefix string `yaml:"mysql_prefix,omitempty"`

	// Raft mode only.

	// SplitLoad is the requests per second above which a partition of the datastore splits
	// on its own (serve --split-load sets the default; see cluster.AutoSplitConfig): 0 takes
	// the node's, a negative value turns load-based splitting off for the datastore.
	SplitLoad float64 `yaml:"split_load,omitempty"`
	// SplitSize is the bytes on disk (cells and shard logs, as the pebble store estimates them)
	// above which a partition of the datastore splits on its own (serve --split-size sets the
	// default): 0 takes the node's, a negative value turns size-based splitting off for the
	// datastore.
	SplitSize int64 `yaml:"split_size,omitempty"`
	// LeaderZone (optional, ZonePattern) is the zone whose nodes should lead the datastore's
	// partitions: a rebalance and the leadership transfers the cluster makes on its own (after
	// a split) pick a voter in it when one is alive. "" prefers none.
	LeaderZone string `yaml:"leader_zone,omitempty"`
}

// StorageClusterSpec is one MySQL storage cluster of an async datastore: the DSN of its
// master when the cluster was set up, and of its minions (go-sql-driver/mysql DSNs; the
// database part is ignored). The current master is found by probing the members (the one
// with read_only OFF replicating from nobody), so a promoted minion takes over without a
// topology change.
type StorageClusterSpec struct {
	Name    string   `yaml:"name"`
	Master  string   `yaml:"master"`
	Minions []string `yaml:"minions,omitempty"`
}

// Members returns the DSNs of every member: the configured master first, then the minions.
func (c StorageClusterSpec) Members() []string {
	return append([]string{c.Master}, c.Minions...)
}

// PartitionSpec is one partition: shards [FirstShard, LastShard] on Replicas (node ids), or in
// async mode on the storage cluster named Cluster.
type PartitionSpec struct {
	ID         int      `yaml:"id"`
	FirstShard int      `yaml:"first_shard"`
	LastShard  int      `yaml:"last_shard"`
	Replicas   []string `yaml:"replicas,omitempty"`
	Cluster    string   `yaml:"cluster,omitempty"`
	// Origin and Parent come from the cluster's catalog, never from a file: the range the
	// partition was created with (nil: its range) and the partition it was split from (nil:
	// none). See catalog.Partition.
	Origin *cells.ShardRange `yaml:"-" json:",omitempty"`
	Parent *int              `yaml:"-" json:",omitempty"`
}

// OriginShards returns the range the partition was created with: Origin, or its range.
func (p PartitionSpec) OriginShards() cells.ShardRange {
	if p.Origin != nil {
		return *p.Origin
	}
	return p.Shards()
}

// StorageCluster returns the storage cluster named name (async mode).
func (d *DatastoreSpec) StorageCluster(name string) (*StorageClusterSpec, bool) {
	for i := range d.StorageClusters {
		if d.StorageClusters[i].Name == name {
			return &d.StorageClusters[i], true
		}
	}
	return nil, false
}

// Shards returns the partition's shard range.
func (p PartitionSpec) Shards() cells.ShardRange {
	return cells.ShardRange{First: p.FirstShard, Last: p.LastShard}
}

// Load reads and validates a topology file.
func Load(path string) (*Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Parse decodes YAML (unknown fields are errors), fills defaults (partition lists from
// PartitionCount) and validates the result.
func Parse(r io.Reader) (*Topology, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var t Topology
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if err := t.Normalize(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Normalize fills the defaults (mode raft, one partition, replicas on every node, partition
// lists from PartitionCount) and validates the topology, reporting every problem found.
func (t *Topology) Normalize() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("topology: "+format, args...))
	}
	if len(t.Nodes) == 0 {
		add("no nodes")
	}
	if t.ClusterName != "" {
		if err := cells.ValidateClusterName("cluster_name", t.ClusterName); err != nil {
			add("%v", err)
		}
	}
	ids := map[string]bool{}
	addrs := map[string]string{}
	for i, n := range t.Nodes {
		if !nodeIDPattern.MatchString(n.ID) {
			add("nodes[%d].id %q must match %s", i, n.ID, nodeIDPattern)
		}
		if ids[n.ID] {
			add("nodes[%d].id %q is used twice", i, n.ID)
		}
		ids[n.ID] = true
		if n.Zone != "" && !ZonePattern.MatchString(n.Zone) {
			add("nodes[%d].zone %q must match %s", i, n.Zone, ZonePattern)
		}
		for _, f := range [...]struct{ field, addr string }{{"raft_addr", n.RaftAddr}, {"http_addr", n.HTTPAddr}} {
			field, a := f.field, f.addr
			if _, port, err := net.SplitHostPort(a); err != nil {
				add("nodes[%d].%s %q is not host:port", i, field, a)
			} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				add("nodes[%d].%s %q: the port must be a number in 1..65535 that other nodes can dial", i, field, a)
			} else if other, dup := addrs[a]; dup {
				add("nodes[%d].%s %q is also %s", i, field, a, other)
			} else {
				addrs[a] = fmt.Sprintf("nodes[%d].%s", i, field)
			}
		}
	}
	names := map[string]bool{}
	for i := range t.Datastores {
		d := &t.Datastores[i]
		if !datastorePattern.MatchString(d.Name) {
			add("datastores[%d].name %q must match %s", i, d.Name, datastorePattern)
		}
		if names[d.Name] {
			add("datastores[%d].name %q is used twice", i, d.Name)
		}
		names[d.Name] = true
		if d.Mode == "" {
			d.Mode = ModeRaft
		}
		if d.LeaderZone != "" && !ZonePattern.MatchString(d.LeaderZone) {
			add("datastores[%d].leader_zone %q must match %s", i, d.LeaderZone, ZonePattern)
		}
		async := d.Mode == ModeAsync
		if d.Mode != ModeRaft && !async {
			add("datastores[%d].mode %q is not supported (supported: %s, %s)", i, d.Mode, ModeRaft, ModeAsync)
		}
		if d.Shards < 1 || d.Shards > MaxShards {
			add("datastores[%d].shards %d must be in 1..%d", i, d.Shards, MaxShards)
			continue
		}
		if async {
			normalizeAsync(d, i, add)
		} else if len(d.StorageClusters) > 0 || d.BufferClusters != 0 || d.UnsafeNoBufferedWrites || d.MySQLPrefix != "" {
			add("datastores[%d]: storage_clusters, buffer_clusters, unsafe_no_buffered_writes and mysql_prefix are for mode async", i)
		}
		if len(d.Partitions) == 0 {
			if d.PartitionCount == 0 {
				d.PartitionCount = 1
				if async {
					d.PartitionCount = len(d.StorageClusters)
				}
			}
			if async && len(d.StorageClusters) == 0 {
				continue // reported above
			}
			if d.PartitionCount < 1 || d.PartitionCount > d.Shards {
				add("datastores[%d].partition_count %d must be in 1..shards (%d)", i, d.PartitionCount, d.Shards)
				continue
			}
			replicas := d.Replicas
			if len(replicas) == 0 {
				for _, n := range t.Nodes {
					replicas = append(replicas, n.ID)
				}
			}
			if async {
				replicas = nil
			}
			for p := 0; p < d.PartitionCount; p++ {
				ps := PartitionSpec{
					ID:         p,
					FirstShard: p * d.Shards / d.PartitionCount,
					LastShard:  (p+1)*d.Shards/d.PartitionCount - 1,
					Replicas:   append([]string(nil), replicas...),
				}
				if async && len(d.StorageClusters) > 0 {
					ps.Cluster = d.StorageClusters[p%len(d.StorageClusters)].Name
				}
				d.Partitions = append(d.Partitions, ps)
			}
		} else if d.PartitionCount != 0 && d.PartitionCount != len(d.Partitions) {
			add("datastores[%d]: partition_count %d disagrees with %d partitions listed", i, d.PartitionCount, len(d.Partitions))
		}
		d.PartitionCount = len(d.Partitions)
		sort.Slice(d.Partitions, func(a, b int) bool { return d.Partitions[a].FirstShard < d.Partitions[b].FirstShard })
		next := 0
		pids := map[int]bool{}
		for _, p := range d.Partitions {
			where := fmt.Sprintf("datastores[%d].partitions[id %d]", i, p.ID)
			if pids[p.ID] {
				add("%s: id used twice", where)
			}
			pids[p.ID] = true
			if p.FirstShard != next || p.LastShard < p.FirstShard || p.LastShard >= d.Shards {
				add("%s: shards %d..%d; partitions must cover 0..%d in order without gaps or overlaps", where, p.FirstShard, p.LastShard, d.Shards-1)
			}
			next = p.LastShard + 1
			if async {
				if len(p.Replicas) > 0 {
					add("%s: replicas are for mode raft; an async partition names its cluster", where)
				}
				if _, ok := d.StorageCluster(p.Cluster); !ok {
					add("%s: cluster %q is not one of storage_clusters", where, p.Cluster)
				}
				continue
			}
			if p.Cluster != "" {
				add("%s: cluster is for mode async", where)
			}
			if len(p.Replicas) == 0 {
				add("%s: no replicas", where)
			}
			seen := map[string]bool{}
			for _, r := range p.Replicas {
				if !ids[r] {
					add("%s: replica %q is not a node", where, r)
				}
				if seen[r] {
					add("%s: replica %q listed twice", where, r)
				}
				seen[r] = true
			}
		}
		if next != d.Shards && len(d.Partitions) > 0 {
			add("datastores[%d]: partitions cover shards 0..%d of 0..%d", i, next-1, d.Shards-1)
		}
	}
	return errors.Join(errs...)
}

var clusterNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// normalizeAsync fills the async defaults of datastore i and checks its storage clusters.
func normalizeAsync(d *DatastoreSpec, i int, add func(string, ...any)) {
	if len(d.Replicas) > 0 {
		add("datastores[%d].replicas are for mode raft; an async datastore lists storage_clusters", i)
	}
	if len(d.StorageClusters) == 0 {
		add("datastores[%d].storage_clusters: an async datastore needs at least one storage cluster", i)
	}
	if d.MySQLPrefix == "" {
		d.MySQLPrefix = "sl"
	}
	if !regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`).MatchString(d.MySQLPrefix) {
		add("datastores[%d].mysql_prefix %q must match ^[a-z][a-z0-9]{0,15}$", i, d.MySQLPrefix)
	}
	names := map[string]bool{}
	dsns := map[string]string{}
	for j, c := range d.StorageClusters {
		where := fmt.Sprintf("datastores[%d].storage_clusters[%d]", i, j)
		if !clusterNamePattern.MatchString(c.Name) {
			add("%s.name %q must match %s", where, c.Name, clusterNamePattern)
		}
		if names[c.Name] {
			add("%s.name %q is used twice", where, c.Name)
		}
		names[c.Name] = true
		if c.Master == "" {
			add("%s.master: a DSN is required", where)
		}
		for k, dsn := range c.Members() {
			field := "master"
			if k > 0 {
				field = fmt.Sprintf("minions[%d]", k-1)
			}
			if _, err := mysql.ParseDSN(dsn); err != nil && dsn != "" {
				add("%s.%s: %v", where, field, err)
			}
			if other, dup := dsns[dsn]; dup && dsn != "" {
				add("%s.%s is also %s", where, field, other)
			}
			dsns[dsn] = where + "." + field
		}
	}
	switch {
	case d.UnsafeNoBufferedWrites:
		if d.BufferClusters != 0 {
			add("datastores[%d]: buffer_clusters must be 0 with unsafe_no_buffered_writes", i)
		}
	case d.BufferClusters == 0 && len(d.StorageClusters) < 2:
		add("datastores[%d]: buffered writes need a second storage cluster (or unsafe_no_buffered_writes: true)", i)
	case d.BufferClusters == 0:
		d.BufferClusters = 1
	case d.BufferClusters < 0 || d.BufferClusters > len(d.StorageClusters)-1:
		add("datastores[%d].buffer_clusters %d must be in 1..%d (the other storage clusters)", i, d.BufferClusters, len(d.StorageClusters)-1)
	}
}

// Node returns the node with id.
func (t *Topology) Node(id string) (NodeSpec, bool) {
	for _, n := range t.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return NodeSpec{}, false
}

// Datastore returns the datastore named name.
func (t *Topology) Datastore(name string) (*DatastoreSpec, bool) {
	for i := range t.Datastores {
		if t.Datastores[i].Name == name {
			return &t.Datastores[i], true
		}
	}
	return nil, false
}

// PartitionOf returns the partition holding shard (shard must be in 0..Shards-1).
func (d *DatastoreSpec) PartitionOf(shard int) *PartitionSpec {
	i := sort.Search(len(d.Partitions), func(i int) bool { return d.Partitions[i].LastShard >= shard })
	if i == len(d.Partitions) {
		return nil
	}
	return &d.Partitions[i]
}
