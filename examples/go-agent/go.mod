module example.invalid/porin/go-agent

go 1.19

require github.com/cilium/ebpf v0.9.1

require golang.org/x/sys v0.0.0-20210906170528-6f6e22806c34 // indirect

// Debian's golang-github-cilium-ebpf-dev (0.9.1) and golang.org/x/sys,
// no network: build with GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off.
replace github.com/cilium/ebpf => /usr/share/gocode/src/github.com/cilium/ebpf

replace golang.org/x/sys => /usr/share/gocode/src/golang.org/x/sys
