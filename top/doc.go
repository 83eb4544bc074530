// Package top is the model and view of `eaddr top`, a live view of a
// node's network namespaces and their ports, like top(1).
//
// Each interval a Sampler audits every netns with diagnose's port model
// (the one `eaddr check` and the diagnosis of a failure use) and reads the
// failures the tracer counted per netns. A Model keeps, per netns, the
// ports taken toward its busiest destination over the last samples, and
// turns them into Rows: used/usable, the trend in ports per minute, the
// time to exhaustion, failures per second. What it does not know it says
// with a reason: no trend from a single sample, no time to exhaustion
// unless the trend rises, the error of a netns that could not be audited,
// why failures are not counted.
//
// Rows sort by time to exhaustion, usage, trend, failures or name; they
// render as a table (plain, once per interval, or redrawn in a terminal
// by Interactive) or as JSON.
package top
