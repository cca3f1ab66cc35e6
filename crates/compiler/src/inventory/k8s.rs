//! Kubernetes manifests as an inventory.
//!
//! Each workload becomes one endpoint named after the object (replicas
//! share labels, hence identity and policy, so one stands for all):
//! `Pod` (its own metadata and spec), `Deployment`, `StatefulSet`,
//! `DaemonSet`, `ReplicaSet`, `Job` (`spec.template`) and `CronJob`
//! (`spec.jobTemplate.spec.template`). `Namespace` objects give namespace
//! labels; `Service` objects give `toServices` definitions; `List` objects
//! are unpacked. Other kinds (policies, ConfigMaps, ...) are ignored.
//!
//! The namespace defaults to `default` and the service account to
//! `default`, as the API server would set them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

use super::yaml::Document;
use super::{
    Endpoint, Inventory, NamedPort, Service, ServicePort, SourceLocation, TargetPort,
    container_port_proto,
};
use crate::error::InventoryError;

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    if let Some(Value::Object(object)) = value {
        for (k, v) in object {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            map.insert(k.clone(), text);
        }
    }
    map
}

/// A Service's `spec.ports` and cluster addresses. A port without a valid
/// number or protocol is refused rather than skipped: a Service whose port
/// porin dropped would answer for fewer flows than the cluster serves.
fn service_ports(
    file: &str,
    line: u32,
    name: &str,
    spec: Option<&Value>,
) -> Result<(Vec<ServicePort>, Vec<IpAddr>), InventoryError> {
    let mut ports = Vec::new();
    if let Some(Value::Array(list)) = spec.and_then(|s| s.get("ports")) {
        for (index, entry) in list.iter().enumerate() {
            let at = |what: String| {
                invalid(
                    file,
                    line,
                    format!("Service `{name}`: spec.ports[{index}]: {what}"),
                )
            };
            let port = entry
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n != 0)
                .ok_or_else(|| at("`port` is not a port number (1-65535)".to_owned()))?;
            let target = match entry.get("targetPort") {
                None | Some(Value::Null) => TargetPort::Number(port),
                Some(Value::String(text)) => match text.parse::<u16>() {
                    Ok(n) if n != 0 => TargetPort::Number(n),
                    Err(_) if !text.is_empty() => TargetPort::Name(text.to_ascii_lowercase()),
                    _ => {
                        return Err(at(format!(
                            "`targetPort` `{text}` is not a port number or name"
                        )));
                    }
                },
                Some(value) => TargetPort::Number(
                    value
                        .as_u64()
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|n| *n != 0)
                        .ok_or_else(|| {
                            at(format!("`targetPort` {value} is not a port number or name"))
                        })?,
                ),
            };
            let proto_name = entry.get("protocol").and_then(Value::as_str);
            let proto = container_port_proto(proto_name).ok_or_else(|| {
                at(format!(
                    "protocol `{}` is not TCP, UDP or SCTP",
                    proto_name.unwrap_or_default()
                ))
            })?;
            ports.push(ServicePort {
                name: entry.get("name").and_then(Value::as_str).map(str::to_owned),
                port,
                target,
                proto,
            });
        }
    }
    let mut cluster_ips = Vec::new();
    let listed = spec
        .and_then(|s| s.get("clusterIPs"))
        .and_then(Value::as_array);
    let single = spec
        .and_then(|s| s.get("clusterIP"))
        .map(std::slice::from_ref);
    for value in listed.map(Vec::as_slice).or(single).unwrap_or_default() {
        match value.as_str() {
            // A headless service has no address of its own.
            None | Some("" | "None") => {}
            Some(text) => {
                let ip = text.parse::<IpAddr>().map_err(|_| {
                    invalid(
                        file,
                        line,
                        format!("Service `{name}`: `{text}` is not a cluster IP address"),
                    )
                })?;
                if !cluster_ips.contains(&ip) {
                    cluster_ips.push(ip);
                }
            }
        }
    }
    Ok((ports, cluster_ips))
}

