//! Chat completions against an OpenAI-compatible server, as many in flight as its
//! [`Limit`] allows, each retried until it has an answer or a reason it never will.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::limit::{Aimd, Limit};
use crate::request::{Chat, Reply};
use crate::{Cache, LlmError};

/// How a client reaches its service and how hard it tries.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Base URLs of the replicas (no `/v1`).
    pub urls: Vec<String>,
    pub api_key: Option<String>,
    /// `None`: the first model the server lists.
    pub model: Option<String>,
    /// Limit of one request, sent to answered.
    pub request_timeout: Duration,
    /// Retries of a request after a 429, a 5xx or a time-out.
    pub max_retries: u32,
    /// How long requests wait for a service none of whose replicas answers (one restarting).
    pub wait_for_server: Duration,
    pub initial_in_flight: usize,
    pub max_in_flight: usize,
    pub cache: Option<Cache>,
    /// The file the service's workers keep one in-flight limit in ([`crate::SharedLimit`]);
    /// none, or one that cannot be mapped: a limit of this client's own.
    pub limit_file: Option<std::path::PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            urls: Vec::new(),
            api_key: None,
            model: None,
            request_timeout: Duration::from_secs(600),
            max_retries: 5,
            wait_for_server: Duration::from_secs(900),
            initial_in_flight: 8,
            max_in_flight: 256,
            cache: None,
            limit_file: None,
        }
    }
}

/// What a client has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests sent, retries included.
    pub requests: u64,
    /// Requests sent again after a failure.
    pub retries: u64,
    /// 429 and 503 answers.
    pub throttled: u64,
    pub cache_hits: u64,
    /// Tokens of the answers the server gave this client (not of cached ones).
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    retries: AtomicU64,
    throttled: AtomicU64,
    cache_hits: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

/// A client of one service.
pub struct Client {
    agent: ureq::Agent,
    opts: ClientOptions,
    model: String,
    limit: Limit,
    next_replica: AtomicUsize,
    counters: Counters,
    jitter: Mutex<u64>,
}

/// What one attempt came to.
enum Attempt {
    Answer(Reply),
    /// 429 or 503: the server is full.
    Throttled(String),
    /// 5xx, a time-out, an answer cut short: try again.
    Retry(String),
    /// Nothing listens, or the connection died: the replica is down (maybe restarting).
    Unreachable(String),
    Refused(u16, String),
}

