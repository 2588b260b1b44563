package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schemaless-db/schemaless/security"
	"github.com/spf13/cobra"
)

func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a CA, node and client certificates, tokens and a gossip key",
		Long: `Create what a secure cluster needs, with Go's crypto (no openssl): a certificate authority,
a certificate per node (mutual TLS between nodes, TLS on the API and the admin listener), client
certificates, bearer tokens (stored hashed in the principals file) and the gossip key. Keys and
tokens are written mode 0600; no file is overwritten. See docs/operations.md, Security.`,
	}
	var dir string
	cmd.PersistentFlags().StringVar(&dir, "certs-dir", "certs", "directory of the CA and the certificates")
	var caValid, leafValid time.Duration
	ca := &cobra.Command{
		Use:   "create-ca",
		Short: "Create the cluster's CA (ca.crt, ca.key) in --certs-dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := security.CreateAuthority(dir, "schemaless CA", caValid)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s and %s (valid until %s); keep the key off the nodes\n",
				filepath.Join(dir, security.CAFile), filepath.Join(dir, security.CAKey), a.Cert.NotAfter.Format(time.RFC3339))
			return nil
		},
	}
	ca.Flags().DurationVar(&caValid, "valid-for", 10*365*24*time.Hour, "validity of the CA")
	var hosts []string
	node := &cobra.Command{
		Use:   "create-node NODE_ID --host HOST [--host HOST]...",
		Short: "Create node NODE_ID's certificate (node.NODE_ID.crt, .key) signed by the CA",
		Long: `Create a node's certificate: it serves the API, the admin listener and the node port, and is the
certificate the node presents to its peers. --host lists every IP address and DNS name clients
and peers reach the node by (its raft_addr's and http_addr's hosts).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(hosts) == 0 {
				return errors.New("--host is required: the IP addresses and names the node is reached by")
			}
			a, err := security.LoadAuthority(dir)
			if err != nil {
				return err
			}
			is, err := a.IssueNode(args[0], hosts, leafValid)
			if err != nil {
				return err
			}
			return saveIssued(cmd.OutOrStdout(), is, dir, "node."+args[0])
		},
	}
	node.Flags().StringSliceVar(&hosts, "host", nil, "IP address or DNS name of the node (repeatable)")
	node.Flags().DurationVar(&leafValid, "valid-for", 365*24*time.Hour, "validity of the certificate")
	var roles, datastores []string
	var principals, tokenOut string
	clientCmd := &cobra.Command{
		Use:   "create-client NAME [--principals-file FILE --role ROLE]",
		Short: "Create a client certificate (client.NAME.crt, .key); with --principals-file, let it authenticate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := security.LoadAuthority(dir)
			if err != nil {
				return err
			}
			is, err := a.IssueClient(args[0], leafValid)
			if err != nil {
				return err
			}
			if principals != "" {
				if err := security.AddPrincipal(principals, security.PrincipalEntry{Name: args[0], Certificate: true, Roles: roles, Datastores: datastores}); err != nil {
					return err
				}
			}
			return saveIssued(cmd.OutOrStdout(), is, dir, "client."+args[0])
		},
	}
	clientCmd.Flags().DurationVar(&leafValid, "valid-for", 365*24*time.Hour, "validity of the certificate")
	token := &cobra.Command{
		Use:   "create-token NAME --principals-file FILE --role ROLE [--datastore DS]",
		Short: "Create a bearer token for principal NAME, store its SHA-256 in the principals file and print it once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if principals == "" {
				return errors.New("--principals-file is required")
			}
			tok, digest := security.NewToken()
			if err := security.AddPrincipal(principals, security.PrincipalEntry{Name: args[0], TokenSHA256: digest, Roles: roles, Datastores: datastores}); err != nil {
				return err
			}
			if tokenOut != "" {
				if err := os.WriteFile(tokenOut, []byte(tok+"\n"), 0o600); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "token of %s written to %s; nodes reload %s within --security-reload-interval\n", args[0], tokenOut, principals)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	for _, c := range []*cobra.Command{clientCmd, token} {
		c.Flags().StringVar(&principals, "principals-file", "", "principals file to add the principal to (created if missing)")
		c.Flags().StringSliceVar(&roles, "role", nil, "role of the principal: read, write, admin, metrics or replicator (repeatable)")
		c.Flags().StringSliceVar(&datastores, "datastore", nil, "limit read and write to these datastores (repeatable; default all)")
	}
	token.Flags().StringVar(&tokenOut, "token-out", "", "write the token to this file (mode 0600) instead of printing it")
	gossip := &cobra.Command{
		Use:   "create-gossip-key",
		Short: "Create the gossip keyring file (gossip.key) in --certs-dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			path := filepath.Join(dir, security.GossipKeyFile)
			if err := security.WriteGossipKeyFile(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s; give it to every node with --gossip-key-file\n", path)
			return nil
		},
	}
	cmd.AddCommand(ca, node, clientCmd, token, gossip)
	return cmd
}

// saveIssued writes a certificate and its key as dir/base.crt and dir/base.key.
func saveIssued(out io.Writer, is security.Issued, dir, base string) error {
	cert, key := filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := is.Save(cert, key); err != nil {
		return err
	}
	fmt.Fprintf(out, "created %s and %s\n", cert, key)
	return nil
}
