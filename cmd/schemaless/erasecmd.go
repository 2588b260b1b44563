package main

import (
	"encoding/json"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/spf13/cobra"
)

// newEraseCmd is `schemaless erase ROW_KEY`: DELETE /v1/{ds}/cells/{row_key} through the client,
// printing the answer ({"row_key", "erased", "added_id"}) as JSON.
func newEraseCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "erase ROW_KEY",
		Short: "Erase every cell of a row on every replica (idempotent; backups taken before keep the row)",
		Long: "Erase every cell of a row: the cells are deleted from the datastore's tables on every replica, a\n" +
			"tombstone takes their place in the row's shard log (trigger consumers see it), and the index\n" +
			"maintainers delete the row's index entries. Prints {\"row_key\", \"erased\": N cells, \"added_id\": the\n" +
			"tombstone's}; erasing again prints \"erased\": 0. A later write of the row creates new cells. Backups\n" +
			"taken before the erasure still hold the row, and restoring one brings it back.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rk, err := cells.ParseRowKey(args[0])
			if err != nil {
				return err
			}
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.EraseRow(cmd.Context(), rk)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	f.register(cmd)
	return cmd
}
