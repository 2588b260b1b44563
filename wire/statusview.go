package wire

// PartitionView is one partition as several nodes see it (PartitionViews): its datastore, id
// and shards, the first leader any node names ("" when none does), and, per node in the order
// of the statuses, the partition as that node sees it (the zero PartitionStatus when it does
// not list it; State is "" when it hosts no replica).
type PartitionView struct {
	Datastore             string
	Partition             int
	FirstShard, LastShard int
	Leader                string
	Nodes                 []PartitionStatus
}

// PartitionViews merges the answers of several nodes to GET /v1/cluster (one per node; a node
// that did not answer is a zero ClusterStatus) into one view per partition, in the order the
// partitions first appear, as `schemaless status` shows them.
func PartitionViews(sts []ClusterStatus) []PartitionView {
	var views []PartitionView
	index := map[[2]any]int{}
	for i, st := range sts {
		for _, d := range st.Datastores {
			for _, p := range d.Partitions {
				k := [2]any{d.Name, p.ID}
				j, ok := index[k]
				if !ok {
					j = len(views)
					index[k] = j
					views = append(views, PartitionView{Datastore: d.Name, Partition: p.ID, FirstShard: p.FirstShard, LastShard: p.LastShard,
						Nodes: make([]PartitionStatus, len(sts))})
				}
				v := &views[j]
				v.Nodes[i] = p
				if v.Leader == "" {
					v.Leader = p.Leader
				}
			}
		}
	}
	return views
}
