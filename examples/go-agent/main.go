// Command go-agent is the Go twin of examples/c-agent: it compiles a policy
// with porin (cgo, libporin.a), loads porin's eBPF object with cilium/ebpf,
// fills the maps through the A/B replacement of DATAPATH.md §2.3, decides
// flows with BPF_PROG_TEST_RUN, compares every verdict with porin's
// reference evaluator, then applies a changed policy to the live map as a
// hole-free difference (rolled back if a write fails part-way) and decides
// again.
//
// Each policy slot is two maps (DATAPATH.md §2.2): exact keys (prefix length
// 64) go into its hash (porin_polhash_a/_b), read first by the programs, the
// others into its LPM trie (porin_policy_a/_b); /32 ipcache entries go into
// porin_ip4hash, shorter prefixes into porin_ipcache4. porin_config's
// prefix_free bits stay 0 (the tries are always consulted).
//
//	go-agent INVENTORY POLICY_V1 POLICY_V2 FLOWS
//
// Build (see README): CGO_CFLAGS=-I<repo>/include
// CGO_LDFLAGS="<repo>/target/debug/libporin.a -lgcc_s -lutil -lrt -lpthread -lm -ldl"
// GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off go build .
package main

/*
#include <stdlib.h>
#include "porin.h"
*/
import "C"

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
)

// porinError turns a porin_result into a Go error with porin's message.
func porinError(what string, r C.porin_result) error {
	if r == C.PORIN_RESULT_OK {
		return nil
	}
	buf := make([]byte, C.PORIN_RESULT_MESSAGE_MAX)
	var n C.size_t
	C.porin_result_message(C.uint32_t(r), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
	return fmt.Errorf("%s: %s (porin_result %d)", what, string(buf[:n]), int(r))
}

// cstr passes a Go string as (pointer, length); free the pointer.
func cstr(s string) (*C.char, C.size_t) { return C.CString(s), C.size_t(len(s)) }

func gostr(s C.porin_str) string { return C.GoStringN(s.ptr, C.int(s.len)) }

// entries copies packed porin_map_entries into Go slices of keys/values.
func entries(e C.porin_map_entries) (keys, values [][]byte) {
	all := C.GoBytes(unsafe.Pointer(e.keys), C.int(e.count*e.key_size))
	vals := C.GoBytes(unsafe.Pointer(e.values), C.int(e.count*e.value_size))
	for i := 0; i < int(e.count); i++ {
		ks, vs := int(e.key_size), int(e.value_size)
		keys = append(keys, all[i*ks:(i+1)*ks])
		values = append(values, vals[i*vs:(i+1)*vs])
	}
	return keys, values
}

type flow struct {
	src, dst, protoName string
	proto               uint8
	port                uint16
}

// slot is one policy slot: its LPM trie and its exact-key hash.
type slot struct {
	trie, hash *ebpf.Map
}

// The prefix length (a key's first u32, little-endian) of an exact policy
// key (DATAPATH.md §2.2) and of a host ipcache entry (§2.1).
const (
	policyExactPrefix  = 64
	ipcache4HostPrefix = 32
)

func prefixOf(key []byte) uint32 { return binary.LittleEndian.Uint32(key) }

// mapFor is the map of the slot that holds key.
func (s slot) mapFor(key []byte) *ebpf.Map {
	if prefixOf(key) == policyExactPrefix {
		return s.hash
	}
	return s.trie
}

type datapath struct {
	coll                 *ebpf.Collection
	from, to             *ebpf.Program
	policy               [2]slot
	config, ip4, ip4host *ebpf.Map
	active               uint32
}

func compile(session *C.porin_session, policy string) (*C.porin_compilation, error) {
	if err := porinError("clear policies", C.porin_session_clear_policies(session)); err != nil {
		return nil, err
	}
	p, n := cstr(policy)
	defer C.free(unsafe.Pointer(p))
	if err := porinError(policy, C.porin_session_add_policy_path(session, p, n)); err != nil {
		return nil, err
	}
	var out *C.porin_compilation
	var diags *C.porin_diagnostics
	r := C.porin_session_compile(session, &out, &diags)
	if C.porin_diagnostics_count(diags) > 0 {
		var text C.porin_str
		if C.porin_diagnostics_render(diags, &text) == C.PORIN_RESULT_OK {
			fmt.Fprint(os.Stderr, gostr(text))
		}
	}
	C.porin_diagnostics_free(diags)
	return out, porinError("compile", r)
}

func openDatapath(c *C.porin_compilation) (*datapath, error) {
	var data *C.uint8_t
	var size C.size_t
	if err := porinError("object", C.porin_compilation_object(c, &data, &size)); err != nil {
		return nil, err
	}
	object := C.GoBytes(unsafe.Pointer(data), C.int(size))
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(object))
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("loading the porin object (root needed): %w", err)
	}
	dp := &datapath{coll: coll, from: coll.Programs["porin_from_endpoint"],
		to: coll.Programs["porin_to_endpoint"], config: coll.Maps["porin_config"],
		ip4: coll.Maps["porin_ipcache4"], ip4host: coll.Maps["porin_ip4hash"]}
	dp.policy[0] = slot{trie: coll.Maps["porin_policy_a"], hash: coll.Maps["porin_polhash_a"]}
	dp.policy[1] = slot{trie: coll.Maps["porin_policy_b"], hash: coll.Maps["porin_polhash_b"]}
	if dp.from == nil || dp.to == nil || dp.config == nil || dp.ip4 == nil || dp.ip4host == nil ||
		dp.policy[0].trie == nil || dp.policy[1].trie == nil ||
		dp.policy[0].hash == nil || dp.policy[1].hash == nil {
		return nil, fmt.Errorf("object lacks a program or map of DATAPATH.md")
	}
	var ip C.porin_map_entries
	if err := porinError("ipcache", C.porin_compilation_ipcache_entries(c, 4, &ip)); err != nil {
		return nil, err
	}
	keys, values := entries(ip)
	for i := range keys {
		m := dp.ip4
		if prefixOf(keys[i]) == ipcache4HostPrefix {
			m = dp.ip4host
		}
		if err := m.Put(keys[i], values[i]); err != nil {
			return nil, err
		}
	}
	return dp, nil
}

