package pod

import (
	"testing"

	"github.com/eaddr/eaddr/tracer"
)

// What naming a cgroup costs in user space (`make bench` runs these): a
// cache hit, a miss answered from a kernel record (the map lookup itself is
// tracer's BenchmarkLookupCgroup), and a miss answered by open_by_handle_at.
func BenchmarkCgroupPath(b *testing.B) {
	const long = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod03f3f104_3215_44f2_9686_d4dd1f05a7ed.slice/cri-containerd-09d185410c4e25236cc24717f881589bb0978b24eafd101624e627a4dd8d3439.scope"
	b.Run("hit", func(b *testing.B) {
		r, err := newCgroupResolver(b.TempDir(), &kernelRecords{paths: map[uint64]tracer.CgroupPath{7: record(long, 0)}}, 16)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		r.Path(7)
		b.ReportAllocs()
		for b.Loop() {
			r.Path(7)
		}
	})
	b.Run("record-to-path", func(b *testing.B) {
		rec := record(long, 0)
		b.ReportAllocs()
		for b.Loop() {
			CgroupPathString(&rec)
		}
	})
	b.Run("open-by-handle", func(b *testing.B) {
		mnt := requireCgroup2(b)
		_, leaf := makeCgroupTree(b, mnt)
		r, err := NewCgroupResolverAt(mnt, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		id := inodeOf(b, leaf)
		b.ReportAllocs()
		for b.Loop() {
			if p, why := r.fromHandle(id); p == "" {
				b.Fatal(why)
			}
		}
	})
}
