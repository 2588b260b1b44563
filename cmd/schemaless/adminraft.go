package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

// Default time limits of the admin API commands: a read answers within seconds; a change may
// wait for a replica to catch up (the server bounds it by api.Config.AdminTimeout, 30m).
const (
	adminReadTimeout   = 10 * time.Second
	adminChangeTimeout = 30 * time.Minute
)

// adminAPIFlags are the flags of the admin commands that go through a node's HTTP admin API
// (/v1/admin/...). --endpoints has the name, meaning and default of the client commands'.
type adminAPIFlags struct {
	endpoints []string
	timeout   time.Duration
	asJSON    bool
}

func (f *adminAPIFlags) register(cmd *cobra.Command, timeout time.Duration) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.endpoints, "endpoints", []string{"http://127.0.0.1:7070", "http://127.0.0.1:7071", "http://127.0.0.1:7072"},
		"nodes' HTTP base URLs (comma-separated), tried in turn: one that cannot be reached or answers 503 is passed over")
	fl.DurationVar(&f.timeout, "timeout", timeout, "time limit of the whole command")
	fl.BoolVar(&f.asJSON, "json", false, "print the API's JSON answer instead of a table")
}

// partitionFlags name one partition of a raft datastore.
type partitionFlags struct {
	datastore string
	partition int
}

func (p *partitionFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.datastore, "datastore", "", "the raft datastore (required)")
	cmd.Flags().IntVar(&p.partition, "partition", 0, "the partition's id (required)")
}

// check reports a missing --datastore or --partition.
func (p *partitionFlags) check(cmd *cobra.Command) error {
	if p.datastore == "" {
		return errors.New("--datastore is required: the raft datastore the partition belongs to")
	}
	if !cmd.Flags().Changed("partition") {
		return errors.New("--partition is required: the partition's id (see `schemaless admin partitions`)")
	}
	return nil
}

// newAdminClient returns the client of the admin commands: every endpoint in turn, each up to
// three times, an attempt bounded only by --timeout (a change may wait for a replica to catch
// up). The client retries a change only when it certainly did not start (see package client,
// admin.go).
func newAdminClient(ctx context.Context, endpoints []string, timeout time.Duration) (*client.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("--endpoints is empty")
	}
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.MaxAttempts = 3 * len(endpoints)
	cfg.RequestTimeout, cfg.AdminTimeout = timeout, timeout
	cfg.BackoffBase, cfg.BackoffMax = 100*time.Millisecond, time.Second
	if err := applyClientAuth(ctx, &cfg); err != nil {
		return nil, err
	}
	cl, err := client.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--endpoints: %w", err)
	}
	return cl, nil
}

// answeredError prints an error answer of a node as the admin commands do: the endpoint, the
// status, the API's code and message, and the request field at fault.
type answeredError struct{ *client.APIError }

func (e answeredError) Error() string {
	s := fmt.Sprintf("%s answered %d %s: %s", e.Endpoint, e.StatusCode, e.Code, e.Message)
	if e.Field != "" {
		s += fmt.Sprintf(" (field %q)", e.Field)
	}
	return s
}

func (e answeredError) Unwrap() error { return e.APIError }

// adminError is the error an admin command reports for a client call's err: a node's error
// answer as answeredError, and "no endpoint answered" when every attempt found the nodes
// unreachable or unavailable.
func adminError(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		if ae.StatusCode == http.StatusServiceUnavailable && errors.Is(err, client.ErrUnavailable) {
			return fmt.Errorf("no endpoint answered: %w", answeredError{ae})
		}
		return answeredError{ae}
	}
	if errors.Is(err, client.ErrUnavailable) {
		return fmt.Errorf("no endpoint answered: %w", err)
	}
	return err
}

