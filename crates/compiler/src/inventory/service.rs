//! A Service as a flow destination: `svc/NAMESPACE/NAME` and a Service
//! port resolved to the backing pods and the pod port each one serves.
//!
//! Cilium never sees a packet addressed to a Service: its socket or
//! per-packet load balancer (`bpf/lib/lb.h`, kube-proxy likewise) rewrites
//! the cluster IP and Service port to one backend's address and target
//! port before the policy lookup, so policy decides the flow to the chosen
//! backend's identity and its `targetPort`. A client may land on any
//! backend, so `porin query` and `porin test` decide the flow to each of
//! them.
//!
//! Backends follow Kubernetes' endpoints controller
//! (`pkg/controller/endpointslice` with `podutil.FindPort`): the pods of
//! the Service's namespace whose labels include every `spec.selector`
//! pair; a numeric `targetPort` is that port on each pod; a named one is
//! the container port of that name and protocol on each pod, and a pod
//! without it is no backend of that port. A selector-less Service's
//! backends are its Endpoints' addresses (the inventory's `backends`),
//! which need a numeric `targetPort`.

use std::fmt;
use std::net::IpAddr;

use super::{Endpoint, Inventory, Service, ServicePort, TargetPort};

/// The prefix of a Service destination (`svc/NAMESPACE/NAME`).
pub const SERVICE_PREFIX: &str = "svc/";

/// One backend of a Service port: where the load balancer sends the flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceBackend {
    /// The backing pod's display name (`namespace/name`); `None` for an
    /// address of a selector-less Service.
    pub endpoint: Option<String>,
    /// The backend's address when no endpoint is named.
    pub ip: Option<IpAddr>,
    /// The pod port the flow arrives on (the resolved `targetPort`).
    pub port: u16,
}

impl ServiceBackend {
    /// The backend as a peer of `porin query` / a test case: the pod's
    /// `namespace/name`, or the address.
    pub fn peer(&self) -> String {
        match (&self.endpoint, self.ip) {
            (Some(name), _) => name.clone(),
            (None, Some(ip)) => ip.to_string(),
            (None, None) => String::new(),
        }
    }
}

/// A Service port resolved to its backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceTarget {
    /// `namespace/name` of the Service.
    pub service: String,
    /// The Service port the client connects to.
    pub port: ServicePort,
    /// Every backend, in inventory order.
    pub backends: Vec<ServiceBackend>,
    /// Pods the selector matches that serve no such port (a named
    /// `targetPort` they do not declare), with the reason: no backends of
    /// this port, as in Kubernetes.
    pub skipped: Vec<String>,
}

impl ServiceTarget {
    /// `targetPort 8080` or `targetPort grpc`, as written.
    pub fn describe_target(&self) -> String {
        match &self.port.target {
            TargetPort::Number(n) => format!("targetPort {n}"),
            TargetPort::Name(name) => format!("targetPort {name}"),
        }
    }
}

/// Why a Service destination has no flow to decide. Each names the Service
/// and where it was (or was not) defined; callers add their file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError(pub String);

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServiceError {}

fn proto_name(proto: u8) -> &'static str {
    match proto {
        17 => "UDP",
        132 => "SCTP",
        _ => "TCP",
    }
}

fn describe_port(port: &ServicePort) -> String {
    let target = match &port.target {
        TargetPort::Number(n) => n.to_string(),
        TargetPort::Name(name) => name.clone(),
    };
    let name = port
        .name
        .as_ref()
        .map_or_else(String::new, |n| format!("{n} "));
    format!("{name}{}/{} -> {target}", port.port, proto_name(port.proto))
}

impl Inventory {
    /// The Service named by `reference` (`svc/NAMESPACE/NAME` or
    /// `NAMESPACE/NAME`), if the inventory has it.
    pub fn service(&self, reference: &str) -> Option<&Service> {
        let reference = reference.strip_prefix(SERVICE_PREFIX).unwrap_or(reference);
        let (namespace, name) = reference.split_once('/')?;
        self.services
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
    }

