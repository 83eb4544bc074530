module github.com/eaddr/eaddr

go 1.26.8

tool github.com/cilium/ebpf/cmd/bpf2go

require (
	github.com/cilium/ebpf v0.22.0
	golang.org/x/sys v0.50.0
)

require github.com/spf13/pflag v1.1.0 // indirect
