package examples

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/workload"
)

// DemoConfig configures StartDemo: the example apps on the trips datastore of a running
// cluster, as `schemaless dev` runs them.
type DemoConfig struct {
	// Client reaches the cluster, datastore trips. On a secure cluster it sends an admin token:
	// defining the index and registering the schema are admin changes.
	Client *client.Client
	// Out gets every line for the user.
	Out io.Writer
	// Triggers runs the trigger groups (StartGroups) until Stop; Logger gets their logs, which
	// it writes to LogPath (named in the messages).
	Triggers bool
	Logger   *slog.Logger
	LogPath  string
	// Index defines the example index (DefineIndex); Schema registers the BASE cells' schema
	// (RegisterSchema).
	Index, Schema bool
}

// Demo is the example apps started on a cluster by StartDemo.
type Demo struct {
	cfg    DemoConfig
	groups *Groups // nil without DemoConfig.Triggers
}

// StartDemo starts the trigger groups, defines the index and registers the schema, as cfg
// says and in that order (the groups handle the cells of an import as they land, the index is
// built as they land, the schema checks them), printing a line for each to cfg.Out. It fails
// when the index or the schema cannot be written; the groups it started are stopped then.
func StartDemo(ctx context.Context, cfg DemoConfig) (*Demo, error) {
	d := &Demo{cfg: cfg}
	if cfg.Triggers {
		d.groups = StartGroups(ctx, GroupsConfig{Client: cfg.Client, Logger: cfg.Logger, LogPath: cfg.LogPath, Out: cfg.Out})
	}
	if cfg.Index {
		if err := DefineIndex(ctx, cfg.Client, cfg.Out); err != nil {
			d.Stop()
			return nil, err
		}
	}
	if cfg.Schema {
		if err := RegisterSchema(ctx, cfg.Client, cfg.Out); err != nil {
			d.Stop()
			return nil, err
		}
	}
	return d, nil
}

// Stop stops the trigger groups, if any (each worker commits and leaves its group; Groups.Stop).
func (d *Demo) Stop() {
	if d.groups != nil {
		d.groups.Stop()
	}
}

// Import imports the first limit flights of path (0: all; airports from airportsPath) and
// checks every app on them, printing to the config's Out:
//
//  1. importFn runs the import (ImportFlights, say, with a progress bar) and returns its
//     figures (ImportStats.Print); a failure is returned ("import: ...").
//  2. The flights are read back, strong then stale (ReadBack); a failed strong read-back is
//     returned.
//  3. The groups' catch-up and output cells (Groups.Report), the index's catch-up and the
//     example queries (ReportIndex), and the Docstore flow on the first flight (Book,
//     RaceStatus). A failed check here is a line ("triggers: ...", "index: ...",
//     "docstore: ...") and not an error, so that the cluster keeps serving and can be
//     inspected.
//
// It returns ctx's error when ctx ends.
func (d *Demo) Import(ctx context.Context, path, airportsPath string, limit int, importFn func(context.Context) (ImportStats, error)) error {
	cl, out := d.cfg.Client, d.cfg.Out
	st, err := importFn(ctx)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	var (
		watch   *IndexWatch
		flights []workload.Flight
		readErr error
	)
	if d.cfg.Index {
		flights, readErr = ReadFlights(path, airportsPath, limit)
		watch = WatchIndex(ctx, cl, int64(len(flights)))
	}
	if d.groups != nil {
		d.groups.Imported(ctx)
	}
	st.Print(out, "")
	if err := ReadBack(ctx, cl, path, airportsPath, limit, 0, out, ""); err != nil {
		return err
	}
	report := func(what string, err error) error {
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		fmt.Fprintf(out, "%s: %v\n", what, err)
		return nil
	}
	if d.groups != nil {
		if err := report("triggers", d.groups.Report(ctx, path, airportsPath, limit)); err != nil {
			return err
		}
	}
	if d.cfg.Index {
		err := readErr
		if err == nil {
			err = ReportIndex(ctx, cl, flights, watch, out)
		}
		if err := report("index", err); err != nil {
			return err
		}
	}
	return report("docstore", d.docstore(ctx, path, airportsPath))
}

// docstore runs the Docstore-style flow on the first flight of path: a seat and a payment
// booked with its trip in one transaction, then two writers racing to advance its status with
// conditional writes (Book, RaceStatus).
func (d *Demo) docstore(ctx context.Context, path, airportsPath string) error {
	flights, err := ReadFlights(path, airportsPath, 1)
	if err != nil || len(flights) == 0 {
		return err
	}
	trip := flights[0].RowKey()
	if err := Book(ctx, d.cfg.Client, trip, d.cfg.Out); err != nil {
		return err
	}
	return RaceStatus(ctx, d.cfg.Client, trip, d.cfg.Out)
}
