//! Answers kept on disk by what was asked, so a resumed or repeated run sends no request
//! twice: the key is SHA-256 over the model and the request's JSON (messages and sampling
//! parameters). One file per answer, written under a temporary name and renamed, so a killed
//! run leaves no torn entry.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::request::Reply;

/// A directory of answers.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    text: String,
    prompt_tokens: u64,
    completion_tokens: u64,
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a request body (which names its model).
    pub fn key(body: &serde_json::Value) -> String {
        hex::encode(Sha256::digest(body.to_string().as_bytes()))
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    pub fn get(&self, key: &str) -> Option<Reply> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        let e: Entry = serde_json::from_slice(&bytes).ok()?;
        Some(Reply { text: e.text, prompt_tokens: e.prompt_tokens, completion_tokens: e.completion_tokens, cached: true, attempts: 0 })
    }

    /// Keep an answer; a cache that cannot be written only costs a request next time.
    pub fn put(&self, key: &str, reply: &Reply) -> std::io::Result<()> {
        let path = self.path(key);
        let dir = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".{key}.tmp-{}", std::process::id()));
        let e = Entry { text: reply.text.clone(), prompt_tokens: reply.prompt_tokens, completion_tokens: reply.completion_tokens };
        std::fs::write(&tmp, serde_json::to_vec(&e).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, &path)
    }

    /// Answers kept.
    pub fn len(&self) -> usize {
        let Ok(dirs) = std::fs::read_dir(&self.dir) else { return 0 };
        dirs.flatten()
            .filter_map(|d| std::fs::read_dir(d.path()).ok())
            .map(|files| files.flatten().filter(|f| f.file_name().to_string_lossy().ends_with(".json")).count())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_comes_back_by_its_request() {
        let dir = std::env::temp_dir().join(format!("curator-llm-cache-{}", std::process::id()));
        let cache = Cache::new(&dir);
        let a = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let b = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "ho"}]});
        let (ka, kb) = (Cache::key(&a), Cache::key(&b));
        assert_ne!(ka, kb);
        assert!(cache.get(&ka).is_none());
        let r = Reply { text: "yes".into(), prompt_tokens: 3, completion_tokens: 1, cached: false, attempts: 1 };
        cache.put(&ka, &r).unwrap();
        let got = cache.get(&ka).unwrap();
        assert_eq!((got.text.as_str(), got.prompt_tokens, got.completion_tokens, got.cached), ("yes", 3, 1, true));
        assert!(cache.get(&kb).is_none());
        assert_eq!(cache.len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
