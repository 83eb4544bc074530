// Package ports is eaddr's one port sampler: the port budget of every
// network namespace of the node, for trace's metrics and warnings, top and
// check alike.
//
// A sample reads every TCP socket of every netns once (tracer.NodeWalk: the
// node's TCP hash tables walked once, split by netns as they are read, and
// each netns's settings read from its struct net), counts each netns into a
// portmodel.Tally as its sockets come (ports held for all, per destination
// and source the ports by verdict: memory by ports and destinations, not by
// sockets), and makes each netns's report from its tally
// (diagnose.AuditTally): the same model and the same numbers as a failure's
// diagnosis. The port model's full look at the sockets (who holds them, the
// fix) runs only where the counts can matter: for the destinations at the
// warning mark or above (Config.Culprits), and for check's findings.
//
// A netns the walk cannot read (its TCP sockets in hash tables of its own,
// net.ipv4.tcp_child_ehash_entries; mounted with no process in it; or no
// walk at all: a kernel without the iterators, or no BPF) is read on its
// own, as before the walk: a dump of its sockets, counted into a tally the
// same way (diagnose.AuditNetNS). docs/performance.md, "Port sampler",
// compares the two.
//
// Files: sampler.go (Config, Sample, the Sampler), walk.go (the node walk's
// records into tallies), pace.go (the one pacing rule and the sampling
// loop).
package ports
