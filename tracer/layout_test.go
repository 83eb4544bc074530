package tracer

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// The Go types bpf2go generated match the committed object's BTF, field by
// field: a stale binding (bpf/eaddr.h changed, make generate not run) fails
// here instead of decoding garbage.
func TestLayoutMatchesBTF(t *testing.T) {
	spec, err := loadEaddr()
	if err != nil {
		t.Fatal(err)
	}
	for name, goType := range map[string]reflect.Type{
		"event":       reflect.TypeOf(RawEvent{}),
		"cgroup_path": reflect.TypeOf(CgroupPath{}),
	} {
		var st *btf.Struct
		if err := spec.Types.TypeByName(name, &st); err != nil {
			t.Fatalf("struct %s in the object's BTF: %v", name, err)
		}
		if uintptr(st.Size) != goType.Size() {
			t.Errorf("struct %s: %d bytes in BTF, %d in Go", name, st.Size, goType.Size())
		}
		goFields := map[string]reflect.StructField{}
		for i := range goType.NumField() {
			f := goType.Field(i)
			goFields[strings.ToLower(f.Name)] = f
		}
		for _, m := range st.Members {
			f, ok := goFields[strings.ReplaceAll(m.Name, "_", "")]
			if !ok {
				t.Errorf("struct %s: member %s has no Go field", name, m.Name)
				continue
			}
			if uintptr(m.Offset.Bytes()) != f.Offset {
				t.Errorf("struct %s: %s at %d in BTF, %d in Go", name, m.Name, m.Offset.Bytes(), f.Offset)
			}
		}
	}
}
