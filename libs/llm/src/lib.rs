//! The one client of OpenAI-compatible model servers (vLLM, SGLang, llama.cpp's server, NIM,
//! a hosted API) that curator's stages use:
//!
//! - `client.rs`: chat completions over keep-alive HTTP/1.1, replicas taken in turn, retries
//!   with jittered backoff on 429/5xx/time-outs, a wait for a server that is restarting;
//! - `limit.rs`: the in-flight limit that keeps a server's batch full (grows while latency
//!   holds, halves on 429/503); `shared_limit.rs`: that limit kept by all of a service's
//!   worker processes together, in a file they map;
//! - `cache.rs`: responses on disk by (model, request), so a resumed run does not pay twice;
//! - `prompt.rs`: prompt templates over a document's fields;
//! - `presets.rs`: NeMo Curator's generation prompts (Nemotron-CC's five, multilingual QA,
//!   caption enhancement);
//! - `stage.rs` (feature `stage`): a native stage's client of the service its entry names.

mod cache;
mod client;
mod limit;
pub mod presets;
pub mod prompt;
mod request;
mod shared_limit;
#[cfg(feature = "stage")]
pub mod stage;

pub use cache::Cache;
pub use client::{Client, ClientOptions, Stats};
pub use limit::{Aimd, Limit};
pub use request::{Chat, Content, Message, Part, Reply, Url};
pub use shared_limit::SharedLimit;

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The server answered with an error status that retrying cannot mend (a 4xx but 429).
    #[error("the server refused the request ({status}): {message}")]
    Refused { status: u16, message: String },
    /// Retryable failures (429, 5xx, time-outs) lasted past the retries allowed.
    #[error("no answer after {attempts} attempts; last: {last}")]
    GaveUp { attempts: u32, last: String },
    /// No replica could be reached for the whole wait.
    #[error("no replica of the service answered for {waited_s:.0} s: {last}")]
    Unreachable { waited_s: f64, last: String },
    /// The server's answer is not a chat completion.
    #[error("the server's answer is not a chat completion: {0}")]
    BadAnswer(String),
    #[error("{0}")]
    Config(String),
}
