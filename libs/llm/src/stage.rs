//! A stage's client of the model server its pipeline entry names (`service: NAME`): the
//! set-up every stage that asks a served model shares (`llm_generate`, `caption`). Behind
//! the `stage` feature: it reads the worker's context from the SDK.

use curator_sdk::prelude::*;

use crate::{Cache, Client, ClientOptions};

/// How a stage's requests are sent: its parameters of the same names.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Seconds one request may take.
    pub request_timeout_s: f64,
    /// Retries of a request after a 429, a 5xx or a time-out.
    pub max_retries: u32,
    /// Seconds requests wait for a service none of whose replicas answers.
    pub wait_for_server_s: f64,
    /// Requests in flight at first.
    pub initial_in_flight: usize,
    /// Requests in flight at most, per worker.
    pub max_in_flight: usize,
    /// Keep answers in the host's cache directory (`llm/` in it).
    pub cache: bool,
}

/// The client of the service named in `stage`'s entry; `None` for planning's throw-away
/// instance (which checks parameters and leaves the server alone). A stage without a
/// service, or whose `api_key_env` is unset, is a parameter error naming what to fix.
pub fn connect(stage: &str, s: &Settings) -> Result<Option<Client>, StageError> {
    let ctx = curator_sdk::native::context();
    let Some(service) = ctx.service else {
        return Err(StageError::InvalidParams(format!(
            "{stage} needs a model server: declare one under services: and name it in this stage's entry (service: NAME)"
        )));
    };
    if ctx.check_only {
        return Ok(None);
    }
    let api_key = match &service.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            StageError::InvalidParams(format!("service {:?}: the environment variable {var} (api_key_env) is not set", service.name))
        })?),
        None => None,
    };
    let cache = s.cache.then(|| ctx.cache_dir.as_ref().map(|d| Cache::new(std::path::Path::new(d).join("llm")))).flatten();
    let opts = ClientOptions {
        urls: service.urls.clone(),
        api_key,
        model: service.model.clone(),
        request_timeout: std::time::Duration::from_secs_f64(s.request_timeout_s),
        max_retries: s.max_retries,
        wait_for_server: std::time::Duration::from_secs_f64(s.wait_for_server_s),
        initial_in_flight: s.initial_in_flight.min(s.max_in_flight),
        max_in_flight: s.max_in_flight,
        cache,
        limit_file: service.limit_file.as_ref().map(std::path::PathBuf::from),
    };
    let client = Client::connect(opts).map_err(|e| StageError::Failed(format!("service {:?}: {e}", service.name)))?;
    let limit =
        if client.limit_is_shared() { "one in-flight limit with the service's other workers" } else { "an in-flight limit of its own" };
    log(Level::Info, &format!("{stage}: model {:?} at {}, {limit}", client.model(), service.urls.join(", ")));
    Ok(Some(client))
}

/// The client's tally, for the run's log when a worker's stage is dropped.
pub fn log_stats(stage: &str, client: &Client) {
    let s = client.stats();
    log(
        Level::Info,
        &format!(
            "{stage}: {} request(s) ({} retried, {} throttled), {} answer(s) from the cache; {} prompt and {} completion token(s) served",
            s.requests, s.retries, s.throttled, s.cache_hits, s.prompt_tokens, s.completion_tokens
        ),
    );
}
