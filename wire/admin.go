package wire

import "time"

// The JSON shapes of the admin endpoints (/v1/admin/...): membership, raft configurations,
// placement. See docs/api.md, "Admin endpoints".

// Suffrages of a RaftServer and a ReplicaLag.
const (
	// SuffrageVoter: the server votes and counts toward the partition's quorum.
	SuffrageVoter = "voter"
	// SuffrageNonvoter: the server receives the log but does not vote (a replica being added,
	// catching up).
	SuffrageNonvoter = "nonvoter"
)

// NodesResponse answers GET /v1/admin/nodes: Self is the answering node's id, Nodes every node
// it knows (the topology's, gossip's and those learned from raft configurations), by id.
type NodesResponse struct {
	Self  string   `json:"self"`
	Nodes []Member `json:"nodes"`
}

// Member is a node as the answering node knows it: its addresses, its gossip State ("alive",
// "suspect", "dead", "left"; "unknown" without gossip or not seen by it), the software Version
// it gossips, the Replicas it last gossiped (without gossip, only the answering node's own;
// null when none is known) and UpdatedAt, when that gossip arrived (the zero time without).
type Member struct {
	ID         string          `json:"id"`
	HTTPAddr   string          `json:"http_addr"`
	RaftAddr   string          `json:"raft_addr"`
	GossipAddr string          `json:"gossip_addr,omitempty"`
	Version    string          `json:"version,omitempty"`
	Zone       string          `json:"zone,omitempty"`
	State      string          `json:"state"`
	Replicas   []MemberReplica `json:"replicas"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// MemberReplica is one partition replica a node hosts, as that node last gossiped it: whether
// it led the partition and the raft index its store had applied.
type MemberReplica struct {
	Datastore    string `json:"datastore"`
	Partition    int    `json:"partition"`
	Leader       bool   `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
}

// PartitionsResponse answers GET /v1/admin/partitions[?datastore=D]: one report per partition,
// datastore by datastore in topology order, partitions by id.
type PartitionsResponse struct {
	Partitions []PartitionReport `json:"partitions"`
}

// RaftServer is one server of a partition's raft configuration: the node, its raft address and
// its Suffrage (SuffrageVoter or SuffrageNonvoter). Learner is set on a nonvoter that the
// catalog records as one of the partition's learners (a permanent nonvoter, POST
// .../learners), as the answering node's catalog has it; a nonvoter without it is a replica
// being added.
type RaftServer struct {
	Node     string `json:"node"`
	Addr     string `json:"addr"`
	Suffrage string `json:"suffrage"`
	Learner  bool   `json:"learner,omitempty"`
	// Zone is the node's zone (topology.NodeSpec.Zone) as this node knows it, "" for none.
	Zone string `json:"zone,omitempty"`
}

// PartitionConfig is a partition's raft configuration as its leader sees it: the answer of
// every admin change (add or remove a voter, transfer leadership, move a replica). Leader is
// the leading node's id ("" when none is known); Term, CommitIndex and LastIndex the leader's
// raft state; Servers the configuration, voters and nonvoters.
type PartitionConfig struct {
	Datastore   string       `json:"datastore"`
	Partition   int          `json:"partition"`
	Leader      string       `json:"leader"`
	Term        uint64       `json:"term"`
	CommitIndex uint64       `json:"commit_index"`
	LastIndex   uint64       `json:"last_index"`
	Servers     []RaftServer `json:"servers"`
}

// Voters returns the ids of the configuration's voters, in configuration order (nil when
// there is none).
func (c PartitionConfig) Voters() []string {
	var out []string
	for _, s := range c.Servers {
		if s.Suffrage == SuffrageVoter {
			out = append(out, s.Node)
		}
	}
	return out
}

