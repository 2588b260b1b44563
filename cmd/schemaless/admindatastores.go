package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// newAdminDatastoreCmds returns the admin commands of the cluster's catalog, through a running
// node's API (/v1/admin/datastores, /v1/admin/partitions/{ds}/{p}/split,
// /v1/admin/partitions/{ds}/merge): list, create and drop datastores, and split and merge
// partitions, at run time.
func newAdminDatastoreCmds() []*cobra.Command {
	return []*cobra.Command{newAdminDatastoresCmd(), newAdminCreateDatastoreCmd(), newAdminDropDatastoreCmd(), newAdminDatastoreSettingsCmd(), newAdminSplitCmd(),
		newAdminMergeCmd(), newAdminMoveToClusterCmd(), newAdminCatalogVotersCmd(), newAdminReplicationCmd()}
}

// newAdminCatalogVotersCmd is `admin catalog-voters`: it shows the catalog's voters, and with
// --set moves the catalog's votes.
func newAdminCatalogVotersCmd() *cobra.Command {
	var f adminAPIFlags
	var set []string
	cmd := &cobra.Command{
		Use:   "catalog-voters [--set N1,N2,N3]",
		Short: "Show the nodes that vote in the cluster's catalog, or move the votes to others",
		Long: `The cluster's catalog (its datastores and partitions) is a raft group of its own, whose voters
are the topology file's first three nodes until moved. Without --set, print the voters (from GET
/v1/admin/datastores). With --set, give the votes to those nodes (POST
/v1/admin/catalog/voters), one membership change at a time: the catalog first lists old and
new voters together (the new ones open empty replicas), each new voter joins and catches up,
then each old one leaves (the catalog's leader last, after handing its leadership to a voter
that stays), and the catalog lists the new voters: the old ones delete their replicas and
follow the catalog from the voters. Do it before draining or retiring one of the first three
nodes. 3 or 5 voters keep a majority through a node's loss.

An interrupted move leaves a catalog that works (old and new voters listed together, or more
voters than asked); run the same command again to finish it.

Errors: 400 (field voters) an empty list, more than 7, a node listed twice or one the cluster
does not know; 503 the catalog has no leader; 504 the move may be half done (run it again).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				if len(set) == 0 {
					res, err := cl.Datastores(ctx)
					if err != nil {
						return adminError(err)
					}
					if f.asJSON {
						return writeAnswerJSON(out, wire.CatalogVotersResponse{Generation: res.Generation, Voters: res.CatalogVoters})
					}
					fmt.Fprintf(out, "catalog voters at generation %d: %s\n", res.Generation, strings.Join(res.CatalogVoters, ", "))
					return nil
				}
				res, err := cl.MoveCatalogVoters(ctx, set)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				fmt.Fprintf(out, "catalog voters at generation %d: %s\n", res.Generation, strings.Join(res.Voters, ", "))
				return nil
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	cmd.Flags().StringSliceVar(&set, "set", nil, "the node ids to hold the catalog's votes (comma-separated)")
	return cmd
}

func newAdminDatastoresCmd() *cobra.Command {
	var f adminAPIFlags
	var detail bool
	cmd := &cobra.Command{
		Use:   "datastores [--detail]",
		Short: "List the datastores of the cluster's catalog",
		Long: `List the datastores of the cluster's replicated catalog as the answering node last learned it
(GET /v1/admin/datastores), after the catalog's generation (raised by every create, drop, split
and merge). One line per datastore:

  NAME        the datastore
  MODE        raft or async
  SHARDS      its shard count (fixed forever)
  PARTITIONS  its partitions (contiguous shard ranges)
  CREATED     the catalog generation that created it; 0 for one imported from the topology
              file at the cluster's first start
  CREATED AT  when it was created (- for an imported one)

--detail prints each datastore's partitions too: id, shard range, replicas (raft: the nodes
the catalog placed it on, then "(learners ...)" when it has learners; 'schemaless admin
partitions' shows the live raft configuration) or storage cluster (async), the generation at which it took its range, the partition it was split
from, and the datastore's latest splits and merges. --json prints the API's answer as is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				res, err := cl.Datastores(ctx)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				return printDatastores(out, res, detail)
			})
		},
	}
	f.register(cmd, adminReadTimeout)
	cmd.Flags().BoolVar(&detail, "detail", false, "also print each datastore's partitions and latest splits and merges")
	return cmd
}

