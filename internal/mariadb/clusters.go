package mariadb

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// DSNs returns the DSN of every member for the datastore's user (DSN), by cluster and member:
// [c][0] is cluster c's initial master, the others its minions. It is the shape
// topology.StorageClustersOf takes; after a failover the nodes find the current master among
// these members themselves.
func (s *ReplicatedSet) DSNs() [][]string {
	s.mu.Lock()
	sizes := make([]int, len(s.Clusters))
	for c, cl := range s.Clusters {
		sizes[c] = len(cl.Instances)
	}
	s.mu.Unlock()
	out := make([][]string, len(sizes))
	for c, n := range sizes {
		for m := range n {
			out[c] = append(out[c], s.DSN(c, m))
		}
	}
	return out
}

// DSNs returns what ReplicatedSet.DSNs will return for the set that StartReplicated or
// OpenReplicated starts with these options, before it is started, so that a topology can be
// written first. Every member needs a fixed port (Ports); otherwise, or if the options are
// invalid, it returns an error.
func (o ReplicatedOptions) DSNs() ([][]string, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	if len(o.Ports) == 0 {
		return nil, errors.New("mariadb: ReplicatedOptions.DSNs needs fixed Ports")
	}
	per := o.Minions + 1
	out := make([][]string, o.Clusters)
	for k := range o.Clusters * per {
		mo := o.member("", k)
		if mo.Port <= 0 {
			return nil, fmt.Errorf("mariadb: ReplicatedOptions.Ports[%d] is %d: DSNs needs fixed ports", k, mo.Port)
		}
		out[k/per] = append(out[k/per], userDSN(o.User, dialHost(mo.BindAddress), mo.Port))
	}
	return out, nil
}

// CheckPorts returns an error wrapping ErrPortInUse and the listen error when one of the fixed
// Ports cannot be listened on at its host, most likely because a server of another set runs
// there: starting on the data directory of a running server would wait long for its InnoDB
// lock. Members with port 0 are not checked.
func (o ReplicatedOptions) CheckPorts() error {
	o, err := o.normalize()
	if err != nil {
		return err
	}
	for k := range o.Ports {
		mo := o.member("", k)
		if mo.Port == 0 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(mo.BindAddress, strconv.Itoa(mo.Port)))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPortInUse, err)
		}
		l.Close()
	}
	return nil
}

// userDSN is the DSN of user at host:port, with no database: "user@tcp(host:port)/".
func userDSN(user, host string, port int) string {
	return user + "@tcp(" + net.JoinHostPort(host, strconv.Itoa(port)) + ")/"
}
