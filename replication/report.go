package replication

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// The roles of a MemberReport.
const (
	// RoleMaster: writable and replicating from nobody (MemberStatus.IsMaster).
	RoleMaster = "master"
	// RoleMinion: replicating from a master, whether or not its threads run.
	RoleMinion = "minion"
	// RoleUnknown: unreachable, or read-only and replicating from nobody (a fenced old master).
	RoleUnknown = "unknown"
)

// Addr returns the host:port of dsn, for output that must not show a password;
// "<unparsable DSN>" when dsn does not parse.
func Addr(dsn string) string { return redact(dsn) }

// WithUser returns dsn with its user replaced by user and, when password is not nil, its
// password by *password (otherwise the DSN's own password stays): the administrative DSN of a
// member whose topology DSN is the datastore's user. The error names the member's address,
// never the DSN.
func WithUser(dsn, user string, password *string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("DSN of %s: %w", Addr(dsn), err)
	}
	cfg.User = user
	if password != nil {
		cfg.Passwd = *password
	}
	return cfg.FormatDSN(), nil
}

// MemberReport is one member of a storage cluster as ProbeCluster found it, named by its
// address (never its DSN). Its JSON is a member of `schemaless admin storage --json`.
type MemberReport struct {
	Addr string `json:"addr"`
	// Role is RoleMaster, RoleMinion or RoleUnknown.
	Role          string `json:"role"`
	ServerID      uint32 `json:"server_id,omitempty"`
	ReadOnly      bool   `json:"read_only"`
	Replicating   bool   `json:"replicating"`
	IORunning     bool   `json:"io_running"`
	SQLRunning    bool   `json:"sql_running"`
	MasterAddr    string `json:"master_addr,omitempty"`   // host:port of its configured master
	GTIDPosition  string `json:"gtid_position,omitempty"` // @@gtid_current_pos
	GTIDReceived  string `json:"gtid_received,omitempty"` // Gtid_IO_Pos
	SecondsBehind int64  `json:"seconds_behind"`          // -1 when unknown
	LastError     string `json:"last_error,omitempty"`    // the replication threads'
	Error         string `json:"error,omitempty"`         // the probe's (unreachable)
}

// ReplicationState says whether the member replicates and which of its threads run: "no",
// "yes" (both), "io not running", "sql not running" or "not running".
func (m MemberReport) ReplicationState() string {
	switch {
	case !m.Replicating:
		return "no"
	case m.IORunning && m.SQLRunning:
		return "yes"
	case m.IORunning:
		return "sql not running"
	case m.SQLRunning:
		return "io not running"
	}
	return "not running"
}

// ClusterReport is one storage cluster of a datastore as ProbeCluster found it. Its JSON is an
// element of `schemaless admin storage --json`.
type ClusterReport struct {
	Datastore  string `json:"datastore"`
	Cluster    string `json:"cluster"`
	Partitions []int  `json:"partitions"` // the datastore's partitions on the cluster
	// Master is the address of the one master, "" when there is none or several (see
	// Warnings).
	Master string `json:"master"`
	// Members are the members in the order probed.
	Members []MemberReport `json:"members"`
	// Warnings are what an operator should look at: no master, several masters, an
	// unreachable or fenced member, a minion replicating from another member than the master
	// or with a thread stopped.
	Warnings []string `json:"warnings,omitempty"`
}

// ProbeCluster probes every member of a storage cluster concurrently and reports it.
// datastore, cluster and partitions only label the report; members are the members' DSNs for
// an administrative user (see Privileges in the package documentation; WithUser), the
// configured master first. Each probe is bounded by ctx and Open's timeouts. A member that
// cannot be probed is a MemberReport with Error set and role RoleUnknown, not a failure.
func ProbeCluster(ctx context.Context, datastore, cluster string, partitions []int, members []string) ClusterReport {
	rep := ClusterReport{Datastore: datastore, Cluster: cluster, Partitions: append([]int{}, partitions...),
		Members: make([]MemberReport, len(members))}
	var wg sync.WaitGroup
	for i, dsn := range members {
		wg.Go(func() { rep.Members[i] = probeMember(ctx, dsn) })
	}
	wg.Wait()
	rep.Master, rep.Warnings = assess(rep.Members)
	return rep
}

