//! What a request asks and what its answer is: the types the client and the cache share.

use serde::{Deserialize, Serialize};

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

/// What a message says: text, or parts (text, images, a video) as the OpenAI API's content
/// array has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    /// An image: a URL, or `data:image/jpeg;base64,…`.
    ImageUrl {
        image_url: Url,
    },
    /// A video: a URL, or (vLLM) `data:video/jpeg;base64,F1,F2,…`, its frames as JPEGs.
    VideoUrl {
        video_url: Url,
    },
}

/// The `{"url": …}` object of an image or video part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Url {
    pub url: String,
}

impl Message {
    /// A text message.
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: Content::Text(content.into()) }
    }

    /// A message of parts (a video and a question about it).
    pub fn parts(role: &str, parts: Vec<Part>) -> Message {
        Message { role: role.into(), content: Content::Parts(parts) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_parts_serialise_as_the_openai_api_has_them() {
        let text = serde_json::to_value(Message::new("user", "hi")).unwrap();
        assert_eq!(text, serde_json::json!({"role": "user", "content": "hi"}));
        let parts = Message::parts(
            "user",
            vec![
                Part::VideoUrl { video_url: Url { url: "data:video/jpeg;base64,AA,BB".into() } },
                Part::ImageUrl { image_url: Url { url: "data:image/jpeg;base64,CC".into() } },
                Part::Text { text: "what?".into() },
            ],
        );
        let v = serde_json::to_value(&parts).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role": "user", "content": [
                {"type": "video_url", "video_url": {"url": "data:video/jpeg;base64,AA,BB"}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,CC"}},
                {"type": "text", "text": "what?"},
            ]})
        );
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), parts);
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
    /// More fields of the request, as the server names them (vLLM's `repetition_penalty`).
    pub extra: serde_json::Map<String, serde_json::Value>,
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