    /// Resolves a flow to Service `reference` on Service port `port` of
    /// protocol `proto` to its backends and their target ports. Fails
    /// closed: an unknown Service, a port it does not expose and a port no
    /// backend serves are errors, never a flow decided to nowhere.
    pub fn service_target(
        &self,
        reference: &str,
        port: u16,
        proto: u8,
    ) -> Result<ServiceTarget, ServiceError> {
        let written = reference.strip_prefix(SERVICE_PREFIX).unwrap_or(reference);
        if written.split('/').count() != 2 {
            return Err(ServiceError(format!(
                "`{reference}` is not a Service reference: write svc/NAMESPACE/NAME"
            )));
        }
        let Some(service) = self.service(written) else {
            let known: Vec<String> = self
                .services
                .iter()
                .map(|s| format!("{}/{}", s.namespace, s.name))
                .collect();
            let known = if known.is_empty() {
                "the inventory has no Service (add the Service manifests to the inventory)"
                    .to_owned()
            } else {
                format!("Services of the inventory: {}", known.join(", "))
            };
            return Err(ServiceError(format!(
                "unknown Service `{written}`: {known}"
            )));
        };
        let at = format!(
            "Service `{written}` ({}:{})",
            service.location.file, service.location.line
        );
        let Some(service_port) = service
            .ports
            .iter()
            .find(|p| p.port == port && p.proto == proto)
        else {
            let ports: Vec<String> = service.ports.iter().map(describe_port).collect();
            let ports = if ports.is_empty() {
                "it lists no ports".to_owned()
            } else {
                format!("its ports: {}", ports.join(", "))
            };
            return Err(ServiceError(format!(
                "{at} has no port {port}/{}: {ports}",
                proto_name(proto)
            )));
        };
        let mut target = ServiceTarget {
            service: written.to_owned(),
            port: service_port.clone(),
            backends: Vec::new(),
            skipped: Vec::new(),
        };
        match &service.selector {
            Some(selector) if !selector.is_empty() => {
                for endpoint in self
                    .endpoints
                    .iter()
                    .filter(|e| selects(service, selector, e))
                {
                    match pod_port(endpoint, service_port) {
                        Some(port) => target.backends.push(ServiceBackend {
                            endpoint: Some(endpoint.display_name()),
                            ip: None,
                            port,
                        }),
                        None => target.skipped.push(format!(
                            "{} declares no {} container port `{}`",
                            endpoint.display_name(),
                            proto_name(proto),
                            match &service_port.target {
                                TargetPort::Name(n) => n.as_str(),
                                TargetPort::Number(_) => "",
                            }
                        )),
                    }
                }
                if target.backends.is_empty() {
                    let why = if target.skipped.is_empty() {
                        let pairs: Vec<String> =
                            selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        format!(
                            "its selector {} matches no endpoint of namespace `{}` in the inventory",
                            pairs.join(","),
                            service.namespace
                        )
                    } else {
                        format!("no backing pod serves it ({})", target.skipped.join("; "))
                    };
                    return Err(ServiceError(format!(
                        "{at} port {port}/{} has no backend: {why}",
                        proto_name(proto)
                    )));
                }
            }
            _ => {
                let TargetPort::Number(number) = service_port.target else {
                    return Err(ServiceError(format!(
                        "{at} has no selector, so its backends are addresses without container ports: a named targetPort cannot be resolved"
                    )));
                };
                for ip in &service.backends {
                    let endpoint = self.endpoints.iter().find(|e| e.ips.contains(ip));
                    target.backends.push(ServiceBackend {
                        endpoint: endpoint.map(Endpoint::display_name),
                        ip: endpoint.is_none().then_some(*ip),
                        port: number,
                    });
                }
                if target.backends.is_empty() {
                    return Err(ServiceError(format!(
                        "{at} has no selector and no backends: add its Endpoints' addresses (`backends:`)"
                    )));
                }
            }
        }
        Ok(target)
    }
}

/// Whether a Service's selector picks an endpoint: same namespace, every
/// selector pair among the pod's labels (`labels.SelectorFromSet`).
fn selects(
    service: &Service,
    selector: &std::collections::BTreeMap<String, String>,
    endpoint: &Endpoint,
) -> bool {
    endpoint.namespace.as_deref() == Some(service.namespace.as_str())
        && selector
            .iter()
            .all(|(k, v)| endpoint.labels.get(k) == Some(v))
}