// ReplicaLag is one replica of a raft partition as its node reports it: its Suffrage, its raft
// State on that node ("Leader", "Follower", "Candidate"; "" when unreachable), the raft index
// its store applied and its last log index, Lag (the leader's LastIndex minus AppliedIndex),
// whether the node answered within 2 s (Reachable) and Error, why not or what else is wrong
// ("the node hosts no replica").
type ReplicaLag struct {
	Node         string `json:"node"`
	Suffrage     string `json:"suffrage"`
	State        string `json:"state"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	Lag          uint64 `json:"lag"`
	Reachable    bool   `json:"reachable"`
	Error        string `json:"error,omitempty"`
}

// PartitionReport is one partition in GET /v1/admin/partitions: its configuration from its
// leader (the embedded PartitionConfig, whose fields the JSON object holds directly), its Mode
// ("raft" or "async"), its shards, Cluster (async partitions: the storage cluster; they have no
// servers or replicas), and Replicas, one per server as its node reports it. Error is set when
// the configuration could not be read (no leader within 3 s); Replicas then lists the replicas
// last known, each with the error "configuration unknown".
type PartitionReport struct {
	PartitionConfig
	Mode       string       `json:"mode"`
	FirstShard int          `json:"first_shard"`
	LastShard  int          `json:"last_shard"`
	Cluster    string       `json:"cluster,omitempty"`
	Replicas   []ReplicaLag `json:"replicas"`
	Error      string       `json:"error,omitempty"`
}

// NodeRequest is the body of POST /v1/admin/partitions/{ds}/{p}/voters (the node to add,
// required) and of POST .../leader (the voter to lead; "" lets raft pick another voter).
type NodeRequest struct {
	Node string `json:"node"`
}

// MoveRequest is the body of POST /v1/admin/partitions/{ds}/{p}/move: the node whose replica
// moves and the node it moves to, both required.
type MoveRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// RebalanceRequest is the body of POST /v1/admin/rebalance, every field optional: Datastore
// limits the rebalance to one raft datastore ("" = all); Nodes are the nodes to spread
// replicas over (default: every node gossip sees alive, or every known node without gossip);
// Exclude are nodes to move every replica and leadership off; DryRun plans and changes nothing.
type RebalanceRequest struct {
	Datastore string   `json:"datastore,omitempty"`
	Nodes     []string `json:"nodes,omitempty"`
	Exclude   []string `json:"exclude,omitempty"`
	DryRun    bool     `json:"dry_run,omitempty"`
}

// DrainRequest is the optional body of POST /v1/admin/nodes/{node}/drain.
type DrainRequest struct {
	DryRun bool `json:"dry_run"`
}

// Move is one replica move of a rebalance or drain: partition Partition of Datastore from node
// From to node To.
type Move struct {
	Datastore string `json:"datastore"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// Transfer is one leadership transfer of a rebalance or drain (From "" when the partition had
// no known leader).
type Transfer struct {
	Datastore string `json:"datastore"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// RebalanceReport answers POST /v1/admin/rebalance and POST /v1/admin/nodes/{node}/drain: the
// nodes considered (excluded ones included), replicas and leaderships per node before and after,
// the Moves and Transfers done (or planned, with DryRun; null when none), how long it took
// (0 for a dry run), and for a drain of a catalog voter where its vote went.
type RebalanceReport struct {
	Nodes           []string       `json:"nodes"`
	ReplicasBefore  map[string]int `json:"replicas_before"`
	ReplicasAfter   map[string]int `json:"replicas_after"`
	LeadersBefore   map[string]int `json:"leaders_before"`
	LeadersAfter    map[string]int `json:"leaders_after"`
	Moves           []Move         `json:"moves"`
	Transfers       []Transfer     `json:"transfers"`
	DurationSeconds float64        `json:"duration_seconds"`
	DryRun          bool           `json:"dry_run,omitempty"`
	// CatalogVoters, for a drain of one of the catalog's voters, are the catalog's voters
	// after it (the drained node's vote moved to another node: POST /v1/admin/catalog/voters),
	// or as they are when no other node could take the vote (CatalogVoteKept).
	CatalogVoters   []string `json:"catalog_voters,omitempty"`
	CatalogVoteKept bool     `json:"catalog_vote_kept,omitempty"`
	// Zones maps each node of the plan that has a zone to it (absent: no node has one).
	Zones map[string]string `json:"zones,omitempty"`
	// Warnings say, partition by partition, what the placement after the plan cannot meet: a
	// zone holding a majority of a partition's voters (too few zones or nodes), a partition
	// with no voter in its datastore's leader zone.
	Warnings []string `json:"warnings,omitempty"`
}
