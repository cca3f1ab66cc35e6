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

use serde_json::Value;

use super::yaml::Document;
use super::{Endpoint, Inventory, NamedPort, Service, SourceLocation, container_port_proto};
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
        "Service" => {
            if name.is_empty() {
                return Err(invalid(file, line, "Service without a name".to_owned()));
            }
            let selector = spec
                .and_then(|s| s.get("selector"))
                .filter(|s| s.as_object().is_some_and(|o| !o.is_empty()))
                .map(|s| string_map(Some(s)));
            inventory.services.push(Service {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                labels: string_map(metadata.and_then(|m| m.get("labels"))),
                selector,
                backends: Vec::new(),
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
