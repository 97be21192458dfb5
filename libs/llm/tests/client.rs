//! The client against a scripted server on loopback: each request gets the next scripted
//! answer (a status and a body, or a dropped connection), so retries, give-ups, re-sends and
//! the in-flight limit are checked answer by answer. (The end-to-end tests run it against a
//! real server: `tests/e2e/services.rs`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use curator_llm::{Cache, Chat, Client, ClientOptions, LlmError, Message};

#[derive(Clone)]
enum Answer {
    Status(u16, String),
    Drop,
}

fn ok(text: &str) -> Answer {
    Answer::Status(
        200,
        serde_json::json!({"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
            .to_string(),
    )
}

/// A server answering from `script` in order (then 200s); returns its URL and the request
/// bodies it saw.
fn server(script: Vec<Answer>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let script = Arc::new(Mutex::new(script.into_iter().collect::<std::collections::VecDeque<_>>()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (script, seen) = (script.clone(), seen2.clone());
            std::thread::spawn(move || serve(conn, &script, &seen));
        }
    });
    (url, seen)
}

/// The next request on a keep-alive connection: its path and body (`None`: closed).
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut len = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        if h.trim().is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    Some((path, body))
}

fn serve(conn: TcpStream, script: &Mutex<std::collections::VecDeque<Answer>>, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    while let Some((path, body)) = read_request(&mut reader) {
        let answer = if path == "/v1/models" {
            Answer::Status(200, r#"{"data": [{"id": "served-model"}]}"#.into())
        } else {
            seen.lock().unwrap().push(String::from_utf8(body).unwrap());
            script.lock().unwrap().pop_front().unwrap_or_else(|| ok("fine"))
        };
        match answer {
            Answer::Drop => return,
            Answer::Status(status, body) => {
                let head = format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
                if conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(body.as_bytes())).is_err() {
                    return;
                }
            }
        }
    }
}

fn opts(url: &str) -> ClientOptions {
    ClientOptions { urls: vec![url.to_string()], max_retries: 3, wait_for_server: Duration::from_millis(1500), ..Default::default() }
}

fn chat(s: &str) -> Chat {
    Chat { messages: vec![Message::new("user", s)], max_tokens: Some(5), ..Default::default() }
}

#[test]
fn throttled_requests_are_retried_and_counted_and_the_limit_halves() {
    let (url, seen) = server(vec![Answer::Status(429, "slow down".into()), Answer::Status(503, "full".into()), ok("at last")]);
    let client = Client::connect(ClientOptions { initial_in_flight: 16, ..opts(&url) }).unwrap();
    assert_eq!(client.model(), "served-model", "the model the server lists");
    let r = client.chat(&chat("hi")).unwrap();
    assert_eq!((r.text.as_str(), r.attempts, r.prompt_tokens, r.completion_tokens), ("at last", 3, 7, 3));
    let s = client.stats();
    assert_eq!((s.requests, s.retries, s.throttled), (3, 2, 2));
    assert!(client.in_flight_limit() <= 4, "16 halved twice (and grown a little): {}", client.in_flight_limit());
    let body: serde_json::Value = serde_json::from_str(&seen.lock().unwrap()[0]).unwrap();
    assert_eq!(body["model"], "served-model");
    assert_eq!(body["max_tokens"], 5);
}

