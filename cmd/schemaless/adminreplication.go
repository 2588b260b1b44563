package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// newAdminReplicationCmd is `admin replication`: it shows the peers and their streams, and
// with --set or --drop changes a peer (/v1/admin/replication).
func newAdminReplicationCmd() *cobra.Command {
	var f adminAPIFlags
	var set, drop, token, caFile, certFile, keyFile string
	var endpoints, datastores []string
	var shards bool
	cmd := &cobra.Command{
		Use:   "replication [--set PEER --peer-endpoints URL,... --datastores DS,... [--peer-token T] [--peer-ca-cert F] [--peer-client-cert F --peer-client-key F]] [--drop PEER] [--shards]",
		Short: "Show or change replication between clusters",
		Long: `Without --set or --drop, show this cluster's name, its peer clusters and, per peer and
datastore, the stream's lag in cells and seconds, its rate, the cells this node sent, parked
cells, whether it halted and its last error (GET /v1/admin/replication); --shards adds one line
per shard (owner, offset, high water, lag).

--set PEER lists a peer cluster in this cluster's catalog, or replaces its settings (PUT
/v1/admin/replication/{peer}): every node streams the cells written in this cluster for
--datastores to the peer's --peer-endpoints (--endpoints are this cluster's nodes), as consumer groups "_replication.PEER". Run it on each
side, naming the other, to replicate both ways. --peer-token is the bearer token of a principal
with the replicator role in the peer; --peer-ca-cert the CA of the peer's certificate;
--peer-client-cert and --peer-client-key a certificate to authenticate with (PEM files, read
here and stored in the catalog).

--drop PEER stops the streams to PEER (their groups keep their offsets).

Errors: 400 naming the field (this cluster has no --cluster-name, the peer is this cluster, an
endpoint, datastore or credential refused), 404 no such peer, 503 the catalog has no leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if set != "" && drop != "" {
				return errors.New("give --set or --drop, not both")
			}
			var req wire.ReplicationPeerRequest
			if set != "" {
				if len(endpoints) == 0 || len(datastores) == 0 {
					return errors.New("--set needs --peer-endpoints and --datastores")
				}
				req = wire.ReplicationPeerRequest{Endpoints: endpoints, Datastores: datastores, Token: token}
				for _, pf := range []struct {
					flag, path string
					to         *string
				}{{"--ca-cert", caFile, &req.CACert}, {"--client-cert", certFile, &req.ClientCert}, {"--client-key", keyFile, &req.ClientKey}} {
					if pf.path == "" {
						continue
					}
					b, err := os.ReadFile(pf.path)
					if err != nil {
						return fmt.Errorf("%s: %w", pf.flag, err)
					}
					if len(b) > 64<<10 {
						return fmt.Errorf("%s: %s holds %d bytes, at most 65536", pf.flag, pf.path, len(b))
					}
					*pf.to = string(b)
				}
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				switch {
				case set != "":
					res, err := cl.SetReplicationPeer(ctx, set, req)
					if err != nil {
						return adminError(err)
					}
					if f.asJSON {
						return writeAnswerJSON(out, res)
					}
					fmt.Fprintf(out, "peer %s set at catalog generation %d: %s to %s\n", set, res.Generation, strings.Join(res.Datastores, ","), strings.Join(res.Endpoints, ","))
					return nil
				case drop != "":
					if err := cl.DropReplicationPeer(ctx, drop); err != nil {
						return adminError(err)
					}
					fmt.Fprintf(out, "peer %s dropped\n", drop)
					return nil
				}
				st, err := cl.Replication(ctx)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, st)
				}
				printReplication(out, st, shards)
				return nil
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	fl := cmd.Flags()
	fl.StringVar(&set, "set", "", "the peer cluster to list or change")
	fl.StringVar(&drop, "drop", "", "the peer cluster to remove")
	fl.StringSliceVar(&endpoints, "peer-endpoints", nil, "with --set: the peer's API base URLs (or host:port)")
	fl.StringSliceVar(&datastores, "datastores", nil, "with --set: the datastores to send")
	fl.StringVar(&token, "peer-token", "", "with --set: the bearer token of a replicator principal in the peer")
	fl.StringVar(&caFile, "peer-ca-cert", "", "with --set: PEM file of the CA of the peer's certificate")
	fl.StringVar(&certFile, "peer-client-cert", "", "with --set: PEM file of a client certificate for the peer")
	fl.StringVar(&keyFile, "peer-client-key", "", "with --set: PEM file of its key")
	fl.BoolVar(&shards, "shards", false, "show each shard of each stream")
	return cmd
}

// printReplication prints st as tables: one line per stream, and with shards one per shard.
func printReplication(out io.Writer, st wire.ReplicationStatus, shards bool) {
	name := st.Cluster
	if name == "" {
		name = "(no name: start the nodes with --cluster-name to replicate)"
	}
	fmt.Fprintf(out, "cluster %s, %d peers\n", name, len(st.Peers))
	if len(st.Peers) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDATASTORE\tLAG CELLS\tLAG S\tRATE/S\tSENT HERE\tPARKED\tHALTED\tLAST ERROR")
	for _, p := range st.Peers {
		for _, s := range p.Streams {
			last := s.LastError
			if s.Error != "" {
				last = "status: " + s.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.0f\t%d\t%d\t%v\t%s\n", p.Peer, s.Datastore, s.LagCells, s.LagSeconds, s.Rate, s.Sent, s.Parked, s.Halted, orNone(last))
		}
	}
	tw.Flush()
	if !shards {
		return
	}
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDATASTORE\tSHARD\tOWNER\tOFFSET\tHIGH WATER\tLAG CELLS\tLAG S")
	for _, p := range st.Peers {
		for _, s := range p.Streams {
			for _, sh := range s.Shards {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%.1f\n", p.Peer, s.Datastore, sh.Shard, orNone(sh.Owner), sh.Offset, sh.HighWater, sh.LagCells, sh.LagSeconds)
			}
		}
	}
	tw.Flush()
}