// printDatastores prints the catalog as a table, each datastore's partitions after it with
// detail.
func printDatastores(w io.Writer, res wire.DatastoresResponse, detail bool) error {
	fmt.Fprintf(w, "catalog generation %d: %s\n", res.Generation, plural(len(res.Datastores), "datastore"))
	if len(res.Datastores) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tSHARDS\tPARTITIONS\tCREATED\tCREATED AT")
	for _, d := range res.Datastores {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", d.Name, dash(d.Mode), d.Shards, len(d.Partitions), createdGeneration(d), createdAt(d))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !detail {
		return nil
	}
	for _, d := range res.Datastores {
		fmt.Fprintln(w)
		if err := printDatastorePartitions(w, d); err != nil {
			return err
		}
	}
	return nil
}

func createdGeneration(d wire.DatastoreInfo) string {
	if d.Created == 0 {
		return "0 (topology)"
	}
	return fmt.Sprint(d.Created)
}

func createdAt(d wire.DatastoreInfo) string {
	if d.CreatedAt.IsZero() {
		return "-"
	}
	return d.CreatedAt.UTC().Format(time.RFC3339)
}

// printDatastorePartitions prints d's partitions and history, under a line naming d.
func printDatastorePartitions(w io.Writer, d wire.DatastoreInfo) error {
	head := fmt.Sprintf("%s  %s, %d shards, %s", d.Name, dash(d.Mode), d.Shards, plural(len(d.Partitions), "partition"))
	if len(d.StorageClusters) > 0 {
		head += ", storage clusters " + strings.Join(d.StorageClusters, ", ")
	}
	fmt.Fprintln(w, head)
	where := "REPLICAS"
	if d.Mode == topology.ModeAsync {
		where = "CLUSTER"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  ID\tSHARDS\t%s\tGENERATION\tPARENT\n", where)
	for _, p := range d.Partitions {
		at := dash(p.Cluster)
		if d.Mode != topology.ModeAsync {
			at = dash(strings.Join(p.Replicas, ","))
			if len(p.Learners) > 0 {
				at += " (learners " + strings.Join(p.Learners, ",") + ")"
			}
		}
		parent := "-"
		if p.Parent >= 0 {
			parent = fmt.Sprint(p.Parent)
		}
		fmt.Fprintf(tw, "  %d\t%d-%d\t%s\t%d\t%s\n", p.ID, p.FirstShard, p.LastShard, at, p.Generation, parent)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range d.History {
		what := fmt.Sprintf("%d split at shard %d into %d and %d", e.Left, e.AtShard, e.Left, e.Right)
		if e.Op != "split" {
			what = fmt.Sprintf("%d and %d merged into %d", e.Left, e.Right, e.Left)
		}
		fmt.Fprintf(w, "  %s  generation %d  %s\n", e.At.UTC().Format(time.RFC3339), e.Generation, what)
	}
	return nil
}

func newAdminCreateDatastoreCmd() *cobra.Command {
	var f adminAPIFlags
	var req wire.CreateDatastoreRequest
	var replicas int
	var replicaNodes []string
	cmd := &cobra.Command{
		Use:   "create-datastore --name N --shards S [--partitions P] [--replicas R | --replica-nodes n1,n2,n3]",
		Short: "Create a raft datastore in the cluster's catalog, at run time",
		Long: `Create datastore --name in the cluster's replicated catalog (POST /v1/admin/datastores): every
node learns of it and opens its replicas; no restart and no topology change. The command returns
once the answering node has opened it and its partitions have leaders (or, if they take longer,
says it is not ready yet: GET /readyz?datastore=N tells when it is), and prints the datastore.

  --name        [a-z][a-z0-9_]{0,31}, not used by another datastore (409 otherwise)
  --shards      the shard count, fixed forever (1 to 10000)
  --partitions  the number of equal contiguous shard ranges (default 1, at most --shards);
                split and merge them later
  --replicas    how many nodes hold each partition (default 3, or every node when fewer are
                known), chosen among the alive nodes and spread so that partitions start on
                different nodes; or
  --replica-nodes  the nodes that hold every partition
  --leader-zone the zone whose nodes should lead its partitions (rebalance and the cluster's
                own leadership transfers pick a voter there when one is alive)

The replicas of a partition go to as many distinct zones as the nodes span (serve --zone), at
most a third of them in one zone with three zones or more; what the placement cannot meet (a
zone holding a majority of a partition's voters) is printed as a warning.

An async datastore (MySQL storage clusters) is created through the API only: POST
/v1/admin/datastores with its storage_clusters (docs/api.md, "Datastores").

The creation is sent again only if it certainly did not start (no node reached, or the catalog
had no leader). If the command times out or loses its connection after sending, the datastore
may have been created: 'schemaless admin datastores' tells.

Errors: 400 naming the field at fault (name, shards, partitions, replicas: an unknown node, too
few nodes alive), 409 a datastore of that name exists, 503 the catalog has no leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case req.Name == "":
				return errors.New("--name is required: the datastore to create")
			case !cmd.Flags().Changed("shards"):
				return errors.New("--shards is required: the datastore's shard count, fixed forever")
			case cmd.Flags().Changed("replicas") && len(replicaNodes) > 0:
				return errors.New("--replicas and --replica-nodes exclude each other: give a count or the nodes")
			case req.Mode != "" && req.Mode != topology.ModeRaft:
				return fmt.Errorf("--mode %q: only raft datastores are created here (an async one needs its storage clusters: POST /v1/admin/datastores)", req.Mode)
			}
			if cmd.Flags().Changed("replicas") {
				req.Replicas = replicas
			} else if len(replicaNodes) > 0 {
				req.Replicas = replicaNodes
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				start := time.Now()
				res, err := cl.CreateDatastore(ctx, req)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				ready := "ready: its partitions have leaders"
				if !res.Ready {
					ready = "not ready yet: its partitions are electing leaders (GET /readyz?datastore=" + req.Name + " tells when it is)"
				}
				fmt.Fprintf(out, "created datastore %s at catalog generation %d (%s); %s\n", req.Name, res.Generation,
					time.Since(start).Round(time.Millisecond), ready)
				for _, w := range res.Warnings {
					fmt.Fprintf(out, "warning: %s\n", w)
				}
				if res.Datastore.Name == "" { // the node had not applied the creation yet
					fmt.Fprintf(out, "'schemaless admin datastores --detail' shows its partitions\n")
					return nil
				}
				return printDatastorePartitions(out, res.Datastore)
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	fl := cmd.Flags()
	fl.StringVar(&req.Name, "name", "", "the datastore to create (required)")
	fl.IntVar(&req.Shards, "shards", 0, "its shard count, fixed forever (required)")
	fl.IntVar(&req.Partitions, "partitions", 0, "its number of partitions, equal shard ranges (default 1)")
	fl.StringVar(&req.Mode, "mode", topology.ModeRaft, "the datastore's mode: raft (async ones are created through the API)")
	fl.IntVar(&replicas, "replicas", 0, "how many nodes hold each partition, 1 to 9 (default: 3, or every node when fewer are known)")
	fl.StringSliceVar(&replicaNodes, "replica-nodes", nil, "the nodes that hold every partition (comma-separated), instead of --replicas")
	fl.StringVar(&req.LeaderZone, "leader-zone", "", "the zone whose nodes should lead its partitions (default none)")
	return cmd
}

func newAdminDropDatastoreCmd() *cobra.Command {
	var f adminAPIFlags
	var name, confirm string
	cmd := &cobra.Command{
		Use:   "drop-datastore --name N --confirm N",
		Short: "Drop a datastore from the cluster's catalog and delete its data",
		Long: `Drop datastore --name from the cluster's replicated catalog (DELETE
/v1/admin/datastores/{name}?confirm={name}). --confirm must name it again. Every node then
closes its partitions and deletes their data: a raft datastore's replicas are gone for good (take
a backup first: 'schemaless admin backup'). An async datastore's MySQL databases stay, for you to
remove. Requests to the datastore answer 404 once a node has learned of the drop.

A datastore of the topology file dropped here stays dropped: the topology's datastores are
imported into the catalog once, at the cluster's first start.

The drop is sent again only if it certainly did not start. If the command times out or loses its
connection after sending, the datastore may have been dropped: 'schemaless admin datastores'
tells.

Errors: 404 no such datastore (field datastore), 400 a confirmation that does not name it (field
confirm), 503 the catalog has no leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case name == "":
				return errors.New("--name is required: the datastore to drop")
			case confirm == "":
				return fmt.Errorf("--confirm is required: name the datastore again (--confirm %s) to drop it and delete its data", name)
			case confirm != name:
				return fmt.Errorf("--confirm %q does not name the datastore %q: nothing dropped", confirm, name)
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				res, err := cl.DropDatastore(ctx, name)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				fmt.Fprintf(out, "dropped datastore %s at catalog generation %d\n", res.Dropped, res.Generation)
				return nil
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	cmd.Flags().StringVar(&name, "name", "", "the datastore to drop (required)")
	cmd.Flags().StringVar(&confirm, "confirm", "", "the datastore's name again (required)")
	return cmd
}

func newAdminSplitCmd() *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var atShard int
	var to string
	var dropOld bool
	cmd := &cobra.Command{
		Use:   "split --datastore D --partition P [--at-shard S] [--to CLUSTER [--drop-old]]",
		Short: "Split a partition in two at a shard, at run time",
		Long: `Split partition --partition of raft datastore --datastore in two (POST
/v1/admin/partitions/{ds}/{p}/split): the partition keeps its id and the shards below --at-shard
(the left half); the shards from --at-shard on become a new partition on the same replicas (the
right half). --at-shard 0, the default, splits where the partition's load divides best (as its leader counted it), else at the middle of its range. No cell
moves between nodes, every acknowledged write stays with its added_id, and requests keep
working throughout: a node re-routes a request sent by an older catalog. A transaction (atomic
or conditional write) whose rows end up in different halves answers 400 cross_partition.

The command returns once the answering node has applied the split, and prints both halves (id,
shard range, replicas), the catalog generation the split made, whether the new partition had a
leader (ready) and the time the split took. 'schemaless admin datastores --detail' shows the
datastore's partitions and its splits afterwards; move the new partition's replicas with
move-replica or rebalance.

Every store splits: pebble (the default) and MySQL move no cell; SQLite copies the right half's
shards into the new partition's file (inside SQLite, table by table), so writes to the
partition wait for the copy.

An async datastore splits in place on its storage cluster: no cell moves (a shard's cells live
in a database of the shard's own), the right half gets a copy of the partition's KV rows and
request records on the master, and writes to the partition wait for the split's lock (pause).
--to CLUSTER then moves the right half to that storage cluster with the copy, catch-up and
fenced switch of move-to-cluster (--drop-old drops its old copy once drained): this is how a
MySQL master's shards are split in two.

The split is sent again only if it certainly did not start (no node reached, or the catalog had
no leader). If the command times out, loses its connection after sending, or the node answers
504, the split may have been made: 'schemaless admin datastores --detail' tells. Do not simply
run it again: a second split splits the left half.

Errors: 400 --at-shard not inside the partition's range or a partition of one shard (field
at_shard), an async datastore (field datastore); 404 no such datastore or partition; 409 the
node's store cannot split, or the partition changed meanwhile (run it again); 503 the catalog
has no leader (nothing done).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			if atShard < 0 {
				return fmt.Errorf("--at-shard %d: want the first shard of the right half, or 0 for where its load divides (else the middle)", atShard)
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				res, err := cl.Split(ctx, p.datastore, p.partition, wire.SplitRequest{AtShard: atShard, To: to, DropOld: dropOld})
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				return printSplit(out, p.datastore, res)
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().IntVar(&atShard, "at-shard", 0, "the first shard of the right half (default 0: where the partition's load divides best, else the middle of its range)")
	cmd.Flags().StringVar(&to, "to", "", "async datastores: the storage cluster the right half then moves to")
	cmd.Flags().BoolVar(&dropOld, "drop-old", false, "with --to: drop the right half's old copy once drained")
	return cmd
}

// printSplit prints a split's answer: a line with the generation, the time it took and whether
// the new partition is ready, then both halves.
func printSplit(w io.Writer, ds string, res wire.SplitResponse) error {
	ready := "ready: the new partition has a leader"
	if !res.Ready {
		ready = "not ready yet: the new partition is electing its leader ('schemaless admin partitions --datastore " + ds + "' shows it)"
	}
	if res.Right.Cluster != "" {
		ready = "on storage cluster " + res.Right.Cluster // async: no leader to elect
	}
	fmt.Fprintf(w, "split %s/%d at shard %d at catalog generation %d in %s; %s\n", ds, res.Left.ID, res.Right.FirstShard, res.Generation,
		(time.Duration(res.TookMillis) * time.Millisecond).String(), ready)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  HALF\tID\tSHARDS\tREPLICAS\tGENERATION\tPARENT")
	for _, h := range []struct {
		name string
		p    wire.CatalogPartition
	}{{"left", res.Left}, {"right", res.Right}} {
		parent := "-"
		if h.p.Parent >= 0 {
			parent = fmt.Sprint(h.p.Parent)
		}
		place := h.p.Cluster
		if place == "" {
			place = strings.Join(h.p.Replicas, ",")
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d-%d\t%s\t%d\t%s\n", h.name, h.p.ID, h.p.FirstShard, h.p.LastShard, dash(place), h.p.Generation, parent)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Learners) > 0 {
		fmt.Fprintf(w, "learners of the parent added to the right half: %s\n", strings.Join(res.Learners, ", "))
	}
	if res.PauseMillis > 0 {
		fmt.Fprintf(w, "writes to the partition waited %s for the split\n", time.Duration(res.PauseMillis)*time.Millisecond)
	}
	if res.Move != nil {
		if res.Move.Error != "" {
			fmt.Fprintf(w, "the move of partition %d to %s failed (the split stands): %s\nsend it again: schemaless admin move-to-cluster --datastore %s --partition %d --to %s\n",
				res.Right.ID, res.Move.To, res.Move.Error, ds, res.Right.ID, res.Move.To)
			return nil
		}
		printClusterMove(w, ds, *res.Move)
	}
	return nil
}

// printClusterMove prints a move of an async partition to another storage cluster.
func printClusterMove(w io.Writer, ds string, m wire.ClusterMoveResponse) {
	if m.AlreadyThere {
		fmt.Fprintf(w, "partition %s/%d is on %s already (placement epoch %d)\n", ds, m.Partition, m.To, m.Epoch)
		return
	}
	fmt.Fprintf(w, "moved partition %s/%d from %s to %s (placement epoch %d) in %s: %d cells copied, %d in the final catch-up, writes waited %s; drained %v, old copy dropped %v\n",
		ds, m.Partition, m.From, m.To, m.Epoch, time.Duration(m.TookMillis)*time.Millisecond, m.CopiedCells, m.FinalCells,
		time.Duration(m.LockHeldMillis)*time.Millisecond, m.Drained, m.Dropped)
}

func newAdminMergeCmd() *cobra.Command {
	var f adminAPIFlags
	var ds string
	var left, right int
	cmd := &cobra.Command{
		Use:   "merge --datastore D --left L --right R",
		Short: "Merge two adjacent raft partitions into one, at run time",
		Long: `Merge partition --right of raft datastore --datastore into partition --left (POST
/v1/admin/partitions/{ds}/merge), undoing a split: --left keeps its id and takes both shard
ranges; --right's id is retired. --right must follow --left (its first shard right after
--left's last). When the two are not on the same replicas, --right's replicas first move onto
--left's nodes, one at a time, as move-replica moves them. The merge itself moves no cell
between nodes, every acknowledged write stays with its added_id, and requests keep working: writes to
--right's shards pause while --left takes them over, and a node re-routes a request sent by an
older catalog.

The command returns once the answering node has applied the merge, and prints the merged
partition (id, shard range, replicas), the catalog generation the merge made, the time the merge
took and how long writes to --right's shards paused. 'schemaless admin datastores --detail'
shows the datastore's partitions and its merges afterwards.

Every store merges: pebble and MySQL move no cell, sqlite copies --right's shards into
--left's file. Partitions of an async datastore merge in place on their storage cluster, after
--right moves onto --left's cluster (as admin move-to-cluster) when they are apart.

The merge is sent again only if it certainly did not start (no node reached, or the node
answered 503: nothing merged). If the command times out, loses its connection after sending,
or the node answers 504, the merge may have been made, and the cluster then completes it:
'schemaless admin datastores --detail' tells. Sent again after it was made, it is refused:
--right is gone (404, field partition).

Errors: 400 partitions that are not adjacent (field right); 404 no such datastore or
partition; 409 the partitions changed meanwhile, or an async move of either runs; 503 the catalog has no leader or a replica
of --right was too slow to freeze (nothing merged).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case ds == "":
				return errors.New("--datastore is required: the datastore the partitions belong to")
			case !cmd.Flags().Changed("left"):
				return errors.New("--left is required: the partition that keeps its id (see `schemaless admin datastores --detail`)")
			case !cmd.Flags().Changed("right"):
				return errors.New("--right is required: the partition right after --left, merged into it")
			case left < 0 || right < 0:
				return fmt.Errorf("--left %d --right %d: partition ids are not negative", left, right)
			case left == right:
				return fmt.Errorf("--left and --right are both %d: merge two partitions", left)
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				res, err := cl.MergePartitions(ctx, ds, left, right)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				return printMerge(out, ds, right, res)
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	cmd.Flags().StringVar(&ds, "datastore", "", "the datastore (required)")
	cmd.Flags().IntVar(&left, "left", 0, "the partition that keeps its id and takes both ranges (required)")
	cmd.Flags().IntVar(&right, "right", 0, "the partition right after --left, merged into it (moved onto its replicas or storage cluster first) (required)")
	return cmd
}

// printMerge prints a merge's answer: an async right partition's move onto left's storage
// cluster, if any, a line with the generation, the time it took and the pause of the writes to
// right's shards, then the merged partition.
func printMerge(w io.Writer, ds string, right int, res wire.MergeResponse) error {
	if res.Move != nil {
		printClusterMove(w, ds, *res.Move)
	}
	m := res.Merged
	fmt.Fprintf(w, "merged %s/%d into %s/%d at catalog generation %d in %s; writes to the merged shards paused %s\n", ds, right, ds, m.ID,
		res.Generation, time.Duration(res.TookMillis)*time.Millisecond, time.Duration(res.PauseMillis)*time.Millisecond)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSHARDS\tREPLICAS\tGENERATION")
	fmt.Fprintf(tw, "  %d\t%d-%d\t%s\t%d\n", m.ID, m.FirstShard, m.LastShard, dash(strings.Join(m.Replicas, ",")), m.Generation)
	return tw.Flush()
}