fn invalid(file: &str, line: u32, message: String) -> InventoryError {
    InventoryError::Invalid {
        file: file.to_owned(),
        line,
        message,
    }
}

/// Adds one manifest document (ignoring kinds that carry no inventory).
pub fn add_manifest(
    inventory: &mut Inventory,
    file: &str,
    document: &Document,
) -> Result<(), InventoryError> {
    add_object(inventory, file, document.line, &document.value)
}

fn add_object(
    inventory: &mut Inventory,
    file: &str,
    line: u32,
    object: &Value,
) -> Result<(), InventoryError> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let metadata = object.get("metadata");
    let name = metadata
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let namespace = metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let spec = object.get("spec");
    let template = match kind {
        "List" => {
            if let Some(Value::Array(items)) = object.get("items") {
                for item in items {
                    add_object(inventory, file, line, item)?;
                }
            }
            return Ok(());
        }
        "Namespace" => {
            if name.is_empty() {
                return Err(invalid(file, line, "Namespace without a name".to_owned()));
            }
            let labels = string_map(metadata.and_then(|m| m.get("labels")));
            inventory
                .namespaces
                .entry(name.to_owned())
                .or_default()
                .extend(labels);
            return Ok(());
        }
        "Node" => {
            if name.is_empty() {
                return Err(invalid(file, line, "Node without metadata.name".to_owned()));
            }
            // `k8s.ParseNode` (pkg/k8s/node.go): InternalIP and ExternalIP
            // addresses are the node's IPs.
            let mut ips = Vec::new();
            let addresses = object
                .get("status")
                .and_then(|s| s.get("addresses"))
                .and_then(Value::as_array);
            for address in addresses.into_iter().flatten() {
                let kind = address.get("type").and_then(Value::as_str).unwrap_or("");
                if kind != "InternalIP" && kind != "ExternalIP" {
                    continue;
                }
                let text = address.get("address").and_then(Value::as_str).unwrap_or("");
                let ip = text.trim().parse().map_err(|_| {
                    invalid(
                        file,
                        line,
                        format!("Node `{name}`: address `{text}` is not an IP address"),
                    )
                })?;
                ips.push(ip);
            }
            inventory.nodes.push(super::Node {
                name: name.to_owned(),
                labels: string_map(metadata.and_then(|m| m.get("labels"))),
                ips,
                local: false,
                location: SourceLocation {
                    file: file.to_owned(),
                    line,
                },
            });
            return Ok(());
        }
        "Service" => {
            if name.is_empty() {
                return Err(invalid(file, line, "Service without a name".to_owned()));
            }
            let selector = spec
                .and_then(|s| s.get("selector"))
                .filter(|s| s.as_object().is_some_and(|o| !o.is_empty()))
                .map(|s| string_map(Some(s)));
            let (ports, cluster_ips) = service_ports(file, line, name, spec)?;
            inventory.services.push(Service {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                labels: string_map(metadata.and_then(|m| m.get("labels"))),
                selector,
                backends: Vec::new(),
                ports,
                cluster_ips,
                location: SourceLocation {
                    file: file.to_owned(),
                    line,
                },
            });
            return Ok(());
        }
        "Pod" => object,
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            match spec.and_then(|s| s.get("template")) {
                Some(template) => template,
                None => return Err(invalid(file, line, format!("{kind} without spec.template"))),
            }
        }
        "CronJob" => match spec
            .and_then(|s| s.get("jobTemplate"))
            .and_then(|j| j.get("spec"))
            .and_then(|s| s.get("template"))
        {
            Some(template) => template,
            None => {
                return Err(invalid(
                    file,
                    line,
                    "CronJob without spec.jobTemplate.spec.template".to_owned(),
                ));
            }
        },
        _ => return Ok(()),
    };
    if name.is_empty() {
        return Err(invalid(file, line, format!("{kind} without metadata.name")));
    }
    let labels = string_map(template.get("metadata").and_then(|m| m.get("labels")));
    let pod_spec = template.get("spec");
    let service_account = pod_spec
        .and_then(|s| {
            s.get("serviceAccountName")
                .or_else(|| s.get("serviceAccount"))
        })
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_owned();
    let mut ports = Vec::new();
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(containers)) = pod_spec.and_then(|s| s.get(list)) else {
            continue;
        };
        for container in containers {
            let Some(Value::Array(container_ports)) = container.get("ports") else {
                continue;
            };
            for port in container_ports {
                let Some(port_name) = port.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let number = port
                    .get("containerPort")
                    .and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| {
                        invalid(
                            file,
                            line,
                            format!(
                                "{kind} `{name}`: port `{port_name}` has no valid containerPort"
                            ),
                        )
                    })?;
                let proto_name = port.get("protocol").and_then(Value::as_str);
                let proto = container_port_proto(proto_name).ok_or_else(|| {
                    invalid(
                        file,
                        line,
                        format!(
                            "{kind} `{name}`: port `{port_name}` has protocol `{}`",
                            proto_name.unwrap_or_default()
                        ),
                    )
                })?;
                ports.push(NamedPort {
                    name: port_name.to_ascii_lowercase(),
                    port: number,
                    proto,
                });
            }
        }
    }
    let mut ips = Vec::new();
    if kind == "Pod"
        && let Some(Value::Array(pod_ips)) = object.get("status").and_then(|s| s.get("podIPs"))
    {
        for entry in pod_ips {
            if let Some(ip) = entry
                .get("ip")
                .and_then(Value::as_str)
                .and_then(|t| t.parse().ok())
            {
                ips.push(ip);
            }
        }
    }
    inventory.endpoints.push(Endpoint {
        name: name.to_owned(),
        namespace: Some(namespace.to_owned()),
        labels,
        ips,
        service_account: Some(service_account),
        ports,
        identity: None,
        identity_labels: None,
        location: SourceLocation {
            file: file.to_owned(),
            line,
        },
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

    use super::*;

    fn services(text: &str) -> Result<Vec<Service>, InventoryError> {
        let mut inventory = Inventory::new();
        inventory.add_text("svc.yaml", text)?;
        Ok(inventory.services)
    }

    #[test]
    fn service_ports_keep_numeric_and_named_target_ports_and_cluster_ips() {
        let found = services(
            "apiVersion: v1
kind: Service
metadata: {name: emailservice, namespace: default}
spec:
  selector: {app: emailservice}
  clusterIPs: [10.96.0.10, fd00::10]
  ports:
  - {name: grpc, port: 5000, targetPort: 8080}
  - {name: web, port: 80, targetPort: http, protocol: TCP}
  - {port: 53, protocol: UDP}
",
        )
        .unwrap();
        let service = &found[0];
        assert_eq!(service.cluster_ips.len(), 2);
        assert_eq!(
            service.ports,
            vec![
                ServicePort {
                    name: Some("grpc".to_owned()),
                    port: 5000,
                    target: TargetPort::Number(8080),
                    proto: 6,
                },
                ServicePort {
                    name: Some("web".to_owned()),
                    port: 80,
                    target: TargetPort::Name("http".to_owned()),
                    proto: 6,
                },
                ServicePort {
                    name: None,
                    port: 53,
                    target: TargetPort::Number(53),
                    proto: 17,
                },
            ]
        );
    }

    #[test]
    fn a_headless_service_has_no_cluster_ip_and_a_bad_port_is_refused() {
        let headless = services(
            "kind: Service
metadata: {name: db}
spec: {clusterIP: None, ports: [{port: 5432}]}
",
        )
        .unwrap();
        assert!(headless[0].cluster_ips.is_empty());
        for bad in [
            "{port: 0}",
            "{port: 70000}",
            "{port: 80, targetPort: 0}",
            "{port: 80, protocol: ICMP}",
        ] {
            let error = services(&format!(
                "kind: Service\nmetadata: {{name: s}}\nspec: {{ports: [{bad}]}}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(
                error.contains("Service `s`: spec.ports[0]"),
                "{bad}: {error}"
            );
        }
    }
}
