// Package output renders every record eaddr writes, one file per record:
// the event with its explanation and diagnosis, the diagnosis object, the
// summary, the check report and explain's result, as JSON (one
// allocation-free writer, AppendString) or as text for a person; and the
// Sink, which writes them, whole lines only, to stdout without ever making
// the reader wait (sink.go).
package output