func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	var key, value []byte
	it := m.Iterate()
	for it.Next(&key, &value) {
		keys = append(keys, append([]byte(nil), key...))
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil {
			return err
		}
	}
	return it.Err()
}

// replacePolicy: DATAPATH.md §2.3, fill the inactive map, flip porin_config.
func (dp *datapath) replacePolicy(c *C.porin_compilation, endpoint string) error {
	name, n := cstr(endpoint)
	defer C.free(unsafe.Pointer(name))
	var e C.porin_map_entries
	if err := porinError(endpoint, C.porin_compilation_policy_entries(c, name, n, &e)); err != nil {
		return err
	}
	next := dp.active ^ 1
	if err := clearMap(dp.policy[next].trie); err != nil {
		return err
	}
	if err := clearMap(dp.policy[next].hash); err != nil {
		return err
	}
	keys, values := entries(e)
	for i := range keys {
		if err := dp.policy[next].mapFor(keys[i]).Put(keys[i], values[i]); err != nil {
			return err
		}
	}
	config := make([]byte, 8)
	binary.LittleEndian.PutUint32(config, next)
	if err := dp.config.Put(uint32(0), config); err != nil {
		return err
	}
	dp.active = next
	return nil
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// packet builds the first packet of a flow: Ethernet + IPv4 + TCP/UDP/ICMP.
func packet(f flow, sport uint16) []byte {
	l4 := 8
	if f.proto == 6 {
		l4 = 20
	}
	p := make([]byte, 14+20+l4)
	copy(p, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0})
	ip, t := p[14:34], p[34:]
	ip[0], ip[8], ip[9] = 0x45, 64, f.proto
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4))
	copy(ip[12:], net.ParseIP(f.src).To4())
	copy(ip[16:], net.ParseIP(f.dst).To4())
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	if f.proto == 1 {
		t[0] = uint8(f.port)
		binary.BigEndian.PutUint16(t[4:], sport)
		t[7] = 1
		binary.BigEndian.PutUint16(t[2:], checksum(t))
	} else {
		binary.BigEndian.PutUint16(t[0:], sport)
		binary.BigEndian.PutUint16(t[2:], f.port)
		if f.proto == 6 {
			t[12], t[13] = 5<<4, 0x02
		} else {
			t[5] = 8
		}
	}
	return p
}