/// A chat's request body, and its cache key when the cache is on.
type Prepared = (serde_json::Value, Option<String>);

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}
#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}
#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<String>,
}
#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl Client {
    /// A client of the replicas at `opts.urls`. Without a model, asks the first replica
    /// that answers which it serves (waiting up to `wait_for_server`).
    pub fn connect(opts: ClientOptions) -> Result<Client, LlmError> {
        if opts.urls.is_empty() {
            return Err(LlmError::Config("the service has no replica".into()));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(opts.request_timeout))
            .timeout_connect(Some(Duration::from_secs(10)))
            .max_idle_connections(opts.max_in_flight * opts.urls.len() + 8)
            .max_idle_connections_per_host(opts.max_in_flight + 4)
            .build()
            .into();
        let policy = Aimd::new(opts.initial_in_flight, opts.max_in_flight);
        let limit = match opts.limit_file.as_deref().map(|f| crate::SharedLimit::open(f, opts.initial_in_flight, opts.max_in_flight)) {
            Some(Ok(shared)) => Limit::shared(policy, shared),
            _ => Limit::new(policy),
        };
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
        let mut client = Client {
            agent,
            model: opts.model.clone().unwrap_or_default(),
            opts,
            limit,
            next_replica: AtomicUsize::new(0),
            counters: Counters::default(),
            jitter: Mutex::new(seed),
        };
        if client.model.is_empty() {
            client.model = client.first_model()?;
        }
        Ok(client)
    }

    /// The model requests name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Requests allowed in flight now.
    pub fn in_flight_limit(&self) -> usize {
        self.limit.allowed()
    }

    /// Whether that limit is kept with the service's other workers.
    pub fn limit_is_shared(&self) -> bool {
        self.limit.is_shared()
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        Stats {
            requests: c.requests.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            throttled: c.throttled.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            prompt_tokens: c.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: c.completion_tokens.load(Ordering::Relaxed),
        }
    }

    fn first_model(&self) -> Result<String, LlmError> {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < self.opts.wait_for_server {
            let url = format!("{}/v1/models", self.replica());
            let mut req = self.agent.get(&url);
            if let Some(k) = &self.opts.api_key {
                req = req.header("Authorization", format!("Bearer {k}"));
            }
            match req.call() {
                Ok(mut r) if r.status().is_success() => {
                    let text = r.body_mut().read_to_string().map_err(|e| LlmError::BadAnswer(format!("{url}: {e}")))?;
                    let body: serde_json::Value =
                        serde_json::from_str(&text).map_err(|e| LlmError::BadAnswer(format!("{url}: {e}: {}", snippet(&text))))?;
                    return body["data"][0]["id"]
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| LlmError::BadAnswer(format!("{url} lists no model: {body}")));
                }
                Ok(r) => last = format!("{url}: HTTP {}", r.status().as_u16()),
                Err(e) => last = format!("{url}: {e}"),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(LlmError::Unreachable { waited_s: started.elapsed().as_secs_f64(), last })
    }

    fn replica(&self) -> &str {
        let k = self.next_replica.fetch_add(1, Ordering::Relaxed);
        &self.opts.urls[k % self.opts.urls.len()]
    }

    /// The request's body as the server gets it (and the cache's key is made from).
    pub fn body(&self, chat: &Chat) -> serde_json::Value {
        let mut body = serde_json::json!({"model": self.model, "messages": chat.messages});
        let o = body.as_object_mut().expect("an object");
        if let Some(v) = chat.max_tokens {
            o.insert("max_tokens".into(), v.into());
        }
        if let Some(v) = chat.temperature {
            o.insert("temperature".into(), v.into());
        }
        if let Some(v) = chat.top_p {
            o.insert("top_p".into(), v.into());
        }
        if let Some(v) = chat.seed {
            o.insert("seed".into(), v.into());
        }
        for (k, v) in &chat.extra {
            o.insert(k.clone(), v.clone());
        }
        body
    }

    /// One chat's answer: from the cache, or asked until answered or given up on.
    pub fn chat(&self, chat: &Chat) -> Result<Reply, LlmError> {
        self.ask(self.prepare(chat))
    }

    /// A chat's body and, with the cache on, its key: made once per chat.
    fn prepare(&self, chat: &Chat) -> Prepared {
        let body = self.body(chat);
        let key = self.opts.cache.as_ref().map(|_| Cache::key(&body));
        (body, key)
    }

    /// The answer to a prepared chat: from the cache, or asked.
    fn ask(&self, (body, key): Prepared) -> Result<Reply, LlmError> {
        if let (Some(cache), Some(key)) = (&self.opts.cache, &key)
            && let Some(hit) = cache.get(key)
        {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(hit);
        }
        let bytes = body.to_string().into_bytes();
        let mut failures = 0u32;
        let mut down_since: Option<Instant> = None;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            if attempts > 1 {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
            }
            let outcome = {
                let _permit = self.limit.acquire();
                let started = Instant::now();
                let a = self.attempt(&bytes);
                if let Attempt::Answer(_) = a {
                    self.limit.answered(started.elapsed().as_secs_f64());
                }
                a
            };
            let why = match outcome {
                Attempt::Answer(mut reply) => {
                    reply.attempts = attempts;
                    self.counters.prompt_tokens.fetch_add(reply.prompt_tokens, Ordering::Relaxed);
                    self.counters.completion_tokens.fetch_add(reply.completion_tokens, Ordering::Relaxed);
                    if let (Some(cache), Some(key)) = (&self.opts.cache, &key) {
                        let _ = cache.put(key, &reply);
                    }
                    return Ok(reply);
                }
                Attempt::Refused(status, message) => return Err(LlmError::Refused { status, message }),
                Attempt::Unreachable(why) => {
                    let since = *down_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.opts.wait_for_server {
                        return Err(LlmError::Unreachable { waited_s: since.elapsed().as_secs_f64(), last: why });
                    }
                    std::thread::sleep(self.backoff(failures.min(3)));
                    continue;
                }
                Attempt::Throttled(why) => {
                    self.counters.throttled.fetch_add(1, Ordering::Relaxed);
                    self.limit.overloaded();
                    why
                }
                Attempt::Retry(why) => why,
            };
            down_since = None;
            failures += 1;
            if failures > self.opts.max_retries {
                return Err(LlmError::GaveUp { attempts, last: why });
            }
            std::thread::sleep(self.backoff(failures));
        }
    }

    /// Every chat's answer, in order, with up to the in-flight limit of them asked at once.
    /// With the cache on, a chat identical to an earlier one of the same call is asked once
    /// and its answer shared (as the cache would answer it a call later); without the cache,
    /// every chat is asked (identical prompts may be meant to get different samples).
    pub fn chat_all(&self, chats: &[Chat]) -> Vec<Result<Reply, LlmError>> {
        let prepared: Vec<Prepared> = chats.iter().map(|c| self.prepare(c)).collect();
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let first_of: Vec<usize> = prepared
            .iter()
            .enumerate()
            .map(|(i, (_, key))| match key {
                Some(key) => *seen.entry(key.as_str()).or_insert(i),
                None => i,
            })
            .collect();
        drop(seen);
        let prepared: Vec<Mutex<Option<Prepared>>> = prepared.into_iter().map(|p| Mutex::new(Some(p))).collect();
        let asked: Vec<usize> = (0..chats.len()).filter(|&i| first_of[i] == i).collect();
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Reply, LlmError>>>> = chats.iter().map(|_| Mutex::new(None)).collect();
        let threads = self.opts.max_in_flight.min(asked.len()).max(1);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    while let Some(&i) = asked.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let Some(p) = prepared[i].lock().unwrap_or_else(|e| e.into_inner()).take() else { continue };
                        let r = self.ask(p);
                        *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    }
                });
            }
        });
        let mut out: Vec<Result<Reply, LlmError>> = Vec::with_capacity(chats.len());
        for (i, m) in results.into_iter().enumerate() {
            let r = match m.into_inner().unwrap_or_else(|e| e.into_inner()) {
                Some(r) => r,
                None => match out.get(first_of[i]) {
                    Some(Ok(first)) => {
                        self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                        Ok(Reply { cached: true, attempts: 0, ..first.clone() })
                    }
                    Some(Err(e)) => Err(e.clone()),
                    None => Err(LlmError::Config("not asked".into())),
                },
            };
            out.push(r);
        }
        out
    }

    fn attempt(&self, body: &[u8]) -> Attempt {
        let url = format!("{}/v1/chat/completions", self.replica());
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let mut req = self.agent.post(&url).header("Content-Type", "application/json");
        if let Some(k) = &self.opts.api_key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => return classify(&url, e),
        };
        let status = resp.status().as_u16();
        let text = match resp.body_mut().with_config().limit(64 << 20).read_to_string() {
            Ok(t) => t,
            Err(e) => return classify(&url, e),
        };
        match status {
            200..=299 => match parse(&text) {
                Ok(r) => Attempt::Answer(r),
                Err(e) => Attempt::Retry(format!("{url}: {e}")),
            },
            429 | 503 => Attempt::Throttled(format!("{url}: HTTP {status}: {}", snippet(&text))),
            408 | 500..=599 => Attempt::Retry(format!("{url}: HTTP {status}: {}", snippet(&text))),
            _ => Attempt::Refused(status, format!("{url}: {}", snippet(&text))),
        }
    }

    /// Exponential backoff from 0.5 s, capped at 30 s, with full jitter over its second half.
    fn backoff(&self, failures: u32) -> Duration {
        let cap = (0.5 * 2f64.powi(failures.min(8) as i32)).min(30.0);
        let mut x = self.jitter.lock().unwrap_or_else(|e| e.into_inner());
        // xorshift64: a spread of waits, not randomness anyone relies on.
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        let u = (*x >> 11) as f64 / (1u64 << 53) as f64;
        Duration::from_secs_f64(cap * (0.5 + 0.5 * u))
    }
}

fn classify(url: &str, e: ureq::Error) -> Attempt {
    use std::io::ErrorKind as K;
    let why = format!("{url}: {e}");
    match &e {
        ureq::Error::Io(io)
            if matches!(io.kind(), K::ConnectionRefused | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof) =>
        {
            Attempt::Unreachable(why)
        }
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => Attempt::Unreachable(why),
        _ => Attempt::Retry(why),
    }
}

fn parse(text: &str) -> Result<Reply, String> {
    let c: Completion = serde_json::from_str(text).map_err(|e| format!("{e}: {}", snippet(text)))?;
    let choice = c.choices.into_iter().next().ok_or_else(|| format!("no choices: {}", snippet(text)))?;
    let usage = c.usage.unwrap_or(Usage { prompt_tokens: 0, completion_tokens: 0 });
    Ok(Reply {
        text: choice.message.content.unwrap_or_default(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        cached: false,
        attempts: 1,
    })
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}
