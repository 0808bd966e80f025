//! The nats-server harness itself: parallel starts never share a port, a restart comes back
//! on the same URL, and a restart onto a port someone else took fails loudly.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use kairos_testkit::NatsServer;

/// Connects to `url` and reads the server's greeting: a NATS server speaks first with `INFO`.
fn assert_speaks_nats(url: &str) {
    let address = url.strip_prefix("nats://").expect("nats:// url");
    let stream = TcpStream::connect(address).unwrap_or_else(|err| panic!("connect {url}: {err}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut greeting = String::new();
    BufReader::new(stream)
        .read_line(&mut greeting)
        .unwrap_or_else(|err| panic!("read INFO from {url}: {err}"));
    assert!(greeting.starts_with("INFO "), "{url} greeted {greeting:?}");
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("port in url")
}

#[test]
fn concurrent_starts_get_distinct_ports_that_all_answer() {
    let threads: Vec<_> = (0..16)
        .map(|_| std::thread::spawn(NatsServer::start))
        .collect();
    let servers: Vec<NatsServer> = threads
        .into_iter()
        .map(|thread| thread.join().expect("start a server"))
        .collect();
    let ports: HashSet<u16> = servers
        .iter()
        .map(|server| port_of(&server.url()))
        .collect();
    assert_eq!(ports.len(), servers.len(), "ports: {ports:?}");
    for server in &servers {
        assert_speaks_nats(&server.url());
    }
}

#[test]
fn stop_then_restart_keeps_the_url() {
    let mut server = NatsServer::start();
    let url = server.url();
    assert_speaks_nats(&url);
    server.stop();
    assert!(TcpStream::connect(url.strip_prefix("nats://").unwrap()).is_err());
    server.restart();
    assert_eq!(server.url(), url);
    assert_speaks_nats(&url);
}

#[test]
fn restart_on_a_port_taken_meanwhile_panics() {
    let mut server = NatsServer::start();
    let port = port_of(&server.url());
    server.stop();
    let _squatter = TcpListener::bind(("127.0.0.1", port)).expect("take the freed port");
    let restarted = catch_unwind(AssertUnwindSafe(|| server.restart()));
    let message = restarted.expect_err("restart must not succeed on a taken port");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| message.downcast_ref::<&str>().map(|text| text.to_string()))
        .unwrap_or_default();
    assert!(message.contains(&port.to_string()), "{message}");
}
