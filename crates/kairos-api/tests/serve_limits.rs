//! `kairos_api::serve` over real TCP on 127.0.0.1 (bounded: at most 2,000
//! connections, each test under a minute). A client that sends nothing, trickles its
//! headers, idles after an answer, or never sends its announced body is cut off by the
//! timeouts; at `max_connections` a new connection takes the slot of the connection idle
//! the longest, and is closed at once only when every connection is in a request; and
//! while 2,000 slow clients hold connections (or silent ones flood a limit of 500),
//! `/healthz`, `/readyz` and a real upsert still answer within a second.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use kairos_api::{serve, ServeLimits};
use kairos_testkit::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A server on a free loopback port; stops when the returned sender is dropped.
async fn start(router: axum::Router, limits: ServeLimits) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, router, limits, async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

fn limits(header_ms: u64, body_ms: u64, max_connections: usize) -> ServeLimits {
    ServeLimits {
        header_read_timeout: Duration::from_millis(header_ms),
        body_read_timeout: Duration::from_millis(body_ms),
        max_connections,
    }
}

/// Reads until the server closes the connection (or `limit` passes); answers what was
/// read and how long the server took to close.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Option<Duration>) {
    let started = Instant::now();
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    (text, closed.ok().map(|()| started.elapsed()))
}

/// One request on a new connection (`Connection: close`); answers the whole response.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let (answer, closed) = until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "no complete answer to {request:?}");
    answer
}

fn upsert_request(schedule_id: &str) -> String {
    let mut body = seed_body();
    body["schedule_id"] = schedule_id.into();
    let body = body.to_string();
    format!(
        "POST /schedules/upsert HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {DEPLOYER}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
const READYZ: &str = "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

#[tokio::test]
async fn silent_trickling_and_idle_connections_are_closed_after_the_header_timeout() {
    let db = TestDb::new().await;
    let (addr, _stop) = start(
        router(db.pool(), "2026-03-08T12:00:00Z"),
        limits(1000, 1000, 100),
    )
    .await;

    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let (_, closed) = until_closed(&mut silent, Duration::from_secs(5)).await;
    let closed = closed.expect("a silent connection is closed");
    assert!(
        closed >= Duration::from_millis(900),
        "closed too early: {closed:?}"
    );

    // A header line every 200 ms: always making progress, never finishing.
    let mut trickle = TcpStream::connect(addr).await.expect("connect");
    trickle
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .expect("write");
    let started = Instant::now();
    let mut closed = None;
    for n in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if trickle
            .write_all(format!("X-Slow-{n}: 1\r\n").as_bytes())
            .await
            .is_err()
        {
            closed = Some(started.elapsed());
            break;
        }
        let (_, done) = until_closed(&mut trickle, Duration::from_millis(1)).await;
        if done.is_some() {
            closed = Some(started.elapsed());
            break;
        }
    }
    let closed = closed.expect("a trickling connection is closed");
    assert!(closed < Duration::from_secs(3), "trickled for {closed:?}");

    // Kept alive after an answer, then idle.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let (answer, closed) = until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let closed = closed.expect("an idle kept-alive connection is closed");
    assert!(closed < Duration::from_secs(3), "idle for {closed:?}");
}

#[tokio::test]
async fn a_body_that_never_comes_is_answered_408_and_closed() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (addr, _stop) = start(
        router(pool.clone(), "2026-03-08T12:00:00Z"),
        limits(1000, 1000, 100),
    )
    .await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /schedules/upsert HTTP/1.1\r\nHost: localhost\r\n\
         Authorization: Bearer {DEPLOYER}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{\"schedule_id\":"
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let (answer, closed) = until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("http.body_read_timeout_ms"), "{answer}");
    let closed = closed.expect("closed after the 408");
    assert!(closed < Duration::from_secs(3), "{closed:?}");
    // Announcing more than max_body_bytes is answered at once, not after a wait.
    let started = Instant::now();
    let answer = exchange(
        addr,
        &format!(
            "POST /schedules/upsert HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Authorization: Bearer {DEPLOYER}\r\nContent-Type: application/json\r\n\
             Content-Length: 100000000\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(started.elapsed() < Duration::from_millis(900));
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

/// Reads one answer on a kept-alive connection: its head and its `Content-Length` body.
async fn read_answer(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer within 5 s")
            .expect("read");
        assert!(n > 0, "closed before the end of the answer");
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        let Some(head_end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..head_end]
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().expect("content-length"))
            })
            .unwrap_or(0);
        if answer.len() >= head_end + 4 + length {
            return text.into_owned();
        }
    }
}

/// Whether the server still holds `stream` open after `wait` (a closed one reads its end
/// at once).
async fn still_open(stream: &mut TcpStream, wait: Duration) -> bool {
    until_closed(stream, wait).await.1.is_none()
}

/// The head of a request that is in progress as soon as it is sent: an upsert announcing
/// a body of 1,000 bytes, of which it sends the first few.
fn slow_body_request() -> String {
    format!(
        "POST /schedules/upsert HTTP/1.1\r\nHost: localhost\r\n\
         Authorization: Bearer {DEPLOYER}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{\"schedule_id\":"
    )
}

