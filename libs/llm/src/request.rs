//! What a request asks and what its answer is: the types the client and the cache share.

use serde::{Deserialize, Serialize};

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// What one request asks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chat {
    pub messages: Vec<Message>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
}

/// An answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// From the cache: no request was sent for it.
    pub cached: bool,
    /// Requests sent for it (0 when cached).
    pub attempts: u32,
}
