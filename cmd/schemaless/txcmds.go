package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

func newTransactCmd() *cobra.Command {
	var (
		f   clientFlags
		key string
	)
	cmd := &cobra.Command{
		Use:   "transact [FILE|-]",
		Short: "Run a partition transaction: conditions and writes on rows of one partition, all or nothing",
		Long: `Run a partition transaction (POST /v1/{ds}/transactions). FILE ('-' or absent: stdin)
holds the request:

  {"conditions": [{"row_key": "...", "column_key": "STATUS", "latest_ref_key": 3},
                  {"row_key": "...", "column_key": "LOCK", "latest_ref_key": null}],
   "writes":     [{"row_key": "...", "column_key": "STATUS", "ref_key": 4, "body": {...}}]}

Every row must be in one partition (make related rows with 'schemaless rowkeys --near').
The answer is printed; a failed condition or a conflict writes nothing and exits 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				raw []byte
				err error
			)
			if len(args) == 1 && args[0] != "-" {
				raw, err = os.ReadFile(args[0])
			} else {
				raw, err = io.ReadAll(os.Stdin)
			}
			if err != nil {
				return err
			}
			var req wire.TransactionRequest
			if err := json.Unmarshal(raw, &req); err != nil {
				return fmt.Errorf("transaction request: %w", err)
			}
			conds, writes, err := client.TransactionFromWire(req)
			if err != nil {
				return err
			}
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			var opts []client.WriteOption
			if key != "" {
				opts = append(opts, client.IdempotencyKey(key))
			}
			res, err := cl.Transact(cmd.Context(), conds, writes, opts...)
			var pe *client.PreconditionError
			var ae *client.APIError
			switch {
			case errors.As(err, &pe):
				return fmt.Errorf("precondition failed, nothing written: %s", pe.Conditions())
			case errors.As(err, &ae) && len(ae.Conflicts) > 0:
				return fmt.Errorf("conflict, nothing written: writes %v hold another body", ae.Conflicts)
			case err != nil:
				return err
			}
			return printJSON(res)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&key, "idempotency-key", "", "name the transaction: a repeat within 10 minutes answers the first outcome")
	return cmd
}

func newRowKeysCmd() *cobra.Command {
	var (
		f    clientFlags
		near string
		n    int
	)
	cmd := &cobra.Command{
		Use:   "rowkeys --near ROW_KEY [-n N]",
		Short: "Print new random row keys in the shard (and so the partition) of a row, for rows one transaction writes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rk, err := uuid.Parse(near)
			if err != nil {
				return fmt.Errorf("--near %q: %w", near, err)
			}
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			keys, err := cl.RowKeysNear(cmd.Context(), rk, n)
			if err != nil {
				return err
			}
			for _, k := range keys {
				fmt.Println(k)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&near, "near", "", "the row whose shard the new keys share (required)")
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many row keys (1 to 100)")
	_ = cmd.MarkFlagRequired("near")
	return cmd
}
