//! `services:`: model servers a pipeline runs beside its stages (an OpenAI-compatible
//! server such as vLLM, SGLang or llama.cpp's), or one someone else runs (`endpoint:`).
//! The spec and its checks, and the policies the host applies: how many replicas, when a
//! replica that died is started again, how long to wait between readiness probes.
//!
//! A stage reaches a service only when its entry names it (`service: NAME`), as a stage
//! reaches a directory only through a grant.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resources::Resources;
use crate::spec_error::SpecError;

/// The placeholder a service's command must hold: the host picks a free loopback port per
/// replica and puts it there.
pub const PORT: &str = "{port}";

/// One entry of `services:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    /// The server's command line, e.g. `vllm serve Qwen/Qwen2.5-7B-Instruct --port {port}`:
    /// split as a POSIX shell splits words (quotes and backslashes; no expansion), or a list
    /// of arguments; `{port}` replaced by each replica's port; run in the pipeline file's
    /// directory. Exclusive with `endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
    /// A server someone else runs: its base URL (`http://host:8000`; a trailing `/v1` is
    /// dropped, the client adds it). Exclusive with `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The environment variable holding the API key sent as `Authorization: Bearer …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model name requests carry; default: the first model the server lists at
    /// `/v1/models`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What one replica needs (`cpus`, and `gpus` or `gpu_memory_gb`). A replica's GPUs are
    /// placed with the GPU stages' workers and never given to a stage.
    #[serde(default)]
    pub resources: Resources,
    /// Replicas to start; default one per GPU the request fits on (one for a CPU server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<usize>,
    /// The path a replica answers 200 on once it serves (default `/v1/models`).
    #[serde(default = "default_ready_path")]
    pub ready_path: String,
    /// Seconds a replica may take to become ready (default 900: large models load slowly).
    #[serde(default = "default_startup_timeout")]
    pub startup_timeout_s: f64,
    /// Times a replica that dies during the run is started again (default 3); past that the
    /// run fails.
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// Environment variables set for the server's process.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// A command as one string (split into words as a POSIX shell would) or as its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Command {
    Line(String),
    Args(Vec<String>),
}

impl Command {
    /// The arguments, `{port}` replaced (none for a line whose quotes do not close, which
    /// `ServiceSpec::check` refuses).
    pub fn args(&self, port: u16) -> Vec<String> {
        let args: Vec<String> = match self {
            Command::Line(l) => shlex::split(l).unwrap_or_default(),
            Command::Args(a) => a.clone(),
        };
        args.into_iter().map(|a| a.replace(PORT, &port.to_string())).collect()
    }

    /// The command as written, `{port}` and all.
    pub fn display(&self) -> String {
        match self {
            Command::Line(l) => l.trim().to_string(),
            Command::Args(a) => a.join(" "),
        }
    }

    fn has_port(&self) -> bool {
        match self {
            Command::Line(l) => l.contains(PORT),
            Command::Args(a) => a.iter().any(|x| x.contains(PORT)),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Command::Line(l) => shlex::split(l).is_none_or(|w| w.is_empty()),
            Command::Args(a) => a.is_empty() || a[0].trim().is_empty(),
        }
    }
}

fn default_ready_path() -> String {
    "/v1/models".into()
}
fn default_startup_timeout() -> f64 {
    900.0
}
fn default_max_restarts() -> u32 {
    3
}

impl ServiceSpec {
    /// Every mistake in entry `name`, each naming its field.
    pub fn check(&self, file: &str, name: &str, errors: &mut Vec<SpecError>) {
        let at = |field: &str| if field.is_empty() { format!("services.{name}") } else { format!("services.{name}.{field}") };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            errors.push(SpecError::new(file, at(""), "a service's name is letters, digits, '_' and '-'"));
        }
        match (&self.command, &self.endpoint) {
            (Some(_), Some(_)) => errors.push(SpecError::new(file, at("endpoint"), "command and endpoint are both set; set only one")),
            (None, None) => errors.push(SpecError::new(
                file,
                at(""),
                "needs a command (a server the host starts) or an endpoint (a server that already runs)",
            )),
            (Some(Command::Line(l)), None) if shlex::split(l).is_none() => {
                errors.push(SpecError::new(file, at("command"), "a quote does not close (or the line ends in a backslash)"))
            }
            (Some(c), None) if c.is_empty() => errors.push(SpecError::new(file, at("command"), "is empty")),
            (Some(c), None) if !c.has_port() => errors.push(SpecError::new(
                file,
                at("command"),
                format!("must pass {PORT} to the server (e.g. --port {PORT}): the host picks each replica's port"),
            )),
            (None, Some(url)) => {
                if let Err(why) = base_url(url) {
                    errors.push(SpecError::new(file, at("endpoint"), why));
                }
                if self.replicas.is_some() {
                    errors.push(SpecError::new(file, at("replicas"), "applies to a command the host starts, not to an endpoint"));
                }
            }
            _ => {}
        }
        if let Err(e) = self.resources.validate() {
            errors.push(SpecError::new(file, at("resources"), e.to_string()));
        }
        if self.replicas == Some(0) {
            errors.push(SpecError::new(file, at("replicas"), "must be > 0"));
        }
        if !self.ready_path.starts_with('/') {
            errors.push(SpecError::new(file, at("ready_path"), format!("must start with '/', found {:?}", self.ready_path)));
        }
        if !(self.startup_timeout_s.is_finite() && self.startup_timeout_s > 0.0) {
            errors.push(SpecError::new(
                file,
                at("startup_timeout_s"),
                format!("must be a positive number of seconds, found {}", self.startup_timeout_s),
            ));
        }
        if let Some(v) = &self.api_key_env
            && (v.is_empty() || v.contains('='))
        {
            errors.push(SpecError::new(file, at("api_key_env"), format!("{v:?} is not an environment variable's name")));
        }
    }

    /// Whether the host starts this service (else it is an endpoint).
    pub fn is_started(&self) -> bool {
        self.command.is_some()
    }
}

