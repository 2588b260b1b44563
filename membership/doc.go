// Package membership tells each node which nodes exist, whether they are alive, and which
// partition replicas they host, by gossip (hashicorp/memberlist, SWIM).
//
// Nodes join through a seed list (Config.Seeds) and announce a Meta (ID and addresses). The
// cluster uses the result as a hint for routing and status only: skip a dead node, find a
// partition's leader (Hosting). Raft membership never changes on a gossip event: a node reported
// dead or left stays a raft voter, since voter changes go through raft, never through this
// package.
//
// # What travels where
//
// Meta travels in memberlist's node meta (JSON, at most 512 bytes), so every node sees it with
// the node's liveness. Replicas can be larger, so each node's replica state travels separately:
// in memberlist's push/pull (every PushPullInterval with one random node, and on join; each
// node sends every state it holds, its own refreshed through Config.Replicas) and, on Refresh,
// as a UDP broadcast that receivers re-broadcast (or by TCP to every alive member when the
// state does not fit a packet). Each state carries a version (the process's start time, then a
// counter bumped on every change), and a node keeps a state only if it is newer than the one it
// holds, so an old state never replaces a newer one, whatever path it took. States arriving
// before their node is known are kept until it joins. Messages go uncompressed (memberlist
// compresses by default); a node reads compressed ones too.
//
// # States
//
// A member is StateAlive from memberlist's join until memberlist declares it failed; then it is
// StateDead, or StateLeft when its last state carries the leave flag that Leave sends before
// memberlist's own leave message (memberlist's events do not say which). Members keeps dead and
// left nodes with their last replicas; Hosting and Alive count only alive ones. A node that
// restarts with the same ID is alive again with its new Meta as soon as memberlist accepts it:
// at once on the same address, and on another address once the old one is declared dead or left
// (memberlist refuses to move a live name; DeadNodeReclaimTime, zero by default, adds a delay).
//
// # Suspicion
//
// memberlist v0.5.4 keeps its suspect state private: the Node values of Memberlist.Members carry
// no state (Node.State is never set; the internal nodeState.State shadows it), and its events
// fire only on join, meta update and dead/left. This package therefore reports a suspected node
// as alive until the suspicion times out, and never reports StateSuspect. With the defaults, a
// crashed node is declared dead after it is next probed (within (nodes-1) * ProbeInterval) plus
// the suspicion timeout, SuspicionMult * max(1, log10(nodes)) * ProbeInterval = 2s, which may
// stretch up to SuspicionMaxTimeoutMult times when fewer than SuspicionMult-2 other nodes confirm
// it: about 3s in a cluster of three.
//
// # Caveats
//
//   - Versions of a node's state order by its process start time: a node restarted with its
//     clock set back will have its new replicas ignored until it outlives the old counter.
//   - memberlist never contacts a node it declared dead; after a partition heals, the join loop
//     (Config.ReconnectInterval) rejoins through the dead members' addresses.
//   - OnChange calls are coalesced and come from one goroutine; they do not say what changed.
package membership