// writeAnswerJSON prints an answer of the API (writeJSON), followed by a blank line.
func writeAnswerJSON(w io.Writer, v any) error {
	if err := writeJSON(w, v); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// newAdminRaftCmds returns the admin commands that act through a running node's API: members,
// partitions, voters, leadership, moves, rebalancing and draining.
func newAdminRaftCmds() []*cobra.Command {
	return append([]*cobra.Command{newAdminNodesCmd(), newAdminPartitionsCmd(), newAdminAddVoterCmd(), newAdminRemoveVoterCmd(),
		newAdminTransferLeaderCmd(), newAdminMoveReplicaCmd(), newAdminRebalanceCmd(), newAdminDrainCmd()}, newAdminLearnerCmds()...)
}

// runAdmin runs fn with a context bounded by --timeout and the admin client of f.
func runAdmin(cmd *cobra.Command, f *adminAPIFlags, fn func(ctx context.Context, cl *client.Client, out io.Writer) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	cl, err := newAdminClient(ctx, f.endpoints, f.timeout)
	if err != nil {
		return err
	}
	return fn(ctx, cl, cmd.OutOrStdout())
}

func newAdminNodesCmd() *cobra.Command {
	var f adminAPIFlags
	cmd := &cobra.Command{
		Use:   "nodes [--endpoints URLS]",
		Short: "List the cluster's nodes: gossip state, addresses, version, replicas and leaderships",
		Long: `List every node the answering node knows (GET /v1/admin/nodes): the topology's nodes, the nodes
gossip sees, and those learned from raft configurations. One line per node:

  ID        the node's id
  STATE     its gossip state: alive, suspect, dead, left; unknown when there is no gossip (no
            gossip_addr) or gossip has not seen it. A state is a hint: a dead or left node
            stays a voter of its partitions until it is removed (remove-voter, drain).
  HTTP, RAFT, GOSSIP  its addresses
  VERSION   the software version it gossips
  REPLICAS  the raft partitions it is a voter or nonvoter of, and
  LEADERS   the ones it leads, both counted from the partitions' raft configurations
            (GET /v1/admin/partitions); if those cannot be read, from what each node last
            gossiped, and a note says so.

The first line names the node that answered. --json prints the /v1/admin/nodes answer as is
(each node's replicas as gossiped).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				return runAdminNodes(ctx, cl, f.asJSON, out)
			})
		},
	}
	f.register(cmd, adminReadTimeout)
	return cmd
}

func runAdminNodes(ctx context.Context, cl *client.Client, asJSON bool, out io.Writer) error {
	nr, err := cl.Nodes(ctx)
	if err != nil {
		return adminError(err)
	}
	if asJSON {
		return writeAnswerJSON(out, nr)
	}
	reps, perr := cl.Partitions(ctx, "")
	perr = adminError(perr)
	rows, fromRaft := wire.NodeLoads(nr.Nodes, reps, perr == nil)
	fmt.Fprintf(out, "%d nodes, as seen by %s\n", len(rows), nr.Self)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tHTTP\tRAFT\tGOSSIP\tVERSION\tREPLICAS\tLEADERS\tZONE")
	for _, m := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", m.ID, m.State, dash(m.HTTPAddr), dash(m.RaftAddr), dash(m.GossipAddr),
			dash(m.Version), m.ReplicaCount, m.LeaderCount, dash(m.Zone))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !fromRaft {
		why := "some partitions' configurations are unknown"
		if perr != nil {
			why = perr.Error()
		}
		fmt.Fprintf(out, "note: REPLICAS and LEADERS are what each node last gossiped (%s)\n", why)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAdminPartitionsCmd() *cobra.Command {
	var f adminAPIFlags
	var ds string
	cmd := &cobra.Command{
		Use:   "partitions [--datastore D]",
		Short: "Show every partition's raft configuration, leader and each replica's progress",
		Long: `Show every partition of --datastore (default: every datastore) as its leader sees it
(GET /v1/admin/partitions): its leader, term, commit and last index, then one line per replica
(every server of its raft configuration), as that replica's node reports it:

  NODE       the node holding the replica
  ZONE       that node's zone (serve --zone; - for none)
  SUFFRAGE   voter; learner (a permanent nonvoter: add-learner); or nonvoter (a replica
             being added, catching up)
  STATE      its raft state on that node: Leader, Follower, Candidate
  APPLIED    the last raft index its store applied
  LAG        the leader's last index minus APPLIED: 0 or a few entries on a healthy replica;
             a growing lag is a slow or stuck replica
  REACHABLE  yes, or no and why (the node did not answer within 2s); "hosts no replica" is a
             node listed in the configuration without the data (an interrupted add or remove)

A partition whose leader cannot be found prints its error and the replicas it last knew. An
async partition prints its storage cluster only. --json prints the API's answer as is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				reps, err := cl.Partitions(ctx, ds)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, wire.PartitionsResponse{Partitions: reps})
				}
				return printPartitionReports(out, reps)
			})
		},
	}
	f.register(cmd, adminReadTimeout)
	cmd.Flags().StringVar(&ds, "datastore", "", "show this datastore's partitions only (default: every datastore)")
	return cmd
}

