package topology

import "strconv"

// StorageClustersOf returns one storage cluster per entry of members, in order: cluster i named
// "c<i>", members[i][0] its master and the rest its minions (DSNs). An entry with no member
// gives a cluster with no master, which Normalize rejects.
func StorageClustersOf(members [][]string) []StorageClusterSpec {
	out := make([]StorageClusterSpec, len(members))
	for i, ms := range members {
		out[i].Name = "c" + strconv.Itoa(i)
		if len(ms) > 0 {
			out[i].Master = ms[0]
			out[i].Minions = append([]string(nil), ms[1:]...)
		}
	}
	return out
}