#[tokio::test]
async fn at_the_limit_a_new_connection_takes_the_slot_of_the_longest_idle_one() {
    let db = TestDb::new().await;
    let (addr, _stop) = start(
        router(db.pool(), "2026-03-08T12:00:00Z"),
        limits(1000, 1000, 20),
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The first one asks for something and is kept alive: idle again from its answer, so
    // now the second one has been idle the longest.
    held[0]
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let answer = read_answer(&mut held[0]).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The second one trickles its headers: still waiting for them, so still idle.
    held[1]
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: loc")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(20)).await;

    let started = Instant::now();
    let answer = exchange(addr, HEALTHZ).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    let (answer, closed) = until_closed(&mut held[1], Duration::from_millis(500)).await;
    assert!(
        closed.is_some(),
        "the longest idle connection was not evicted"
    );
    assert!(answer.is_empty(), "{answer}");
    // The newer ones, and the first one (idle only since its answer), are still open.
    assert!(still_open(&mut held[0], Duration::from_millis(5)).await);
    for (n, stream) in held.iter_mut().enumerate().skip(2) {
        assert!(
            still_open(stream, Duration::from_millis(5)).await,
            "connection {n} was closed"
        );
    }
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_at_once_when_none_is_idle_and_slots_come_back() {
    let db = TestDb::new().await;
    let (addr, _stop) = start(
        router(db.pool(), "2026-03-08T12:00:00Z"),
        limits(1000, 1500, 20),
    )
    .await;
    // 19 connections in a request (headers sent, body coming slowly), then one idle.
    let mut busy = Vec::new();
    for _ in 0..19 {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(slow_body_request().as_bytes())
            .await
            .expect("write");
        busy.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The idle one, though the newest, is the one closed for a new connection.
    let answer = exchange(addr, HEALTHZ).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (answer, closed) = until_closed(&mut idle, Duration::from_millis(500)).await;
    assert!(closed.is_some(), "the idle connection was not evicted");
    assert!(answer.is_empty(), "{answer}");

    // A twentieth request in progress: every slot is busy.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(slow_body_request().as_bytes())
        .await
        .expect("write");
    busy.push(stream);
    for stream in &mut busy {
        stream.write_all(b"\"x").await.expect("a little more body");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut over = TcpStream::connect(addr).await.expect("the kernel accepts");
    let _ = over.write_all(HEALTHZ.as_bytes()).await;
    let (answer, closed) = until_closed(&mut over, Duration::from_secs(5)).await;
    let closed = closed.expect("closed");
    assert!(answer.is_empty(), "{answer}");
    assert!(closed < Duration::from_millis(500), "{closed:?}");

    // None of the requests was cut: each runs into the body timeout, and its slot comes back.
    for (n, stream) in busy.iter_mut().enumerate() {
        let (answer, closed) = until_closed(stream, Duration::from_secs(5)).await;
        assert!(closed.is_some(), "request {n} was not answered");
        assert!(answer.starts_with("HTTP/1.1 408"), "request {n}: {answer}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(exchange(addr, HEALTHZ).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_flood_of_silent_connections_does_not_keep_healthz_or_readyz_out() {
    let db = TestDb::new().await;
    // The production header timeout: without eviction the flood would hold every slot for
    // 10 s.
    let (addr, _stop) = start(
        router(db.pool(), "2026-03-08T12:00:00Z"),
        limits(10_000, 20_000, 500),
    )
    .await;
    let mut silent = Vec::with_capacity(2000);
    for _ in 0..2000 {
        silent.push(TcpStream::connect(addr).await.expect("connect"));
    }
    for _ in 0..3 {
        for request in [HEALTHZ, READYZ] {
            let started = Instant::now();
            let answer = exchange(addr, request).await;
            // The test router has no NATS: `/readyz` checks PostgreSQL only.
            assert!(answer.starts_with("HTTP/1.1 200"), "{request:?}: {answer}");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{request:?} took {:?}",
                started.elapsed()
            );
        }
    }
    // The flood pushed itself out, oldest first: 1,500 for the flood, 6 for the probes.
    let mut closed = 0;
    for stream in &mut silent {
        if !still_open(stream, Duration::from_millis(1)).await {
            closed += 1;
        }
    }
    assert!(
        (1500..=1506).contains(&closed),
        "{closed} silent connections closed"
    );
    assert!(still_open(silent.last_mut().expect("one"), Duration::from_millis(5)).await);
}

#[tokio::test]
async fn two_thousand_slow_clients_do_not_take_down_healthz_or_upserts() {
    let db = TestDb::new().await;
    let pool = db.pool();
    // The production header timeout, so the slow clients stay for the whole test.
    let (addr, _stop) = start(
        router(pool.clone(), "2026-03-08T12:00:00Z"),
        limits(10_000, 20_000, 4096),
    )
    .await;
    // Upserts name a stored workflow version.
    deploy_workflow(&router(pool.clone(), "2026-03-08T12:00:00Z"), "report", 3).await;
    let mut slow = Vec::with_capacity(2000);
    for n in 0..2000 {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let partial = if n % 2 == 0 {
            "GET /healthz HTTP/1.1\r\nHost: localh".to_string()
        } else {
            format!(
                "POST /schedules/upsert HTTP/1.1\r\nHost: localhost\r\n\
                 Authorization: Bearer {DEPLOYER}\r\nContent-Type: application/json\r\n\
                 Content-Length: 100000\r\n\r\n{{"
            )
        };
        stream.write_all(partial.as_bytes()).await.expect("write");
        slow.push(stream);
    }
    for round in 0..3 {
        let started = Instant::now();
        let answer = exchange(addr, HEALTHZ).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "healthz took {:?}",
            started.elapsed()
        );
        let started = Instant::now();
        let answer = exchange(addr, &upsert_request(&format!("flood-{round}"))).await;
        assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "upsert took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(table_counts(&pool).await.0, 3);
    drop(slow);
}
