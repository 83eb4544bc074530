package tracer

// The one place the BPF objects are built. clang-19 is pinned so that `make generate`
// reproduces the committed objects byte for byte; CI checks it with git diff --exit-code.
//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type event -type cgroup_path -type cgroup_flag -type syscall_id -type event_flag -type errno_id -type lost_slot -type limit_key -type limit_state -type limit_cpu -type cgroup_limit_key -type proc_key -type proc_facts eaddr ../bpf/eaddr.bpf.c -- -I../bpf
//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type sock_rec -type sockiter_source -type sockiter_flag sockiter ../bpf/sockiter.bpf.c -- -I../bpf
//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type nodewalk_member -type nodewalk_netns -type nodewalk_reserved -type nodewalk_kind -type nodewalk_flag nodewalk ../bpf/nodewalk.bpf.c -- -I../bpf
//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type node_drop -type drop_cpu -type node_drop_flag nodedrop ../bpf/nodedrop.bpf.c -- -I../bpf
