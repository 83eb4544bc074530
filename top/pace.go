package top

import "time"

// MaxShare bounds the time top spends sampling: after a sample that took
// longer than 1/MaxShare of the interval, the wait before the next is
// MaxShare times that sample's time. One sample audits every netns in
// turn on one goroutine, and a dump of one netns walks the node's TCP
// tables (docs/performance.md): on a node of 100 netns × 500 sockets a
// sample takes about 3 s, and at the 2 s default top would sample without
// pause, a core for as long as it runs. Paced, it stays near a tenth of one.
const MaxShare = 10

// Pace is the wait after a sample that took took: interval, or MaxShare
// times took when that is longer. took is wall time, so at least the CPU
// time of the sampling goroutine: on a loaded node it stretches early.
func Pace(interval, took time.Duration) time.Duration {
	return max(interval, MaxShare*took)
}