// probeMember probes one member; an unreachable member is a report with Error set.
func probeMember(ctx context.Context, dsn string) MemberReport {
	m := MemberReport{Addr: Addr(dsn), Role: RoleUnknown, SecondsBehind: -1}
	db, err := Open(dsn)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer db.Close()
	st, err := Probe(ctx, db, dsn)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	return memberReport(m.Addr, st)
}

// memberReport turns a probe of the member at addr into its report.
func memberReport(addr string, st MemberStatus) MemberReport {
	m := MemberReport{Addr: addr, Role: RoleUnknown, ServerID: st.ServerID, ReadOnly: st.ReadOnly, Replicating: st.Replicating,
		IORunning: st.IORunning, SQLRunning: st.SQLRunning, GTIDPosition: st.GTIDCurrentPos, GTIDReceived: st.GTIDIOPos,
		SecondsBehind: st.SecondsBehind, LastError: st.LastError}
	if st.Replicating {
		m.MasterAddr = net.JoinHostPort(st.MasterHost, strconv.Itoa(st.MasterPort))
	}
	switch {
	case st.IsMaster():
		m.Role = RoleMaster
	case st.Replicating:
		m.Role = RoleMinion
	}
	return m
}

// assess returns the cluster's one master ("" if none or several) and its warnings.
func assess(members []MemberReport) (master string, warnings []string) {
	var masters []string
	for _, m := range members {
		if m.Role == RoleMaster {
			masters = append(masters, m.Addr)
		}
	}
	switch len(masters) {
	case 0:
		warnings = append(warnings, "no master: writes to its partitions fail (promote a minion: schemaless admin promote)")
	case 1:
		master = masters[0]
	default:
		warnings = append(warnings, fmt.Sprintf("%d masters (%s): split brain: the nodes that see both write to neither", len(masters), strings.Join(masters, ", ")))
	}
	for _, m := range members {
		switch {
		case m.Error != "":
			warnings = append(warnings, fmt.Sprintf("%s is unreachable", m.Addr))
		case m.Role == RoleUnknown:
			warnings = append(warnings, fmt.Sprintf("%s is read-only and replicates from nobody: fenced (an old master?); it is no master, and rejoining it needs a re-seed", m.Addr))
		case m.Role == RoleMinion && master != "" && m.MasterAddr != master:
			warnings = append(warnings, fmt.Sprintf("%s replicates from %s, not from the master %s", m.Addr, m.MasterAddr, master))
		case m.Role == RoleMinion && (!m.IORunning || !m.SQLRunning):
			warnings = append(warnings, fmt.Sprintf("%s: replication %s", m.Addr, m.ReplicationState()))
		}
	}
	return master, warnings
}

// PromoteReport is a Promote of a storage cluster with every member named by its address,
// never its DSN. Its JSON is what `schemaless admin promote --json` prints.
type PromoteReport struct {
	Datastore          string            `json:"datastore"`
	Cluster            string            `json:"cluster"`
	NewMaster          string            `json:"new_master"`
	OldMaster          string            `json:"old_master,omitempty"`
	OldMasterReachable bool              `json:"old_master_reachable"`
	CaughtUp           bool              `json:"caught_up"`
	Position           string            `json:"position"`
	Repointed          []string          `json:"repointed"`
	Skipped            map[string]string `json:"skipped"`
	Error              string            `json:"error,omitempty"`
}

// Report returns r as the PromoteReport of storage cluster cluster of datastore: each DSN
// replaced by its address (Addr), Repointed and Skipped never nil, and Error set from err
// (Promote's error, or nil).
func (r PromoteResult) Report(datastore, cluster string, err error) PromoteReport {
	addr := func(dsn string) string {
		if dsn == "" {
			return ""
		}
		return Addr(dsn)
	}
	rep := PromoteReport{Datastore: datastore, Cluster: cluster, NewMaster: addr(r.NewMaster), OldMaster: addr(r.OldMaster),
		OldMasterReachable: r.OldMasterReachable, CaughtUp: r.CaughtUp, Position: r.Position, Repointed: []string{}, Skipped: map[string]string{}}
	for _, d := range r.Repointed {
		rep.Repointed = append(rep.Repointed, addr(d))
	}
	for d, why := range r.Skipped {
		rep.Skipped[addr(d)] = why
	}
	if err != nil {
		rep.Error = err.Error()
	}
	return rep
}