/// The pod port a Service port reaches on one pod (`podutil.FindPort`): a
/// number as it is; a name, the pod's container port of that name and
/// protocol.
fn pod_port(endpoint: &Endpoint, port: &ServicePort) -> Option<u16> {
    match &port.target {
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => endpoint
            .ports
            .iter()
            .find(|p| p.name == *name && p.proto == port.proto)
            .map(|p| p.port)
            .filter(|p| *p != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory() -> Inventory {
        let mut inventory = Inventory::new();
        inventory
            .add_text(
                "m.yaml",
                "kind: Service
metadata: {name: email, namespace: shop}
spec:
  selector: {app: email}
  ports:
  - {name: grpc, port: 5000, targetPort: 8080}
  - {name: named, port: 6000, targetPort: http}
---
kind: Pod
metadata: {name: email-a, namespace: shop, labels: {app: email}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 9090}]}]}
---
kind: Pod
metadata: {name: email-b, namespace: shop, labels: {app: email}}
spec: {containers: [{name: c}]}
---
kind: Pod
metadata: {name: email-c, namespace: other, labels: {app: email}}
spec: {containers: [{name: c}]}
",
            )
            .unwrap();
        inventory.finish().unwrap();
        inventory
    }

    #[test]
    fn a_numeric_target_port_reaches_every_pod_the_selector_picks_in_the_namespace() {
        let target = inventory()
            .service_target("svc/shop/email", 5000, 6)
            .unwrap();
        let peers: Vec<(String, u16)> =
            target.backends.iter().map(|b| (b.peer(), b.port)).collect();
        assert_eq!(
            peers,
            [
                ("shop/email-a".to_owned(), 8080),
                ("shop/email-b".to_owned(), 8080)
            ]
        );
    }

    #[test]
    fn a_named_target_port_is_each_pods_container_port_and_a_pod_without_it_is_no_backend() {
        let target = inventory()
            .service_target("svc/shop/email", 6000, 6)
            .unwrap();
        assert_eq!(target.backends.len(), 1);
        assert_eq!(
            (target.backends[0].peer(), target.backends[0].port),
            ("shop/email-a".to_owned(), 9090)
        );
        assert!(
            target.skipped[0].contains("shop/email-b"),
            "{:?}",
            target.skipped
        );
    }

    #[test]
    fn unknown_services_ports_and_protocols_are_errors_naming_what_exists() {
        let inventory = inventory();
        let unknown = inventory
            .service_target("svc/shop/mail", 5000, 6)
            .unwrap_err();
        assert!(
            unknown.0.contains("unknown Service `shop/mail`"),
            "{unknown}"
        );
        assert!(unknown.0.contains("shop/email"), "{unknown}");
        let port = inventory
            .service_target("svc/shop/email", 8080, 6)
            .unwrap_err();
        assert!(port.0.contains("has no port 8080/TCP"), "{port}");
        assert!(port.0.contains("grpc 5000/TCP -> 8080"), "{port}");
        let udp = inventory
            .service_target("svc/shop/email", 5000, 17)
            .unwrap_err();
        assert!(udp.0.contains("has no port 5000/UDP"), "{udp}");
        let bad = inventory.service_target("svc/email", 5000, 6).unwrap_err();
        assert!(bad.0.contains("svc/NAMESPACE/NAME"), "{bad}");
    }

    #[test]
    fn porin_yaml_services_carry_ports_and_selector_less_ones_their_addresses() {
        let mut inventory = Inventory::new();
        inventory
            .add_text(
                "inv.yaml",
                "kind: Inventory
endpoints:
  - {name: web, namespace: prod, labels: {app: web}, ports: [{name: http, port: 8080}]}
services:
  - {name: web, namespace: prod, selector: {app: web}, ports: [{port: 80, targetPort: http}]}
  - {name: legacy, namespace: prod, backends: [192.0.2.50], ports: [{port: 5432}]}
  - {name: odd, namespace: prod, backends: [192.0.2.51], ports: [{port: 1, targetPort: x}]}
",
            )
            .unwrap();
        inventory.finish().unwrap();
        let web = inventory.service_target("svc/prod/web", 80, 6).unwrap();
        assert_eq!(
            (web.backends[0].peer(), web.backends[0].port),
            ("prod/web".to_owned(), 8080)
        );
        let legacy = inventory
            .service_target("svc/prod/legacy", 5432, 6)
            .unwrap();
        assert_eq!(
            (legacy.backends[0].peer(), legacy.backends[0].port),
            ("192.0.2.50".to_owned(), 5432)
        );
        let odd = inventory.service_target("svc/prod/odd", 1, 6).unwrap_err();
        assert!(
            odd.0.contains("a named targetPort cannot be resolved"),
            "{odd}"
        );
        let mut bad = Inventory::new();
        let error = bad
            .add_text(
                "inv.yaml",
                "kind: Inventory\nservices:\n  - {name: s, ports: [{port: 80, protocol: ICMP}]}\n",
            )
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("service `s`: ports[0]: protocol `ICMP`"),
            "{error}"
        );
    }
}