#[test]
fn a_refusal_is_final_and_server_errors_give_up_after_the_retries() {
    let (url, seen) = server(vec![Answer::Status(400, "{\"error\": \"prompt too long\"}".into())]);
    let client = Client::connect(opts(&url)).unwrap();
    match client.chat(&chat("a")) {
        Err(LlmError::Refused { status: 400, message }) => assert!(message.contains("prompt too long"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1, "no retry of a 400");

    let (url, seen) = server(vec![Answer::Status(500, "boom".into()); 10]);
    let client = Client::connect(opts(&url)).unwrap();
    match client.chat(&chat("b")) {
        Err(LlmError::GaveUp { attempts: 4, last }) => assert!(last.contains("HTTP 500: boom"), "{last}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 4, "the first try and max_retries = 3");
}

#[test]
fn a_dropped_connection_is_sent_again() {
    let (url, seen) = server(vec![Answer::Drop, Answer::Drop, ok("after the drops")]);
    let client = Client::connect(opts(&url)).unwrap();
    let r = client.chat(&chat("x")).unwrap();
    assert_eq!(r.text, "after the drops");
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[test]
fn a_service_nothing_answers_for_is_unreachable_after_the_wait() {
    let port = TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let o = ClientOptions { model: Some("m".into()), ..opts(&url) };
    let client = Client::connect(o).unwrap();
    let started = std::time::Instant::now();
    match client.chat(&chat("x")) {
        Err(LlmError::Unreachable { waited_s, .. }) => assert!(waited_s >= 1.5, "{waited_s}"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn answers_come_back_in_order_and_the_cache_answers_a_second_time() {
    let (url, seen) = server(Vec::new());
    let dir = std::env::temp_dir().join(format!("curator-llm-client-{}", std::process::id()));
    let client = Client::connect(ClientOptions { cache: Some(Cache::new(&dir)), ..opts(&url) }).unwrap();
    let chats: Vec<Chat> = (0..40).map(|i| chat(&format!("doc {i}"))).collect();
    let first = client.chat_all(&chats);
    assert!(first.iter().all(|r| r.as_ref().is_ok_and(|r| !r.cached)));
    let asked: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|b| serde_json::from_str::<serde_json::Value>(b).unwrap()["messages"][0]["content"].to_string())
        .collect();
    assert_eq!(asked.len(), 40);
    let again = client.chat_all(&chats);
    assert!(again.iter().all(|r| r.as_ref().is_ok_and(|r| r.cached && r.prompt_tokens == 7)));
    assert_eq!(seen.lock().unwrap().len(), 40, "nothing asked twice");
    assert_eq!(client.stats().cache_hits, 40);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn identical_chats_of_one_call_are_asked_once_with_the_cache_and_each_without() {
    let (url, seen) = server(Vec::new());
    let dir = std::env::temp_dir().join(format!("curator-llm-client-same-{}", std::process::id()));
    let chats: Vec<Chat> = ["a", "b", "a", "a", "c", "b"].iter().map(|s| chat(s)).collect();
    let client = Client::connect(ClientOptions { cache: Some(Cache::new(&dir)), ..opts(&url) }).unwrap();
    let replies = client.chat_all(&chats);
    assert_eq!(seen.lock().unwrap().len(), 3, "a, b and c asked once each");
    let cached: Vec<bool> = replies.iter().map(|r| r.as_ref().unwrap().cached).collect();
    assert_eq!(cached, [false, false, true, true, false, true]);
    assert_eq!(client.stats().cache_hits, 3);
    std::fs::remove_dir_all(dir).unwrap();
    // Without the cache every chat is asked: the same prompt may be meant to sample again.
    let client = Client::connect(opts(&url)).unwrap();
    client.chat_all(&chats);
    assert_eq!(seen.lock().unwrap().len(), 3 + 6);
}

/// A server that answers every chat after `delay`, counting the most requests it held at once.
fn slow_server(delay: Duration) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let most2 = most.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (now, most) = (now.clone(), most2.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                while let Some((path, _)) = read_request(&mut reader) {
                    let body = if path == "/v1/models" {
                        r#"{"data": [{"id": "m"}]}"#.to_string()
                    } else {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(delay);
                        now.fetch_sub(1, Ordering::SeqCst);
                        serde_json::json!({"choices": [{"message": {"content": "ok"}}]}).to_string()
                    };
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
                    if conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(body.as_bytes())).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, most)
}

/// The most requests two clients (two workers of one stage) held at the server at once.
fn two_workers_at_most(limit_file: Option<std::path::PathBuf>) -> usize {
    let (url, most) = slow_server(Duration::from_millis(30));
    let clients: Vec<Arc<Client>> = (0..2)
        .map(|_| {
            Arc::new(
                Client::connect(ClientOptions { initial_in_flight: 2, max_in_flight: 2, limit_file: limit_file.clone(), ..opts(&url) })
                    .unwrap(),
            )
        })
        .collect();
    assert!(clients.iter().all(|c| c.limit_is_shared() == limit_file.is_some()));
    let chats: Vec<Chat> = (0..12).map(|i| chat(&format!("q{i}"))).collect();
    let workers: Vec<_> = clients
        .iter()
        .map(|c| {
            let (c, chats) = (c.clone(), chats.clone());
            std::thread::spawn(move || c.chat_all(&chats).into_iter().all(|r| r.is_ok()))
        })
        .collect();
    assert!(workers.into_iter().all(|w| w.join().unwrap()));
    most.load(std::sync::atomic::Ordering::SeqCst)
}

#[test]
fn workers_sharing_a_limit_file_keep_one_limit_together() {
    let dir = tempfile::tempdir().unwrap();
    // Each its own: two of two in flight each, four at once.
    assert!(two_workers_at_most(None) >= 3);
    // One limit of two for both (a moment's overshoot of one request per other worker allowed).
    assert!(two_workers_at_most(Some(dir.path().join("svc.limit"))) <= 3);
}
