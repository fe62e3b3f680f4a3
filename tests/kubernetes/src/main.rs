//! Checks Kubernetes manifests, offline, against the schema of the resource each declares: its
//! `apiVersion` and `kind` pick the type (CloudNativePG 1.30.0's `Cluster`, `Database` and
//! `ImageCatalog`; Kubernetes 1.34's `StatefulSet`, `Service`, `ConfigMap`, `Secret`,
//! `ServiceAccount`), and the document must deserialize into it with no field left over: a
//! field the schema lacks (a typo, a field of another version) fails as a wrong type does, as
//! `kubectl apply --validate=strict` fails it.
//!
//!     manifests FILE...
//!
//! Each FILE is a YAML stream of one or more documents. Prints one JSON line per document
//! (`{"kind": ..., "name": ..., "parameters": {...}}`: a Cluster's `.spec.postgresql.parameters`
//! and `shared_preload_libraries`, a StatefulSet's `-c name=value` arguments, a ConfigMap's
//! `*.sql` scripts, for the caller to check against a server), or what is wrong with it on
//! stderr; exits 1 if any document is wrong.

use k8s_crds_cloud_native_pg::{Cluster, Database, ImageCatalog};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// `doc` as a `T`, with the paths of the fields `T` has no place for.
fn typed<T: DeserializeOwned>(doc: Value) -> Result<(T, Vec<String>), String> {
    let mut unknown = Vec::new();
    // (serde_ignored writes an Option it went through as "?": spec.?.selector.)
    let value =
        serde_ignored::deserialize(doc, |path| unknown.push(path.to_string().replace(".?", "")))
            .map_err(|e| e.to_string())?;
    Ok((value, unknown))
}

/// A custom resource: kopium's types take `apiVersion` and `kind` from the derive, not from the
/// document, so they are compared here.
fn custom<T: DeserializeOwned + kube::Resource<DynamicType = ()>>(
    doc: Value,
) -> Result<(T, Vec<String>), String> {
    let (api_version, kind) = (T::api_version(&()), T::kind(&()));
    if doc["apiVersion"] != *api_version || doc["kind"] != *kind {
        return Err(format!("not {api_version} {kind}"));
    }
    let (value, unknown) = typed::<T>(doc)?;
    Ok((value, unknown.into_iter().filter(|p| p != "apiVersion" && p != "kind").collect()))
}

/// What is wrong with one document, or what the caller checks further.
fn check(doc: Value) -> Result<Value, String> {
    let name = doc["metadata"]["name"].as_str().ok_or("no metadata.name")?.to_string();
    let kind = doc["kind"].as_str().ok_or("no kind")?.to_string();
    let api_version = doc["apiVersion"].as_str().ok_or("no apiVersion")?.to_string();
    let mut out = json!({"kind": kind, "name": name});
    // k8s-openapi's types check apiVersion and kind themselves.
    let unknown = match (api_version.as_str(), kind.as_str()) {
        ("postgresql.cnpg.io/v1", "Cluster") => {
            let (cluster, unknown) = custom::<Cluster>(doc)?;
            if let Some(pg) = cluster.spec.postgresql {
                out["parameters"] = json!(pg.parameters.unwrap_or_default());
                out["shared_preload_libraries"] = json!(pg.shared_preload_libraries);
            }
            unknown
        }
        ("postgresql.cnpg.io/v1", "Database") => custom::<Database>(doc)?.1,
        ("postgresql.cnpg.io/v1", "ImageCatalog") => custom::<ImageCatalog>(doc)?.1,
        ("apps/v1", "StatefulSet") => {
            let (set, unknown) = typed::<StatefulSet>(doc)?;
            out["parameters"] = json!(command_line_settings(&set));
            unknown
        }
        ("v1", "Service") => typed::<Service>(doc)?.1,
        ("v1", "ConfigMap") => {
            let (map, unknown) = typed::<ConfigMap>(doc)?;
            let scripts =
                map.data.unwrap_or_default().into_iter().filter(|(k, _)| k.ends_with(".sql"));
            out["sql"] = json!(scripts.collect::<std::collections::BTreeMap<_, _>>());
            unknown
        }
        ("v1", "Secret") => typed::<Secret>(doc)?.1,
        ("v1", "ServiceAccount") => typed::<ServiceAccount>(doc)?.1,
        _ => return Err(format!("no schema here for {api_version} {kind}")),
    };
    if unknown.is_empty() {
        Ok(out)
    } else {
        Err(format!("fields the schema lacks: {}", unknown.join(", ")))
    }
}

/// The settings a StatefulSet's containers give PostgreSQL on its command line (`-c name=value`).
fn command_line_settings(set: &StatefulSet) -> std::collections::BTreeMap<String, String> {
    let containers =
        set.spec.iter().flat_map(|s| s.template.spec.iter()).flat_map(|p| &p.containers);
    let mut settings = std::collections::BTreeMap::new();
    for args in containers.filter_map(|c| c.args.as_ref()) {
        for pair in args.windows(2).filter(|w| w[0] == "-c") {
            if let Some((name, value)) = pair[1].split_once('=') {
                settings.insert(name.to_string(), value.to_string());
            }
        }
    }
    settings
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: manifests FILE...");
        std::process::exit(2);
    }
    let mut wrong = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (n, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            // Through YAML's own values first, which refuse a key given twice (a map of JSON
            // values keeps the last, as no API server does).
            let result = <serde_yaml::Value as serde::Deserialize>::deserialize(doc)
                .map_err(|e| e.to_string())
                .and_then(|yaml| serde_json::to_value(yaml).map_err(|e| e.to_string()))
                .and_then(check);
            match result {
                Ok(out) => println!("{out}"),
                Err(e) => {
                    eprintln!("{file}: document {}: {e}", n + 1);
                    wrong += 1;
                }
            }
        }
    }
    std::process::exit(if wrong == 0 { 0 } else { 1 });
}
