package top

import "time"

// MaxShare bounds the time top spends sampling: after a sample that took
// longer than 1/MaxShare of the interval, the wait before the next is
// MaxShare times that sample's time. One sample audits every netns in
// turn on one goroutine, and a dump of one netns walks the node's TCP
// tables (docs/performance.md): on a node of 100 netns × 500 sockets a
// sample took about 6 s with the socket iterators (3 s with sock_diag),
// and at the 2 s default top sampled without pause, 79% of a core; paced,
// 11%. eaddr trace's port sampler follows the same rule with a share of
// 100 (pipeline's nextWait): it runs all day, top while someone watches.
const MaxShare = 10

// Pace is the wait after a sample that took took: interval, or MaxShare
// times took when that is longer. took is wall time, so at least the CPU
// time of the sampling goroutine: on a loaded node it stretches early.
func Pace(interval, took time.Duration) time.Duration {
	return max(interval, MaxShare*took)
}