func printPartitionReports(w io.Writer, reps []wire.PartitionReport) error {
	for i, p := range reps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := fmt.Sprintf("%s/%d  shards %d-%d", p.Datastore, p.Partition, p.FirstShard, p.LastShard)
		if p.Mode == topology.ModeAsync {
			fmt.Fprintf(w, "%s  async, storage cluster %s\n", head, dash(p.Cluster))
			continue
		}
		if p.Error != "" {
			fmt.Fprintf(w, "%s  error: %s\n", head, p.Error)
		} else {
			fmt.Fprintf(w, "%s  leader %s  term %d  commit %d  last %d  voters %d/%d\n", head, dash(p.Leader), p.Term, p.CommitIndex,
				p.LastIndex, len(p.Voters()), len(p.Servers))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tZONE\tSUFFRAGE\tSTATE\tAPPLIED\tLAG\tREACHABLE")
		zones, suffrages := map[string]string{}, map[string]string{}
		for _, s := range p.Servers {
			zones[s.Node], suffrages[s.Node] = s.Zone, suffrageName(s)
		}
		for _, r := range p.Replicas {
			reach := "yes"
			switch {
			case !r.Reachable && r.Error != "":
				reach = "no: " + r.Error
			case !r.Reachable:
				reach = "no"
			case r.Error != "":
				reach = "yes: " + r.Error
			}
			suf := r.Suffrage
			if s, ok := suffrages[r.Node]; ok {
				suf = s
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Node, dash(zones[r.Node]), dash(suf), dash(r.State), r.AppliedIndex, r.Lag, reach)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// suffrageName is s's suffrage as the admin commands print it: voter, learner (a nonvoter the
// catalog records as a learner) or nonvoter (a replica being added).
func suffrageName(s wire.RaftServer) string {
	if s.Learner {
		return "learner"
	}
	return s.Suffrage
}

// printConfig prints a partition's configuration after a change.
func printConfig(w io.Writer, c wire.PartitionConfig) {
	fmt.Fprintf(w, "%s/%d  leader %s  term %d  commit %d  last %d\n", c.Datastore, c.Partition, dash(c.Leader), c.Term, c.CommitIndex, c.LastIndex)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range c.Servers {
		role := suffrageName(s)
		if s.Node == c.Leader {
			role += ", leader"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Node, role, s.Addr)
	}
	_ = tw.Flush()
}

// runConfigChange makes one partition change and prints the configuration it answers, after
// the line what(cfg) returns.
func runConfigChange(ctx context.Context, cl *client.Client, asJSON bool, out io.Writer,
	change func(context.Context) (wire.PartitionConfig, error), what func(wire.PartitionConfig) string) error {
	start := time.Now()
	cfg, err := change(ctx)
	if err != nil {
		return adminError(err)
	}
	if asJSON {
		return writeAnswerJSON(out, cfg)
	}
	fmt.Fprintf(out, "%s (%s)\n", what(cfg), time.Since(start).Round(time.Millisecond))
	printConfig(out, cfg)
	return nil
}

func newAdminAddVoterCmd() *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var node string
	cmd := &cobra.Command{
		Use:   "add-voter --datastore D --partition P --node N",
		Short: "Add a node as a voter of a raft partition, once it has caught up",
		Long: `Add node --node as a voter of partition --partition of raft datastore --datastore
(POST /v1/admin/partitions/{ds}/{p}/voters): the node opens an empty replica, the leader adds it
as a nonvoter and sends it the log (or a snapshot), and once it has applied everything committed
when it was added, the leader promotes it to voter. The command returns then, printing the new
configuration; the catch-up of a large partition may take minutes (--timeout, default 30m).

The node must be running and known: in the topology, seen by gossip, or in a raft configuration.
Adding a voter already there changes nothing. If the command is interrupted or times out, the
node stays a nonvoter (it keeps receiving the log but does not vote): run add-voter again to
finish, or remove-voter to undo.

Errors: 404 unknown node (field node) or datastore, 400 bad partition or async datastore, 503 no
leader (retried on the other endpoints).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			if node == "" {
				return errors.New("--node is required: the id of the node to add")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				return runConfigChange(ctx, cl, f.asJSON, out,
					func(ctx context.Context) (wire.PartitionConfig, error) {
						return cl.AddVoter(ctx, p.datastore, p.partition, node)
					},
					func(wire.PartitionConfig) string {
						return fmt.Sprintf("%s is a voter of %s/%d", node, p.datastore, p.partition)
					})
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().StringVar(&node, "node", "", "the node to add (required)")
	return cmd
}

func newAdminRemoveVoterCmd() *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var node string
	cmd := &cobra.Command{
		Use:   "remove-voter --datastore D --partition P --node N",
		Short: "Remove a node's replica (voter or nonvoter) from a raft partition",
		Long: `Remove node --node from the raft configuration of partition --partition of raft datastore
--datastore (DELETE /v1/admin/partitions/{ds}/{p}/voters/{node}). If it leads, leadership moves
to another voter first. Once the configuration without it is committed, the node drops its
replica's data; the command then prints the new configuration.

The partition keeps serving while it has a quorum of its remaining voters: removing a voter from
3 leaves 2, which tolerate no failure, so add another (add-voter, or move-replica which adds
first) unless the node is gone for good. Removing the last voter is refused (409). Removing a
node that holds no replica changes nothing. If the removed node cannot be reached to drop its
data, the removal stands and the error says so; its data is unused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			if node == "" {
				return errors.New("--node is required: the id of the node to remove")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				return runConfigChange(ctx, cl, f.asJSON, out,
					func(ctx context.Context) (wire.PartitionConfig, error) {
						return cl.RemoveVoter(ctx, p.datastore, p.partition, node)
					},
					func(c wire.PartitionConfig) string {
						return fmt.Sprintf("%s is no longer a replica of %s/%d; voters: %s", node, p.datastore, p.partition, strings.Join(c.Voters(), ", "))
					})
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().StringVar(&node, "node", "", "the node to remove (required)")
	return cmd
}

func newAdminTransferLeaderCmd() *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var to string
	cmd := &cobra.Command{
		Use:   "transfer-leader --datastore D --partition P [--to N]",
		Short: "Move a raft partition's leadership to another voter",
		Long: `Move the leadership of partition --partition of raft datastore --datastore to voter --to, or
without --to to whichever voter raft finds most up to date (POST
/v1/admin/partitions/{ds}/{p}/leader). It returns once another node leads (--to, if given) and
prints the configuration. Writes to the partition pause for about an election (a few hundred
milliseconds) and are retried by the nodes.

--to must be a voter of the partition (409 otherwise); naming the current leader changes nothing.
Leadership is a preference: a later election may move it again, and rebalance evens it out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				return runConfigChange(ctx, cl, f.asJSON, out,
					func(ctx context.Context) (wire.PartitionConfig, error) {
						return cl.TransferLeader(ctx, p.datastore, p.partition, to)
					},
					func(c wire.PartitionConfig) string {
						return fmt.Sprintf("%s/%d is led by %s", p.datastore, p.partition, dash(c.Leader))
					})
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the voter to lead (default: any other voter)")
	return cmd
}

func newAdminMoveReplicaCmd() *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var from, to string
	cmd := &cobra.Command{
		Use:   "move-replica --datastore D --partition P --from A --to B",
		Short: "Move a raft partition's replica from one node to another (add, catch up, remove)",
		Long: `Move the replica of partition --partition of raft datastore --datastore from node --from to
node --to (POST /v1/admin/partitions/{ds}/{p}/move): add-voter --to (which waits for it to catch
up), then remove-voter --from. The partition never has fewer voters than before; during the
move it has one more. Prints the final configuration.

Rerunning an interrupted move finishes it; a move already done changes nothing. --to must be
running and known (404 otherwise); --from must hold a replica and differ from --to (409
otherwise). Async datastores have no raft replicas: see move-partition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			if from == "" || to == "" {
				return errors.New("--from and --to are required: the nodes to move the replica from and to")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				return runConfigChange(ctx, cl, f.asJSON, out,
					func(ctx context.Context) (wire.PartitionConfig, error) {
						return cl.MoveReplica(ctx, p.datastore, p.partition, from, to)
					},
					func(c wire.PartitionConfig) string {
						return fmt.Sprintf("moved %s/%d from %s to %s; voters: %s", p.datastore, p.partition, from, to, strings.Join(c.Voters(), ", "))
					})
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().StringVar(&from, "from", "", "the node whose replica moves (required)")
	cmd.Flags().StringVar(&to, "to", "", "the node to move it to (required)")
	return cmd
}

func newAdminRebalanceCmd() *cobra.Command {
	var f adminAPIFlags
	var opts wire.RebalanceRequest
	cmd := &cobra.Command{
		Use:   "rebalance [--datastore D] [--dry-run] [--nodes a,b] [--exclude x]",
		Short: "Spread raft replicas and leaderships evenly over the nodes",
		Long: `Spread the voters of every raft partition (of --datastore, or of all) evenly over the nodes,
then their leaderships (POST /v1/admin/rebalance). The plan moves every replica off --exclude
nodes, then moves replicas from the fullest node to the emptiest one not holding that partition
while they differ by more than one; then it transfers leaderships likewise. Moves run one at a
time (move-replica: add, catch up, remove), so every partition keeps at least its voters.

--nodes are the nodes to spread over (default: those gossip sees alive, or every known node
without gossip); nodes outside them that are not excluded keep their replicas. --dry-run prints
the plan and changes nothing.

Prints the moves and transfers (planned, or done), then replicas and leaders per node before and
after, and how long it took. An interrupted rebalance leaves every partition with at least its
voters (a half-done move one more); running it again continues. A failed leadership transfer is
logged by the node and skipped: leadership is a preference.

To grow the cluster: start the new node (it joins the gossip, or add it to the topology), check
it in 'schemaless admin nodes', then rebalance.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				rep, err := cl.Rebalance(ctx, opts)
				return printRebalanceAnswer(out, f.asJSON, rep, err, "", opts.Exclude)
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	fl := cmd.Flags()
	fl.StringVar(&opts.Datastore, "datastore", "", "rebalance this datastore's partitions only (default: every raft datastore)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the plan, change nothing")
	fl.StringSliceVar(&opts.Nodes, "nodes", nil, "nodes to spread replicas over (default: every alive node)")
	fl.StringSliceVar(&opts.Exclude, "exclude", nil, "nodes to move every replica and leadership off")
	return cmd
}

func newAdminDrainCmd() *cobra.Command {
	var f adminAPIFlags
	var node string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "drain --node N [--dry-run]",
		Short: "Move every raft replica and leadership off a node, before stopping it",
		Long: `Move every raft replica and leadership off node --node (POST /v1/admin/nodes/{node}/drain): a
rebalance over the other alive nodes with --node excluded. Each replica moves to the node with
the fewest replicas that does not hold that partition yet; a replica that no other node can take
(every other node already holds that partition, as in a 3-node cluster with 3 replicas) stays,
and the command says so: add a node first, or remove-voter it on purpose.

--dry-run prints the plan and changes nothing. Once drained, the node holds no data and can be
stopped; it stays in the topology file until you take it out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" {
				return errors.New("--node is required: the id of the node to drain")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				rep, err := cl.Drain(ctx, node, dryRun)
				return printRebalanceAnswer(out, f.asJSON, rep, err, node, []string{node})
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	cmd.Flags().StringVar(&node, "node", "", "the node to drain (required)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan, change nothing")
	return cmd
}

// printRebalanceAnswer prints the report of a rebalance or drain (drained: the node, or "")
// excluding nodes exclude, or returns err.
func printRebalanceAnswer(out io.Writer, asJSON bool, rep wire.RebalanceReport, err error, drained string, exclude []string) error {
	if err != nil {
		return adminError(err)
	}
	if asJSON {
		return writeAnswerJSON(out, rep)
	}
	printRebalance(out, rep, drained, exclude)
	return nil
}

func printRebalance(w io.Writer, rep wire.RebalanceReport, drained string, exclude []string) {
	verb, what := "rebalanced", "rebalance"
	if drained != "" {
		verb, what = "drained "+drained, "drain of "+drained
	}
	var over []string // the nodes replicas may go to (the report lists the excluded ones too)
	for _, nd := range rep.Nodes {
		if !slices.Contains(exclude, nd) {
			over = append(over, nd)
		}
	}
	if rep.DryRun {
		fmt.Fprintf(w, "%s onto %s, planned (dry run: nothing changed): %s, %s\n", what, strings.Join(over, ", "),
			plural(len(rep.Moves), "replica move"), plural(len(rep.Transfers), "leadership transfer"))
	} else {
		fmt.Fprintf(w, "%s onto %s in %s: %s, %s\n", verb, strings.Join(over, ", "), secs(rep.DurationSeconds),
			plural(len(rep.Moves), "replica move"), plural(len(rep.Transfers), "leadership transfer"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range rep.Moves {
		fmt.Fprintf(tw, "  move\t%s/%d\t%s -> %s\n", m.Datastore, m.Partition, m.From, m.To)
	}
	for _, t := range rep.Transfers {
		fmt.Fprintf(tw, "  leader\t%s/%d\t%s -> %s\n", t.Datastore, t.Partition, dash(t.From), t.To)
	}
	_ = tw.Flush()
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	var nodes []string
	for _, m := range []map[string]int{rep.ReplicasBefore, rep.ReplicasAfter, rep.LeadersBefore, rep.LeadersAfter} {
		for nd := range m {
			if !slices.Contains(nodes, nd) {
				nodes = append(nodes, nd)
			}
		}
	}
	sort.Strings(nodes)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREPLICAS\tLEADERS")
	for _, nd := range nodes {
		fmt.Fprintf(tw, "%s\t%d -> %d\t%d -> %d\n", nd, rep.ReplicasBefore[nd], rep.ReplicasAfter[nd], rep.LeadersBefore[nd], rep.LeadersAfter[nd])
	}
	_ = tw.Flush()
	if drained != "" {
		if n := rep.ReplicasAfter[drained]; n > 0 {
			fmt.Fprintf(w, "%s still holds %s afterwards: every other node already holds those partitions. Add a node and drain again, or remove-voter them on purpose.\n",
				drained, plural(n, "replica"))
		} else if !rep.DryRun {
			fmt.Fprintf(w, "%s holds no replica: it can be stopped.\n", drained)
		}
		switch {
		case rep.CatalogVoteKept:
			fmt.Fprintf(w, "%s still votes in the catalog: every other node already does. Add a node and drain again.\n", drained)
		case len(rep.CatalogVoters) > 0:
			fmt.Fprintf(w, "catalog voters after the drain: %s\n", strings.Join(rep.CatalogVoters, ", "))
		}
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