/// An endpoint's base URL: scheme and authority, no trailing `/v1` or `/`.
pub fn base_url(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    let Some(rest) = rest else { return Err(format!("{url:?} is not an http:// or https:// URL")) };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{url:?} names no host"));
    }
    let trimmed = url.trim_end_matches('/');
    Ok(trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string())
}

/// Seconds to wait before restart `n` (1-based) of a replica that died: 1, 2, 4, … capped at
/// 30, so a server that crashes at once does not spin.
pub fn restart_delay_s(n: u32) -> f64 {
    (2f64.powi(n.saturating_sub(1).min(8) as i32)).min(30.0)
}

/// Seconds between readiness probes `elapsed_s` into a replica's start: often at first (a
/// small model is up in a second), then every 2 s.
pub fn probe_interval_s(elapsed_s: f64) -> f64 {
    if elapsed_s < 5.0 { 0.1 } else { 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ServiceSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn errors(s: &ServiceSpec) -> Vec<String> {
        let mut e = Vec::new();
        s.check("p.yaml", "llm", &mut e);
        e.into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_command_needs_its_port_placeholder() {
        let e = errors(&spec("command: vllm serve m --port 8000"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("services.llm.command") && e[0].contains("{port}"), "{e:?}");
        assert!(errors(&spec("command: vllm serve m --port {port}")).is_empty());
        assert_eq!(spec("command: [srv, '--port={port}']").command.unwrap().args(81), ["srv", "--port=81"]);
        let quoted = spec(r#"command: 'srv --template "a b" --x=''c d'' --port {port}'"#);
        assert!(errors(&quoted).is_empty());
        assert_eq!(quoted.command.unwrap().args(7), ["srv", "--template", "a b", "--x=c d", "--port", "7"]);
        assert!(errors(&spec(r#"command: 'srv "open --port {port}'"#))[0].contains("a quote does not close"));
    }

    #[test]
    fn command_or_endpoint_exactly_one() {
        assert!(errors(&spec("model: m"))[0].contains("needs a command"));
        assert!(errors(&spec("{command: 'a {port}', endpoint: 'http://x'}"))[0].contains("services.llm.endpoint"));
        assert!(errors(&spec("endpoint: ftp://x"))[0].contains("not an http"));
        assert!(errors(&spec("{endpoint: 'http://x:1', replicas: 2}"))[0].contains("services.llm.replicas"));
    }

    #[test]
    fn resources_and_limits_are_checked() {
        let e = errors(&spec("{command: 'a {port}', resources: {gpus: 1, gpu_memory_gb: 4}, startup_timeout_s: 0, replicas: 0}"));
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e.iter().any(|e| e.contains("services.llm.resources")));
        assert!(e.iter().any(|e| e.contains("services.llm.startup_timeout_s")));
        assert!(e.iter().any(|e| e.contains("services.llm.replicas")));
    }

    #[test]
    fn base_urls_lose_their_v1() {
        assert_eq!(base_url("http://127.0.0.1:8000/v1/").unwrap(), "http://127.0.0.1:8000");
        assert_eq!(base_url("https://api.example.com").unwrap(), "https://api.example.com");
        assert!(base_url("http:///v1").is_err());
    }

    #[test]
    fn restarts_back_off_to_thirty_seconds() {
        assert_eq!([1, 2, 3, 6, 7, 100].map(restart_delay_s), [1.0, 2.0, 4.0, 30.0, 30.0, 30.0]);
    }
}
