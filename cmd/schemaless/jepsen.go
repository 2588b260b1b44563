package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/schemaless-db/schemaless/jepsen"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/spf13/cobra"
)

func newJepsenCmd() *cobra.Command {
	cfg := jepsen.DefaultConfig()
	var nemeses, workloads string
	var seed int64
	var noFailOver bool
	var logs logFlags
	cmd := &cobra.Command{
		Use:   "jepsen",
		Short: "Run the fault-injection harness: real nodes, real faults, a checked history",
		Long: `Start a cluster of 'schemaless serve' processes, each on its own loopback address (127.0.0.2,
127.0.0.3, ...), run client workers against it while a nemesis kills (kill -9), pauses (SIGSTOP)
and cuts off (iptables) nodes, then heal, wait for the replicas to converge, and check:

  cells       put_cell, get_cell and get_cell_latest on a few keys with colliding ref keys;
              the history must be linearizable (porcupine, a write-once versioned cell model),
              and every replica of a shard must hold the same cells in the same added_id order
  durability  many unique cells; every acknowledged cell must be on every replica with its
              exact body, nothing unexpected, nothing twice, replicas identical
  triggers    unique cells of two columns consumed by a group of trigger worker processes
              (killed and paused by kill-worker and pause-worker): every acknowledged cell of
              the group's column delivered at least once, in added_id order per shard, no other
              cell delivered; duplicates counted
  index       rows of cells indexed by the nodes' built-in maintainers (a few changing their
              shard field): after the heal the index catches up within a bound, reflects every
              acknowledged cell, invents nothing and holds exactly one entry per row, on the
              shard value of the row's first cell
  cas         registers (get_cell_latest, strong) changed only by conditional writes of the
              next ref key (if_latest_ref_key): the history must be linearizable as
              compare-and-set registers (porcupine); a 412 is a failed cas, an indeterminate
              write one whose outcome is unknown
  bank        5 accounts in one partition, transfers as transactions conditional on the two
              versions read, reads as one strong batch get (one snapshot): every read sums to
              the initial total with no negative balance, no transfer seen half, no read older
              than a committed transfer or an earlier read, ref keys advancing by one, every
              committed transfer stored; the commit and 412 rates reported
  replication the run's cluster is 'east'; the harness starts a second 3-node cluster, 'west',
              100 addresses further (127.0.0.102, ...), connects them both ways and writes
              unique cells to both: every acknowledged cell must reach the other cluster with
              its body and origin, each shard's cells of one origin in that origin's order,
              none lost, none twice, both clusters holding the same cells. The nemeses act on
              east, kill-worker and pause-worker on west's nodes, and with any partition
              nemesis every link between the clusters is cut for 30 s, every 40 s on average

Nemeses: ` + strings.Join(jepsen.AllNemeses, ", ") + `.
Partitions need iptables and root.

Membership nemeses (raft mode, opt-in: name them, or 'membership' for the three; they change
raft configurations through the nodes' admin API while the traffic runs, and the checks read
every partition's current placement from it):

  remove-add-voter  remove a voter of a random partition (its leader half the time), add it
                    back when the fault ends (an empty replica that catches up, then promoted)
  move-replica      move a random voter to a node hosting no replica of the partition (needs
                    more nodes than replicas: --nodes 5); stays moved. On 3 nodes every node
                    hosts every partition, and it is a remove-add-voter
  transfer-leader   transfer a random partition's leadership

Capacity nemesis (every store, both modes; opt-in: name it, e.g. --nemesis all,split, or
'capacity'):

  split             split a random partition of a random datastore (not the bank's: its
                    transfers need every account in one partition) at a random shard
                    boundary inside it; the right half is a new partition on the same
                    replicas (--mode async: on the same storage cluster); one fault in
                    three merges two neighbours instead; instant, nothing undone (at most 16
                    partitions per datastore). The checks read the partition map from the
                    cluster's catalog

--mode async makes every datastore an async datastore (MySQL storage clusters with buffered
writes): the harness starts 2 MariaDB storage clusters of a master and 2 minions each, every
server on its own loopback address (--storage-first-ip, then the next ones), and runs the cells
and durability workloads (the default there; cas and bank run there too) against nodes that
talk to them. Its nemeses
(--nemesis all there: these and kill-random, pause-random):

  kill-master         kill -9 a cluster's master; heal: restart it and unfence it (no promotion)
  failover            kill -9 a master and promote a minion; heal: restart the old master
                      fenced and repoint it, or leave it out if it diverged (once per cluster)
  partition-master    cut a master from its minions, both directions (iptables)
  partition-failover  cut a master from its minions, kill it while cut off, promote a minion:
                      what the master acknowledged meanwhile is only in the buffers
  pause-replication   stop a minion's SQL thread, then start it again

Async checks: every acknowledged cell (created, exists, buffered) read back by strong reads
once the buffers drained, the members replicating from each master identical; strong reads
read-your-writes per worker outside failover windows (linearizability is not claimed there);
the staleness of stale reads measured. cas and bank: conditional writes and transactions run
on the primary master and are refused (503, a definite failure) while it is down, and are
promised linearizable while that master lives: cas registers with an operation in a failover
window are checked apart, and what a failover of the accounts' cluster explains in the bank
(a read or the final state after it, a transfer lost across it) is reported as excused, not
counted as a violation. --unsafe-no-buffered-writes turns buffered writes off
to show a failover losing acknowledged writes (the run is then expected to be invalid).

--secure runs the nodes with TLS on the API and mutual TLS between nodes, a principals file of
bearer tokens and encrypted gossip, from a development bundle the harness writes to the run's
certs/ directory (a CA, a certificate per node, a token per principal); the workers, checkers,
nemeses and trigger workers use https, trust the CA and send the admin token. The storage
servers of --mode async stay plaintext.

Each run writes a directory under --out: history.jsonl, nemesis.jsonl, summary.json, each
node's log, linearizability.html (porcupine, fault windows annotated) and latency.png. The
command exits non-zero when a violation is found or a check cannot decide.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := logs.logger(os.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger, cfg.Out = logger, os.Stdout
			async := cfg.Mode == "async"
			cfg.Nemesis.Kinds = jepsen.ParseNemeses(nemeses, async)
			cfg.Workloads = strings.Split(workloads, ",")
			if async && !cmd.Flags().Changed("workload") {
				cfg.Workloads = []string{"cells", "durability"}
			}
			cfg.FailOver = !noFailOver
			if seed != 0 {
				cfg.Seed = uint64(seed)
			}
			switch cfg.Store {
			case storage.EnginePebble, storage.EngineSQLite:
				cfg.MySQLDSN = ""
			case storage.EngineMySQL:
				if cfg.MySQLDSN == "" {
					return fmt.Errorf("--store mysql needs --mysql DSN")
				}
			default:
				return fmt.Errorf("--store %q: want pebble, sqlite or mysql", cfg.Store)
			}
			if cfg.Binary == "" {
				if cfg.Binary, err = os.Executable(); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			sum, err := jepsen.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if !sum.Valid {
				return fmt.Errorf("jepsen: %d violations (see %s)", len(sum.Violations), sum.Dir)
			}
			return nil
		},
	}
	logs.register(cmd)
	cmd.AddCommand(newJepsenTriggerWorkerCmd())
	fl := cmd.Flags()
	fl.StringVar(&cfg.Binary, "binary", "", "schemaless executable of the nodes (default: this one)")
	fl.StringVar(&cfg.OutDir, "out", cfg.OutDir, "directory receiving one directory per run")
	fl.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "nodes in the cluster: 3 or 5")
	fl.StringVar(&cfg.Store, "store", cfg.Store, "store of every node (serve --store): pebble, sqlite or mysql (with --mysql)")
	fl.StringVar(&cfg.MySQLDSN, "mysql", "", "MySQL/MariaDB server of --store mysql (go-sql-driver DSN, e.g. root@tcp(127.0.0.1:3306)/)")
	fl.BoolVar(&cfg.Keep, "keep", false, "keep the run's MySQL databases")
	fl.DurationVar(&cfg.Duration, "duration", cfg.Duration, "traffic time, the quiet period included")
	fl.DurationVar(&cfg.Quiet, "quiet", cfg.Quiet, "fault-free traffic at the end, after everything is healed")
	fl.StringVar(&nemeses, "nemesis", "all", "nemeses, comma-separated, or none; all: "+strings.Join(jepsen.AllNemeses, ", ")+
		"; membership (opt-in, raft mode): "+strings.Join(jepsen.MembershipNemeses, ", ")+
		"; capacity (opt-in, raft mode, pebble): "+strings.Join(jepsen.CapacityNemeses, ", ")+"; in async mode also "+strings.Join(jepsen.AsyncNemeses, ", "))
	fl.DurationVar(&cfg.Nemesis.Interval, "interval", cfg.Nemesis.Interval, "mean time between faults")
	fl.DurationVar(&cfg.Nemesis.FaultDuration, "fault-duration", cfg.Nemesis.FaultDuration, "mean time a fault is held (keep it above the election timeout)")
	fl.Float64Var(&cfg.Nemesis.CombineProbability, "combine", cfg.Nemesis.CombineProbability, "chance that a fault is one nemesis of each class at once: membership change, node kill or pause, partition, worker kill or pause, split")
	fl.StringVar(&workloads, "workload", strings.Join(cfg.Workloads, ","), "workloads, comma-separated: cells, durability, triggers, index, cas, bank, replication (async mode: cells, durability, cas, bank)")
	fl.IntVar(&cfg.WorkersPerNode, "workers-per-node", cfg.WorkersPerNode, "client workers per node and workload")
	fl.StringVar(&cfg.Consistency, "consistency", cfg.Consistency, "read consistency of the cells workload: strong or stale (stale must be caught)")
	fl.BoolVar(&noFailOver, "no-failover", false, "workers talk to their own node only")
	fl.DurationVar(&cfg.OpTimeout, "op-timeout", cfg.OpTimeout, "time limit of one operation")
	fl.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "time limit of one HTTP attempt")
	fl.DurationVar(&cfg.CheckTimeout, "check-timeout", cfg.CheckTimeout, "time limit of the linearizability check (0: none)")
	fl.DurationVar(&cfg.ConvergeTimeout, "converge-timeout", cfg.ConvergeTimeout, "time limit for the replicas to agree after the traffic stops")
	fl.Int64Var(&seed, "seed", 0, "seed of every random choice (default: the time)")
	fl.StringVar(&cfg.Mode, "mode", cfg.Mode, "datastore mode: raft, or async (MySQL storage clusters started by the harness)")
	fl.BoolVar(&cfg.UnsafeNoBufferedWrites, "unsafe-no-buffered-writes", false, "async mode: datastores without buffered writes (a failover then loses acknowledged writes)")
	fl.StringVar(&cfg.StorageFirstIP, "storage-first-ip", cfg.StorageFirstIP, "async mode: loopback address of the first storage server; the others follow (links at third octet + 100)")
	fl.StringVar(&cfg.FirstIP, "first-ip", cfg.FirstIP, "loopback address of node n1; the others follow")
	fl.IntVar(&cfg.HTTPPort, "http-port", cfg.HTTPPort, "HTTP port of every node")
	fl.IntVar(&cfg.RaftPort, "raft-port", cfg.RaftPort, "raft port of every node")
	fl.StringVar(&cfg.Chain, "chain", cfg.Chain, "iptables chain of the network faults (runs at the same time need different chains, addresses and ports)")
	fl.BoolVar(&cfg.Secure, "secure", false, "run the nodes with TLS (mutual TLS between nodes), bearer tokens and encrypted gossip from a development bundle in the run's certs/ directory; every client of the harness uses https, trusts its CA and sends the admin token")
	fl.BoolVar(&cfg.Snapshots, "snapshots", cfg.Snapshots, "snapshot every 256 raft entries and keep 64, so lagging nodes catch up by snapshot (--snapshots=false: the production defaults)")
	fl.StringSliceVar(&cfg.ServeArgs, "serve-arg", cfg.ServeArgs, "extra flags of every 'schemaless serve', comma-separated")
	return cmd
}