// run returns 0 drop, 1 pass, 2 redirect (skb->mark, offset 8 of __sk_buff).
func run(prog *ebpf.Program, f flow, sport uint16) (int, error) {
	ctx, ctxOut := make([]byte, 192), make([]byte, 192)
	ret, err := prog.Run(&ebpf.RunOptions{Data: packet(f, sport), Context: ctx, ContextOut: ctxOut})
	if err != nil {
		return 0, err
	}
	if ret != 0 {
		return 0, nil
	}
	if binary.LittleEndian.Uint32(ctxOut[8:])&0xffff == 0x0200 {
		return 2, nil
	}
	return 1, nil
}

func endpointOf(c *C.porin_compilation, addr string) (string, bool) {
	a, n := cstr(addr)
	defer C.free(unsafe.Pointer(a))
	var name C.porin_str
	if C.porin_compilation_endpoint_by_address(c, a, n, &name) != C.PORIN_RESULT_OK {
		return "", false
	}
	return gostr(name), true
}

func (dp *datapath) kernelVerdict(c *C.porin_compilation, f flow, sport uint16) (string, error) {
	redirect := false
	for side, addr := range []string{f.src, f.dst} {
		endpoint, ok := endpointOf(c, addr)
		if !ok {
			continue
		}
		if err := dp.replacePolicy(c, endpoint); err != nil {
			return "", err
		}
		prog := dp.from
		if side == 1 {
			prog = dp.to
		}
		result, err := run(prog, f, sport)
		if err != nil {
			return "", err
		}
		if result == 0 {
			return "deny", nil
		}
		redirect = redirect || result == 2
	}
	if redirect {
		return "redirect", nil
	}
	return "allow", nil
}

func referenceVerdict(c *C.porin_compilation, f flow) (string, error) {
	src, sn := cstr(f.src)
	dst, dn := cstr(f.dst)
	defer C.free(unsafe.Pointer(src))
	defer C.free(unsafe.Pointer(dst))
	var d *C.porin_decision
	r := C.porin_compilation_decide(c, src, sn, dst, dn, C.uint8_t(f.proto), C.uint16_t(f.port), &d)
	if err := porinError("decide", r); err != nil {
		return "", err
	}
	defer C.porin_decision_free(d)
	switch C.porin_decision_verdict(d) {
	case C.PORIN_VERDICT_ALLOW:
		return "allow", nil
	case C.PORIN_VERDICT_REDIRECT:
		return "redirect", nil
	default:
		return "deny", nil
	}
}

// errRolledBack marks a difference that failed part-way and was undone:
// the live map holds v1 again (checked), so v1 stays in force.
var errRolledBack = errors.New("difference rolled back")

// failAtWrite is the test hook PORIN_AGENT_FAIL_AT_WRITE=K: write K
// (0-based) of every difference fails as if the kernel had refused it, to
// exercise the rollback (as in examples/c-agent). -1: never.
var failAtWrite = -1

