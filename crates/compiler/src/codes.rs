//! The compiler stage's diagnostic codes (`PC0xx`), in the registry's one
//! shape ([`porin_model::CodeInfo`]). Stable: a number is never reused.
//! `CODES.md` is generated from [`ALL`]. Every code is reported only when
//! policies are compiled against an inventory.

porin_model::code_table! {
    stage: Compiler, needs_inventory: true;
    /// A peer porin cannot resolve offline (nodes, cloud groups):
    /// allow rules allow nothing for it, deny rules deny every peer.
    UNSUPPORTED_PEER = "PC001", "unsupported-peer", Warning,
        "A peer porin cannot resolve offline (fromNodes/toNodes, fromGroups/toGroups): allow rules allow nothing for it, deny rules deny every peer on those ports (fail closed).";
    /// `toFQDNs` with no DNS answers in the inventory.
    UNKNOWN_FQDN = "PC002", "unknown-fqdn", Warning,
        "toFQDNs has no DNS answers in the inventory (`fqdns`): nothing is allowed for that selector (fail closed).";
    /// `toServices` that yields no peer: no inventory service matches, or
    /// only selector-less services without backends do.
    UNKNOWN_SERVICE = "PC003", "unknown-service", Warning,
        "toServices yields no peer (no inventory service matches, or only selector-less services without backends): allow rules allow nothing, deny rules deny every peer (fail closed). When no item of an allow rule with ports yields a peer, Cilium 1.19 leaves the rule without L3 and allows those ports to every peer; porin does not.";
    /// A named port that does not resolve: no keys (as in Cilium).
    NAMED_PORT = "PC004", "named-port", Warning,
        "A named port does not resolve (unknown, incompatible protocol, zero, duplicate numbers cluster-wide for egress): the rule yields no keys, as in Cilium (`GetNamedPort`, pkg/types/portmap.go).";
    /// The KNP ingress ipBlock quirk is in effect.
    KNP_IPBLOCK_QUIRK = "PC005", "knp-ipblock-quirk", Warning,
        "A KNP ingress peer with only an ipBlock also admits every pod of the policy namespace in Cilium (parseNetworkPolicyPeer); porin mirrors it.";
    /// Rules Cilium cannot merge (L7 parsers, listeners, auth): nothing is
    /// allowed for that selector and port.
    MERGE_CONFLICT = "PC006", "merge-conflict", Error,
        "Rules Cilium cannot merge on one port and selector (L7 parsers, listeners with the same priority, authentication types): nothing is allowed there (fail closed).";
    /// Retired: porin compiles host policies now (their subject is the
    /// local node's host endpoint, `node/NAME`); never reported.
    HOST_POLICY = "PC007", "host-policy", Info,
        "Retired (no longer reported): porin once skipped rules with a nodeSelector; it now compiles them for the host endpoint of the local node (`node/NAME`), and PC030 reports a host policy that selects no node.";
    /// A policy selects no endpoint of the inventory.
    SELECTS_NOTHING = "PC008", "selects-nothing", Info,
        "A policy selects no endpoint of the inventory (incomplete inventory, or a wrong selector).";
    /// A peer that does not parse (bad CIDR).
    INVALID_PEER = "PC009", "invalid-peer", Warning,
        "A peer that does not parse (a CIDR): compiled like an unresolvable peer (fail closed).";
    /// A port or ICMP type that does not parse.
    INVALID_PORT = "PC010", "invalid-port", Error,
        "A port or ICMP type that does not parse: that port is left out; the rule never widens to all ports.";
    /// A Cilium 1.19 quirk that porin mirrors and the user should know:
    /// ICMP type 0 read as every ICMP type (cilium/cilium#41304).
    CILIUM_QUIRK = "PC011", "cilium-quirk", Warning,
        "ICMP type 0 in icmps means every ICMP type in Cilium 1.19 (cilium/cilium#41304); porin mirrors it and says so.";
    /// `port: "0"` with an `endPort`: Cilium's datapath key would cover all
    /// ports; porin keeps the range for allows and widens denies to every
    /// port (fail closed).
    PORT_ZERO_RANGE = "PC012", "port-zero-range", Warning,
        "port \"0\" with an endPort: Cilium's datapath key covers every port; porin keeps the range 0-endPort for allows and denies every port for denies (fail closed both ways).";
    /// A `toServices` reference without a namespace in a CNP matched a
    /// service of another namespace (Cilium matches every namespace).
    SERVICE_ANY_NAMESPACE = "PC013", "service-any-namespace", Warning,
        "A toServices k8sService/k8sServiceSelector without a namespace in a CiliumNetworkPolicy matched a service outside the policy's namespace: Cilium matches every namespace (serviceRefMatches, serviceSelectorMatches), and so does porin.";
    /// `toServices` in an `egressDeny` item, which Cilium never translates.
    SERVICE_IN_DENY = "PC014", "service-in-deny", Warning,
        "toServices in egressDeny: Cilium translates toServices only in egress rules (processRule), leaving the deny item without L3: with ports it denies them to every peer (porin too); without ports it denies nothing (porin denies the services' backends, fail closed).";
    /// A compile resource limit was exceeded: porin stopped (exit 2)
    /// without output, and says so in the requested format.
    RESOURCE_LIMIT = "PC015", "resource-limit", Error,
        "A compile resource limit (`--max-...`) was exceeded: porin refused the input before doing the work it bounds and produced no result (exit 2). The message names the limit, the amount needed and the flag that raises it; the defaults never refuse what a Cilium cluster runs.";
    /// A `cidrGroupRef`/`cidrGroupSelector` no loaded CiliumCIDRGroup
    /// answers.
    UNKNOWN_CIDR_GROUP = "PC016", "unknown-cidr-group", Warning,
        "A cidrGroupRef names, or a cidrGroupSelector selects, no CiliumCIDRGroup among the inputs: Cilium selects nothing for it, so an allow allows nothing (porin too); a deny denies nothing in Cilium, and porin denies those ports to every peer instead (fail closed), since the group may exist in the cluster but not among porin's inputs.";
    /// No policy selects any endpoint of the inventory: every verdict is
    /// the one of a cluster without policy.
    INVENTORY_SELECTS_NOTHING = "PC020", "inventory-selects-nothing", Warning,
        "No loaded policy selects any endpoint of the inventory (a wrong or incomplete inventory, or the wrong namespace): nothing is enforced, so every flow is allowed and a test that expects allow passes without testing anything. Give the inventory the workloads the policies are for (their manifests, `--inventory`, `inventory:`).";
    /// Retired: porin compiles the DNS rule Cilium 1.20 adds for a
    /// ClusterNetworkPolicy's `domainNames`; never reported.
    DOMAIN_NAMES_DNS_RULE = "PC025", "domain-names-dns-rule", Info,
        "Retired (no longer reported): porin once left out the DNS rule Cilium 1.20 adds for a ClusterNetworkPolicy `domainNames` peer; it now compiles it as Cilium does (an Accept towards k8s-app=kube-dns on the named ports dns/dns-tcp, redirected to the DNS proxy; pkg/k8s/cluster_network_policy.go).";
    /// A host policy (`nodeSelector`) that selects no node of the
    /// inventory.
    HOST_POLICY_SELECTS_NO_NODE = "PC030", "host-policy-selects-no-node", Warning,
        "A host policy's nodeSelector matches no node of the inventory (node labels; `nodes:` of an inventory or PolicyTest file, Node manifests): it applies to no host endpoint, so it allows and denies nothing there.";
    /// A ClusterNetworkPolicy the agent refuses as a whole under the
    /// inventory's settings: none of its rules is compiled.
    CLUSTER_NETWORK_POLICY_REFUSED = "PC031", "cluster-network-policy-refused", Error,
        "A ClusterNetworkPolicy Cilium 1.20's agent refuses under the inventory's settings (a `nodes` peer without `enable-node-selector-labels: true`): ParseClusterNetworkPolicy fails and none of its rules is enforced, Deny included (pkg/k8s/cluster_network_policy.go); porin compiles none either and reports the policy as an error.";
    /// A port without a number (VRRP/IGMP) while
    /// `enable-extended-ip-protocols` is off.
    PORT_NEEDS_EXTENDED_PROTOCOLS = "PC033", "port-needs-extended-protocols", Error,
        "A `toPorts` port without a port number (`protocol: VRRP` or `IGMP` alone) while the agent setting `enable-extended-ip-protocols` is off (the default): Cilium refuses the rule (`port must be specified`, pkg/policy/api/rule_validation.go). porin writes no entry for the port, and without the setting the datapath drops VRRP and IGMP packets before policy anyway (DROP_CT_UNKNOWN_PROTO), so nothing is allowed. Set `enable-extended-ip-protocols: true` in the inventory, PolicyTest file or `.porin.yaml` when the cluster runs with it, or write `port: \"0\"`.";
}
