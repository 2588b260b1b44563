// Package workload turns the real flights CSV (US domestic flights, BTS on-time data) into trip
// cells of the Mezzanine model, ready to be written to a datastore.
//
// # Mapping
//
// A flight is a trip. Each data line of the flights file (date,delay,distance,origin,destination)
// becomes one BASE cell:
//
//	cell field  value
//	----------  ------------------------------------------------------------------------------
//	row_key     UUIDv5 (SHA-1) in Namespace (2aaee986-df22-5654-b0c2-32974ca4cd41) of the name
//	            "<line>|<date>|<delay>|<distance>|<origin>|<destination>", line being the 1-based
//	            line number in the file (the header is line 1, the first flight line 2).
//	            Re-importing a file gives the same keys; identical flights on two lines are two
//	            trips.
//	column_key  "BASE" (ColumnBase), written once
//	ref_key     1 (BaseRefKey)
//	body        a JSON object:
//	              date               string  scheduled departure as in the file, local time,
//	                                         "2001-01-01T00:01:00"
//	              origin             string  IATA code, "LAS"
//	              destination        string  IATA code, "PHL"
//	              distance           integer miles, 2176
//	              delay              integer arrival delay in minutes (negative = early), 33
//	              origin_city        string  from airports.csv by code, "Las Vegas"
//	              origin_state       string  from airports.csv by code, "NV"
//	              destination_city   string  from airports.csv by code, "Philadelphia"
//	              destination_state  string  from airports.csv by code, "PA"
//	            An unknown airport code, or NA in airports.csv, gives "" as city and state.
//
// The STATUS and FARE_ADJUSTMENT columns of the Mezzanine model are written later by triggers,
// not by this package.
//
// # Use
//
// NewReader reads a flights file (plain or gzipped CSV) one Flight at a time; LoadAirports reads
// airports.csv; Flight.BaseJSON (JSON text, what the HTTP client sends) and Flight.BaseCell (the
// stored form) build the BASE cell; Import reads, builds and hands batches of trips to a send
// function, sequentially. Bad input gives a *LineError naming the line and column.
//
// The package does no network I/O and imports only cells from the project.
package workload
