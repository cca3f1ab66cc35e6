// Loader acceptance test for porin's eBPF object with cilium/ebpf 0.9.1
// (Debian golang-github-cilium-ebpf-dev; GOPATH mode, no network).
//
// usage: go run load_cilium_ebpf.go OBJECT
//
// Loads the collection spec, checks both programs and every map, creates
// the collection (kernel verifier), fills the ipcache and policy map and
// decides two packets with BPF_PROG_TEST_RUN. Exits non-zero on failure.
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func packet(dport uint16) []byte {
	p := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00}
	ip := []byte{0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 10, 1, 0, 5, 10, 0, 0, 1}
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	tcp[12] = 0x50
	tcp[13] = 0x02
	return append(append(p, ip...), tcp...)
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: load_cilium_ebpf OBJECT")
	}
	spec, err := ebpf.LoadCollectionSpec(os.Args[1])
	if err != nil {
		fail("LoadCollectionSpec: %v", err)
	}
	for _, name := range []string{"porin_from_endpoint", "porin_to_endpoint"} {
		p, ok := spec.Programs[name]
		if !ok {
			fail("program %s missing", name)
		}
		if p.Type != ebpf.SchedCLS || p.SectionName != "classifier" || p.License != "GPL" {
			fail("program %s: type %v section %s license %s", name, p.Type, p.SectionName, p.License)
		}
		fmt.Printf("ok: program %s type %v section %s\n", name, p.Type, p.SectionName)
	}
	want := map[string][4]uint32{
		"porin_ipcache4": {uint32(ebpf.LPMTrie), 8, 8, 65536},
		"porin_ipcache6": {uint32(ebpf.LPMTrie), 20, 8, 65536},
		"porin_policy_a": {uint32(ebpf.LPMTrie), 12, 12, 16384},
		"porin_policy_b": {uint32(ebpf.LPMTrie), 12, 12, 16384},
		"porin_config":   {uint32(ebpf.Array), 4, 8, 1},
		"porin_ct":       {uint32(ebpf.LRUHash), 40, 16, 65536},
		"porin_verdicts": {uint32(ebpf.PerCPUArray), 4, 16, 32},
		"porin_events":   {uint32(ebpf.RingBuf), 0, 0, 262144},
		// The flat lookups: exact keys in hashes, read before the tries.
		"porin_ip4hash":   {uint32(ebpf.Hash), 8, 8, 65536},
		"porin_ip6hash":   {uint32(ebpf.Hash), 20, 8, 65536},
		"porin_polhash_a": {uint32(ebpf.Hash), 12, 12, 16384},
		"porin_polhash_b": {uint32(ebpf.Hash), 12, 12, 16384},
	}
	if len(spec.Maps) != len(want) {
		fail("%d maps, want %d", len(spec.Maps), len(want))
	}
	for name, w := range want {
		m, ok := spec.Maps[name]
		if !ok {
			fail("map %s missing", name)
		}
		got := [4]uint32{uint32(m.Type), m.KeySize, m.ValueSize, m.MaxEntries}
		if got != w {
			fail("map %s: %v, want %v", name, got, w)
		}
		fmt.Printf("ok: map %s %v flags %#x\n", name, got, m.Flags)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		fail("NewCollection: %v", err)
	}
	defer coll.Close()
	fmt.Println("ok: NewCollection (verifier passed)")

	ipKey := []byte{24, 0, 0, 0, 10, 0, 0, 0}
	ipVal := []byte{0xe8, 3, 0, 0, 0, 0, 0, 0}
	if err := coll.Maps["porin_ipcache4"].Put(ipKey, ipVal); err != nil {
		fail("ipcache put: %v", err)
	}
	// {64, identity 1000, egress, TCP, 80} -> allow (precedence 0xFFFFFF01, lpm 24).
	polKey := []byte{64, 0, 0, 0, 0xe8, 3, 0, 0, 1, 6, 0, 80}
	polVal := []byte{0, 0, 24 << 3, 0, 0x01, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	if err := coll.Maps["porin_policy_a"].Put(polKey, polVal); err != nil {
		fail("policy put: %v", err)
	}
	for _, c := range []struct {
		dport uint16
		ret   uint32
	}{{80, 0}, {81, 2}} {
		ret, _, err := coll.Programs["porin_from_endpoint"].Test(packet(c.dport))
		if err != nil {
			fail("Test: %v", err)
		}
		if ret != c.ret {
			fail("dport %d: returned %d, want %d", c.dport, ret, c.ret)
		}
		fmt.Printf("ok: dport %d -> %d\n", c.dport, ret)
	}
	fmt.Println("ok: cilium/ebpf checks passed")
}
