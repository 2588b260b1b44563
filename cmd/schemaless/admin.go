package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/topology"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/spf13/cobra"
)

// adminProbeInterval is how often a node of an async datastore probes its storage clusters
// (partition.ClusterConfig.ProbeInterval's default): a promoted master is used within it.
const adminProbeInterval = 500 * time.Millisecond

// adminFlags are the flags shared by the admin subcommands.
type adminFlags struct {
	topology      string
	datastore     string
	adminUser     string
	adminPassword string
	passwordSet   bool // --admin-password was given (possibly empty)
	timeout       time.Duration
	asJSON        bool
}

func (f *adminFlags) register(cmd *cobra.Command, timeout time.Duration) {
	fl := cmd.Flags()
	fl.StringVar(&f.topology, "topology", "", "the cluster's topology file (YAML), as given to serve --config (required)")
	fl.StringVar(&f.adminUser, "admin-user", "root", "MySQL user for the administrative connections (needs READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR); replaces the user of the topology's DSNs")
	fl.StringVar(&f.adminPassword, "admin-password", "", "password of --admin-user (default: the password of the topology's DSN, if it has one)")
	fl.DurationVar(&f.timeout, "timeout", timeout, "time limit of the whole command")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
}

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Administer a cluster: datastores, membership, placement, backups, async storage clusters",
		Long: `Administer a cluster. Through a running node's HTTP API (--endpoints): nodes, partitions,
add-voter, remove-voter, transfer-leader, move-replica, rebalance, drain, backup and restore
(see each command's help), and the datastores of the cluster's catalog:

  schemaless admin datastores [--detail]                         the catalog's datastores
  schemaless admin create-datastore --name N --shards S [--partitions P] [--replicas R | --replica-nodes n1,n2,n3]
                                                                 create a raft datastore at run time
  schemaless admin drop-datastore --name N --confirm N           drop a datastore and delete its data
  schemaless admin split --datastore D --partition P [--at-shard S]
                                                                 split a raft partition in two
  schemaless admin merge --datastore D --left L --right R
                                                                 merge partition R into L, its left neighbour

Administer the MySQL storage clusters of async datastores, directly on the MySQL servers listed
in the topology file (no node needs to be up). The topology's DSNs are the datastore's user, which
read_only fences and which may lack the replication privileges: the admin commands connect as
--admin-user (default root) instead, with --admin-password (default: the DSN's password).

  schemaless admin storage --topology F [--datastore D]          replication state of every member
  schemaless admin promote --topology F --datastore D --cluster C  fail over (or switch over) cluster C
  schemaless admin move-partition --topology F --datastore D --partition P --to C
                                                                 move an async partition to cluster C`,
	}
	cmd.AddCommand(newAdminPromoteCmd(), newAdminStorageCmd())
	cmd.AddCommand(newAdminRaftCmds()...)
	cmd.AddCommand(newAdminMoveCmd())
	cmd.AddCommand(newAdminBackupCmds()...)
	cmd.AddCommand(newAdminDatastoreCmds()...)
	return cmd
}

func newAdminPromoteCmd() *cobra.Command {
	var f adminFlags
	var clusterName, replUser, replPassword string
	cmd := &cobra.Command{
		Use:   "promote --topology F --datastore D --cluster C",
		Short: "Promote the most advanced minion of a storage cluster to master",
		Long: `Promote the most advanced reachable minion of storage cluster --cluster of async datastore
--datastore to master (replication.Promote), and point every other reachable member at it.

- Failover (no master reachable): the candidate is the minion that received the most (highest
  GTID sequence number received); it applies what it received (at most 10 s), then becomes the
  master. Transactions the dead master committed but no minion received are lost.
- Switchover (the master is reachable): the master is fenced (read_only=ON) first, and the
  candidate must apply everything it wrote within 10 s, or the master is unfenced and nothing
  changes.
- With two reachable masters it refuses (split brain) and changes nothing.

The other members replicate from the new master as --repl-user (default: the user of the
topology's DSNs). Members that do not answer are skipped: an old master that comes back later
restarts read_only and is no master; rejoining it as a minion needs a re-seed from a copy of
another member if it had transactions nobody received.

The nodes need no restart and no topology change: they probe every member every 0.5 s and write
to the new master as soon as they see it. Rerunning promote after a failure is safe.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.passwordSet = cmd.Flags().Changed("admin-password")
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return runAdminPromote(ctx, f, clusterName, replUser, replPassword, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, 30*time.Second)
	fl := cmd.Flags()
	fl.StringVar(&f.datastore, "datastore", "", "the async datastore (required)")
	fl.StringVar(&clusterName, "cluster", "", "the storage cluster to promote a minion of, by name (required)")
	fl.StringVar(&replUser, "repl-user", "", "user the other members replicate as (default: the user of the topology's DSNs)")
	fl.StringVar(&replPassword, "repl-password", "", "password of --repl-user (default: the password of the topology's DSN)")
	return cmd
}

func newAdminStorageCmd() *cobra.Command {
	var f adminFlags
	cmd := &cobra.Command{
		Use:   "storage --topology F [--datastore D]",
		Short: "Show the replication state of every member of the storage clusters",
		Long: `Probe every member of the storage clusters of the async datastores of --topology (or of
--datastore only) and print one table per storage cluster: each member's address, role, read_only,
replication threads, configured master, GTID positions, seconds behind its master and last error.

ROLE is master (writable and replicating from nobody: the one the nodes write to), minion
(replicating, whether or not its threads run) or unknown: unreachable, or read-only and
replicating from nobody (a fenced old master after a restart: it is no master; rejoining it needs
a re-seed). REPLICATING is no, yes (IO and SQL threads running), io not running (not receiving:
its master is down or refuses it), sql not running (not applying: see ERROR) or not running. GTID
is @@gtid_current_pos (what the member wrote or applied); RECEIVED is the last GTID a minion's IO
thread received. BEHIND is Seconds_Behind_Master (- when unknown). ERROR is the probe's error or
the replication threads' last error (which the server keeps until the thread restarts).

Below each table, warnings name a cluster without master, with two masters, or with minions
replicating from another member than its master. The command fails only on bad flags or an
unreadable topology; an unreachable member is a row, not a failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.passwordSet = cmd.Flags().Changed("admin-password")
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return runAdminStorage(ctx, f, cmd.OutOrStdout())
		},
	}
	f.register(cmd, 10*time.Second)
	cmd.Flags().StringVar(&f.datastore, "datastore", "", "only this async datastore (default: every async datastore)")
	return cmd
}

