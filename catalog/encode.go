package catalog

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/cells"
)

// format is the version of Encode's layout; Decode refuses others.
const format = 1

type wireCatalog struct {
	Format     int             `msgpack:"f"`
	Generation uint64          `msgpack:"g"`
	Datastores []wireDatastore `msgpack:"d"`
	Voters     []string        `msgpack:"v,omitempty"`
	Peers      []wirePeer      `msgpack:"r,omitempty"`
}

type wirePeer struct {
	Name     string `msgpack:"n"`
	Settings []byte `msgpack:"x"`
}

type wireDatastore struct {
	Name       string          `msgpack:"n"`
	Mode       string          `msgpack:"m"`
	Shards     int             `msgpack:"s"`
	NextID     int             `msgpack:"i"`
	Created    uint64          `msgpack:"g"`
	CreatedAt  int64           `msgpack:"c"`
	Settings   []byte          `msgpack:"x"`
	Partitions []wirePartition `msgpack:"p"`
	History    []wireEvent     `msgpack:"h"`
}

type wirePartition struct {
	ID         int      `msgpack:"i"`
	First      int      `msgpack:"f"`
	Last       int      `msgpack:"l"`
	OriginF    int      `msgpack:"of"`
	OriginL    int      `msgpack:"ol"`
	Replicas   []string `msgpack:"r"`
	Learners   []string `msgpack:"n,omitempty"`
	Cluster    string   `msgpack:"c"`
	Generation uint64   `msgpack:"g"`
	Parent     int      `msgpack:"p"`
}

type wireEvent struct {
	Op         string `msgpack:"o"`
	Generation uint64 `msgpack:"g"`
	At         int64  `msgpack:"t"`
	Left       int    `msgpack:"l"`
	Right      int    `msgpack:"r"`
	AtShard    int    `msgpack:"s"`
	Auto       bool   `msgpack:"a,omitempty"`
}

// Encode returns c's bytes: MessagePack of its generation and its datastores in name order,
// times in microseconds. Equal catalogs have equal bytes (replicas compare them; snapshots and
// the node's cache store them).
func Encode(c *Catalog) ([]byte, error) {
	w := wireCatalog{Format: format, Generation: c.Generation, Datastores: []wireDatastore{}, Voters: c.Voters}
	for _, name := range c.PeerNames() {
		w.Peers = append(w.Peers, wirePeer{Name: name, Settings: c.Peers[name]})
	}
	for _, name := range c.Names() {
		d := c.Datastores[name]
		wd := wireDatastore{Name: d.Name, Mode: string(d.Mode), Shards: d.Shards, NextID: d.NextID, Created: d.Created,
			CreatedAt: d.CreatedAt.UnixMicro(), Settings: d.Settings, Partitions: []wirePartition{}, History: []wireEvent{}}
		for _, p := range d.Partitions {
			wd.Partitions = append(wd.Partitions, wirePartition{ID: p.ID, First: p.Shards.First, Last: p.Shards.Last, OriginF: p.Origin.First, OriginL: p.Origin.Last,
				Replicas: p.Replicas, Learners: p.Learners, Cluster: p.Cluster, Generation: p.Generation, Parent: p.Parent})
		}
		for _, e := range d.History {
			wd.History = append(wd.History, wireEvent{Op: string(e.Op), Generation: e.Generation, At: e.At.UnixMicro(),
				Left: e.Left, Right: e.Right, AtShard: e.AtShard, Auto: e.Auto})
		}
		w.Datastores = append(w.Datastores, wd)
	}
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("catalog: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode reads what Encode wrote. Bytes that are not a catalog, of another format, or a catalog
// that breaks an invariant (Check) return an error wrapping ErrCorrupt. Empty bytes are an empty
// catalog.
func Decode(b []byte) (*Catalog, error) {
	c := New()
	if len(b) == 0 {
		return c, nil
	}
	var w wireCatalog
	r := bytes.NewReader(b)
	if err := msgpack.NewDecoder(r).Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the catalog", ErrCorrupt, r.Len())
	}
	if w.Format != format {
		return nil, fmt.Errorf("%w: format %d, want %d", ErrCorrupt, w.Format, format)
	}
	c.Generation, c.Voters = w.Generation, w.Voters
	for _, p := range w.Peers {
		if _, dup := c.Peers[p.Name]; dup {
			return nil, fmt.Errorf("%w: peer %s appears twice", ErrCorrupt, p.Name)
		}
		if c.Peers == nil {
			c.Peers = map[string][]byte{}
		}
		c.Peers[p.Name] = p.Settings
	}
	for _, wd := range w.Datastores {
		if _, dup := c.Datastores[wd.Name]; dup {
			return nil, fmt.Errorf("%w: datastore %s appears twice", ErrCorrupt, wd.Name)
		}
		d := &Datastore{Name: wd.Name, Mode: Mode(wd.Mode), Shards: wd.Shards, NextID: wd.NextID, Created: wd.Created,
			CreatedAt: time.UnixMicro(wd.CreatedAt).UTC(), Settings: wd.Settings}
		if wd.Mode != string(ModeRaft) && wd.Mode != string(ModeAsync) {
			return nil, fmt.Errorf("%w: datastore %s: mode %q", ErrCorrupt, wd.Name, wd.Mode)
		}
		for _, wp := range wd.Partitions {
			d.Partitions = append(d.Partitions, Partition{ID: wp.ID, Shards: cells.ShardRange{First: wp.First, Last: wp.Last},
				Origin:   cells.ShardRange{First: wp.OriginF, Last: wp.OriginL},
				Replicas: wp.Replicas, Learners: wp.Learners, Cluster: wp.Cluster, Generation: wp.Generation, Parent: wp.Parent})
		}
		for _, we := range wd.History {
			d.History = append(d.History, Event{Op: Op(we.Op), Generation: we.Generation, At: time.UnixMicro(we.At).UTC(),
				Left: we.Left, Right: we.Right, AtShard: we.AtShard, Auto: we.Auto})
		}
		c.Datastores[wd.Name] = d
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}
