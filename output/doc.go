// Package output renders every record eaddr writes, one file per record:
// the event with its explanation and diagnosis, the diagnosis object, the
// summary, the check report and explain's result, as JSON (one
// allocation-free writer, AppendString) or as text for a person. It knows
// nothing of where the records go.
package output