// adminDatastores loads f.topology and returns the async datastores the command is about: the
// one named by --datastore, or every async datastore when it is empty (an error if none).
func adminDatastores(f adminFlags) ([]*topology.DatastoreSpec, error) {
	if f.topology == "" {
		return nil, errors.New("--topology is required: the topology file of the cluster (as given to serve --config)")
	}
	if f.adminUser == "" {
		return nil, errors.New("--admin-user must not be empty")
	}
	top, err := topology.Load(f.topology)
	if err != nil {
		return nil, fmt.Errorf("--topology %s: %w", f.topology, err)
	}
	dss, err := top.AsyncDatastores(f.datastore)
	switch {
	case errors.Is(err, topology.ErrNoDatastore) && f.datastore == "":
		return nil, fmt.Errorf("--topology %s: %w", f.topology, err)
	case err != nil:
		return nil, fmt.Errorf("--datastore %q: %w", f.datastore, err)
	}
	return dss, nil
}

// adminStorageCluster returns the storage cluster named --cluster of ds.
func adminStorageCluster(ds *topology.DatastoreSpec, name string) (*topology.StorageClusterSpec, error) {
	if name == "" {
		return nil, errors.New("--cluster is required: the name of a storage cluster of the datastore")
	}
	c, err := ds.FindStorageCluster(name)
	if err != nil {
		return nil, fmt.Errorf("--cluster %q: %w", name, err)
	}
	return c, nil
}

// password is --admin-password when given (possibly empty), nil to keep each DSN's.
func (f adminFlags) password() *string {
	if f.passwordSet {
		return &f.adminPassword
	}
	return nil
}

// adminMembers returns the administrative DSNs of c's members (configured master first).
func adminMembers(c *topology.StorageClusterSpec, f adminFlags) ([]string, error) {
	var dsns []string
	for _, m := range c.Members() {
		d, err := replication.WithUser(m, f.adminUser, f.password())
		if err != nil {
			return nil, fmt.Errorf("storage cluster %s: %w", c.Name, err)
		}
		dsns = append(dsns, d)
	}
	return dsns, nil
}