// liveEntries reads the stored keys of a policy slot (both maps) with their
// values. The undo log must come from here, not from lookups: a lookup of an
// absent key in an LPM trie returns the value of a shorter covering key,
// which a rollback would then write as if it had been there (DATAPATH.md
// §2.3).
func liveEntries(s slot) (map[string][]byte, error) {
	got := map[string][]byte{}
	for _, m := range []*ebpf.Map{s.trie, s.hash} {
		var key, value []byte
		it := m.Iterate()
		for it.Next(&key, &value) {
			got[string(key)] = append([]byte(nil), value...)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// sameEntries reports whether the live map holds exactly the entries of c
// for endpoint.
func sameEntries(live slot, c *C.porin_compilation, endpoint string) error {
	name, n := cstr(endpoint)
	defer C.free(unsafe.Pointer(name))
	var want C.porin_map_entries
	if err := porinError("entries", C.porin_compilation_policy_entries(c, name, n, &want)); err != nil {
		return err
	}
	keys, values := entries(want)
	got, err := liveEntries(live)
	if err != nil {
		return err
	}
	if len(got) != len(keys) {
		return fmt.Errorf("live map has %d entries, expected %d", len(got), len(keys))
	}
	for i := range keys {
		if !bytes.Equal(got[string(keys[i])], values[i]) {
			return fmt.Errorf("live map differs from the expected entries")
		}
	}
	return nil
}

// applyDiff installs v1 for endpoint, then applies the v1 -> v2 difference
// to the live map write by write. When write K fails, writes K-1..0 are
// undone newest first from an undo log, which cannot run out of map space:
// each undo reverses a write the kernel accepted, on the map exactly as
// that write left it. The live map is then checked to equal v1 and
// errRolledBack is returned; a failing undo is a plain error (the map holds
// a mix of v1 and v2 and must be replaced whole).
func (dp *datapath) applyDiff(v1, v2 *C.porin_compilation, endpoint string) error {
	if err := dp.replacePolicy(v1, endpoint); err != nil {
		return err
	}
	live := dp.policy[dp.active]
	mapName := "porin_policy_a"
	if dp.active == 1 {
		mapName = "porin_policy_b"
	}
	name, n := cstr(endpoint)
	defer C.free(unsafe.Pointer(name))
	var diff *C.porin_diff
	if err := porinError("diff", C.porin_compilation_policy_diff(v1, v2, name, n, &diff)); err != nil {
		return err
	}
	defer C.porin_diff_free(diff)
	before, err := liveEntries(live)
	if err != nil {
		return err
	}
	type undo struct {
		key   []byte
		value []byte // nil: the key was absent, undo deletes it
	}
	var log []undo
	write := func(key, value []byte) error {
		if value == nil {
			return live.mapFor(key).Delete(key)
		}
		return live.mapFor(key).Put(key, value)
	}
	count := int(C.porin_diff_count(diff))
	for i := 0; i < count; i++ {
		var ch C.porin_change
		if err := porinError("diff get", C.porin_diff_get(diff, C.size_t(i), &ch)); err != nil {
			return err
		}
		key := C.GoBytes(unsafe.Pointer(ch.key), C.int(ch.key_size))
		var value []byte
		if ch.kind != C.PORIN_CHANGE_KIND_DELETE {
			value = C.GoBytes(unsafe.Pointer(ch.value), C.int(ch.value_size))
		}
		previous := before[string(key)]
		var werr error
		if i == failAtWrite {
			werr = fmt.Errorf("injected failure (PORIN_AGENT_FAIL_AT_WRITE=%d)", i)
		} else {
			werr = write(key, value)
		}
		if werr != nil {
			for j := len(log) - 1; j >= 0; j-- {
				if err := write(log[j].key, log[j].value); err != nil {
					return fmt.Errorf("write %d of %d of the difference for %s to the live map %s failed "+
						"(%v), and undoing write %d failed too (%v): the map holds a mix, replace it whole",
						i, count, endpoint, mapName, werr, j, err)
				}
			}
			fmt.Fprintf(os.Stderr, "go-agent: write %d of %d of the difference for %s to the live map %s "+
				"failed (%v); the %d write(s) before it were rolled back\n", i, count, endpoint, mapName, werr, i)
			if err := sameEntries(live, v1, endpoint); err != nil {
				return fmt.Errorf("after the rollback: %w", err)
			}
			fmt.Printf("rollback %s: live map equals v1\n", endpoint)
			return errRolledBack
		}
		log = append(log, undo{key: key, value: previous})
		if value == nil {
			delete(before, string(key))
		} else {
			before[string(key)] = value
		}
	}
	fmt.Printf("diff %s: %d writes applied to the live map\n", endpoint, count)
	if err := sameEntries(live, v2, endpoint); err != nil {
		return fmt.Errorf("after the difference: %w", err)
	}
	return nil
}

func readFlows(path string) ([]flow, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var flows []flow
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 4 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		port, err := strconv.ParseUint(fields[3], 10, 16)
		if err != nil {
			return nil, err
		}
		proto := map[string]uint8{"tcp": 6, "udp": 17, "icmp": 1}[fields[2]]
		flows = append(flows, flow{fields[0], fields[1], fields[2], proto, uint16(port)})
	}
	return flows, scanner.Err()
}

func mainErr() (int, error) {
	if len(os.Args) != 5 {
		return 2, fmt.Errorf("usage: go-agent INVENTORY POLICY_V1 POLICY_V2 FLOWS")
	}
	fmt.Printf("porin %s (header %s)\n", C.GoString(C.porin_version()), C.PORIN_VERSION)
	flows, err := readFlows(os.Args[4])
	if err != nil || len(flows) == 0 {
		return 2, fmt.Errorf("no flows in %s: %v", os.Args[4], err)
	}
	inventory, err := os.ReadFile(os.Args[1])
	if err != nil {
		return 2, err
	}
	var session *C.porin_session
	if err := porinError("session", C.porin_session_new(&session)); err != nil {
		return 1, err
	}
	defer C.porin_session_free(session)
	name, n := cstr(os.Args[1])
	defer C.free(unsafe.Pointer(name))
	data := C.CBytes(inventory)
	defer C.free(data)
	r := C.porin_session_add_inventory_bytes(session, name, n, (*C.uint8_t)(data), C.size_t(len(inventory)))
	if err := porinError("inventory", r); err != nil {
		return 1, err
	}
	v1, err := compile(session, os.Args[2])
	if err != nil {
		return 1, err
	}
	defer C.porin_compilation_free(v1)
	dp, err := openDatapath(v1)
	if err != nil {
		return 1, err
	}
	defer dp.coll.Close()
	mismatches, sport := 0, uint16(30000)
	decideAll := func(c *C.porin_compilation, label string) error {
		for _, f := range flows {
			kernel, err := dp.kernelVerdict(c, f, sport)
			sport++
			if err != nil {
				return err
			}
			reference, err := referenceVerdict(c, f)
			if err != nil {
				return err
			}
			fmt.Printf("verdict %s %s %s %s %d kernel=%s reference=%s\n", label, f.src, f.dst,
				f.protoName, f.port, kernel, reference)
			if kernel != reference {
				mismatches++
			}
		}
		return nil
	}
	if err := decideAll(v1, "v1"); err != nil {
		return 1, err
	}
	v2, err := compile(session, os.Args[3])
	if err != nil {
		return 1, err
	}
	defer C.porin_compilation_free(v2)
	rolledBack := 0
	for i := 0; i < int(C.porin_compilation_endpoint_count(v2)); i++ {
		var name C.porin_str
		if err := porinError("name", C.porin_compilation_endpoint_name(v2, C.size_t(i), &name)); err != nil {
			return 1, err
		}
		if err := dp.applyDiff(v1, v2, gostr(name)); errors.Is(err, errRolledBack) {
			rolledBack++
		} else if err != nil {
			return 1, err
		}
	}
	if rolledBack > 0 {
		// v2 was refused for some endpoint: v1 stays in force everywhere
		// (an agent retries later or replaces the whole map).
		fmt.Printf("%d difference(s) rolled back, v1 stays in force\n", rolledBack)
		if err := decideAll(v1, "v1"); err != nil {
			return 1, err
		}
	} else if err := decideAll(v2, "v2"); err != nil {
		return 1, err
	}
	fmt.Printf("%d mismatch(es)\n", mismatches)
	switch {
	case mismatches > 0:
		return 1, nil
	case rolledBack > 0:
		return 3, nil
	}
	return 0, nil
}

func main() {
	if k := os.Getenv("PORIN_AGENT_FAIL_AT_WRITE"); k != "" {
		n, err := strconv.Atoi(k)
		if err != nil {
			fmt.Fprintln(os.Stderr, "go-agent: PORIN_AGENT_FAIL_AT_WRITE is not a number:", k)
			os.Exit(2)
		}
		failAtWrite = n
	}
	code, err := mainErr()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-agent:", err)
	}
	os.Exit(code)
}