func runAdminPromote(ctx context.Context, f adminFlags, clusterName, replUser, replPassword string, out, errOut io.Writer) error {
	if f.datastore == "" {
		return errors.New("--datastore is required: the async datastore whose storage cluster to promote in")
	}
	dss, err := adminDatastores(f)
	if err != nil {
		return err
	}
	ds := dss[0]
	sc, err := adminStorageCluster(ds, clusterName)
	if err != nil {
		return err
	}
	dsns, err := adminMembers(sc, f)
	if err != nil {
		return err
	}
	opts := replication.PromoteOptions{
		ReplUser:     replUser,
		ReplPassword: replPassword,
		Logger:       slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if opts.ReplUser == "" {
		// The replication user is the datastore's: the one the set-up replicates as.
		cfg, err := mysql.ParseDSN(sc.Master)
		if err != nil {
			return fmt.Errorf("storage cluster %s: DSN of %s: %w", sc.Name, replication.Addr(sc.Master), err)
		}
		opts.ReplUser, opts.ReplPassword = cfg.User, cfg.Passwd
		if replPassword != "" {
			opts.ReplPassword = replPassword
		}
	}
	if opts.ReplUser == "" {
		return fmt.Errorf("storage cluster %s: its DSNs name no user; pass --repl-user", sc.Name)
	}
	res, perr := replication.Promote(ctx, dsns, opts)
	if perr != nil {
		perr = fmt.Errorf("promote in storage cluster %s of %s: %w", sc.Name, ds.Name, perr)
	}
	rep := res.Report(ds.Name, sc.Name, perr)
	if f.asJSON {
		if err := adminWriteJSON(out, rep); err != nil {
			return err
		}
		return perr
	}
	if rep.NewMaster != "" || perr == nil {
		printPromote(out, rep, f.topology)
		return perr
	}
	for _, d := range dsns { // nothing promoted: say why members were left out
		if why, ok := rep.Skipped[replication.Addr(d)]; ok {
			fmt.Fprintf(errOut, "skipped %s: %s\n", replication.Addr(d), why)
		}
	}
	return perr
}

func printPromote(w io.Writer, r replication.PromoteReport, topology string) {
	kind := "failover: no master was reachable"
	if r.OldMasterReachable {
		kind = "switchover: the master " + r.OldMaster + " was fenced (read_only=ON) first"
	}
	fmt.Fprintf(w, "promoted %s to master of storage cluster %s of %s (%s)\n", r.NewMaster, r.Cluster, r.Datastore, kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  position\t%s\n", r.Position)
	caught := "yes"
	if !r.CaughtUp {
		caught = "no: transactions it had received but not applied in time were discarded"
	}
	fmt.Fprintf(tw, "  caught up\t%s\n", caught)
	old := "unreachable (when it comes back it is read_only and no master; rejoining it needs a re-seed)"
	if r.OldMasterReachable {
		old = r.OldMaster + ", reachable, now a minion of the new master"
	}
	fmt.Fprintf(tw, "  old master\t%s\n", old)
	rp := "none"
	if len(r.Repointed) > 0 {
		rp = strings.Join(r.Repointed, ", ")
	}
	fmt.Fprintf(tw, "  repointed\t%s\n", rp)
	skipped := make([]string, 0, len(r.Skipped))
	for a := range r.Skipped {
		skipped = append(skipped, a)
	}
	sort.Strings(skipped)
	for _, a := range skipped {
		fmt.Fprintf(tw, "  skipped\t%s: %s\n", a, r.Skipped[a])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "The nodes switch to the new master by themselves within their probe interval (%v); no restart needed.\n", adminProbeInterval)
	fmt.Fprintf(w, "Watch it: schemaless admin storage --topology %s --datastore %s\n", topology, r.Datastore)
}

// probeCluster probes every member of storage cluster c of ds as the administrative user
// (replication.ProbeCluster).
func probeCluster(ctx context.Context, ds *topology.DatastoreSpec, c *topology.StorageClusterSpec, f adminFlags) (replication.ClusterReport, error) {
	dsns, err := adminMembers(c, f)
	if err != nil {
		return replication.ClusterReport{}, err
	}
	var parts []int
	for _, p := range ds.Partitions {
		if p.Cluster == c.Name {
			parts = append(parts, p.ID)
		}
	}
	return replication.ProbeCluster(ctx, ds.Name, c.Name, parts, dsns), nil
}

func runAdminStorage(ctx context.Context, f adminFlags, out io.Writer) error {
	dss, err := adminDatastores(f)
	if err != nil {
		return err
	}
	var reps []replication.ClusterReport
	for _, ds := range dss {
		for i := range ds.StorageClusters {
			r, err := probeCluster(ctx, ds, &ds.StorageClusters[i], f)
			if err != nil {
				return err
			}
			reps = append(reps, r)
		}
	}
	if f.asJSON {
		return adminWriteJSON(out, reps)
	}
	for i, r := range reps {
		if i > 0 {
			fmt.Fprintln(out)
		}
		printClusterReport(out, r)
	}
	return nil
}

func printClusterReport(w io.Writer, r replication.ClusterReport) {
	parts := make([]string, len(r.Partitions))
	for i, p := range r.Partitions {
		parts[i] = strconv.Itoa(p)
	}
	master := r.Master
	if master == "" {
		master = "none"
	}
	fmt.Fprintf(w, "%s/%s  partitions %s  master %s\n", r.Datastore, r.Cluster, strings.Join(parts, ","), master)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tROLE\tREAD_ONLY\tREPLICATING\tMASTER\tGTID\tRECEIVED\tBEHIND\tERROR")
	for _, m := range r.Members {
		if m.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", m.Addr, m.Role, m.Error)
			continue
		}
		behind := "-"
		if m.SecondsBehind >= 0 {
			behind = strconv.FormatInt(m.SecondsBehind, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Addr, m.Role, adminYesNo(m.ReadOnly), m.ReplicationState(),
			dash(m.MasterAddr), dash(m.GTIDPosition), dash(m.GTIDReceived), behind, dash(m.LastError))
	}
	_ = tw.Flush()
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", s)
	}
}

func adminYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func adminWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
