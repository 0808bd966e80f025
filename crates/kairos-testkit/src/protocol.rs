//! Just enough of the NATS client protocol, over a blocking TCP connection, for the harness
//! to ask the JetStream API one question (`$JS.API.*` request, JSON answer). The crates
//! under test keep async-nats to themselves; the harness needs no async runtime.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `payload` to `subject` on the server at `127.0.0.1:port` and returns the JSON
/// answer, or why there is none within `timeout`.
pub(crate) fn request(
    port: u16,
    subject: &str,
    payload: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let stream = TcpStream::connect(("127.0.0.1", port)).map_err(|err| err.to_string())?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|err| err.to_string())?;
    let mut writer = stream.try_clone().map_err(|err| err.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    read_line(&mut reader, &mut line)?;
    if !line.starts_with("INFO ") {
        return Err(format!("greeted with {line:?}"));
    }
    // The subscription is sent before the request on the same connection, so its interest
    // reaches every routed server before the request does.
    let inbox = "_INBOX.kairos_testkit";
    let commands = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":false}}\r\n\
         SUB {inbox} 1\r\nPUB {subject} {inbox} {}\r\n{payload}\r\n",
        payload.len()
    );
    writer
        .write_all(commands.as_bytes())
        .map_err(|err| err.to_string())?;
    loop {
        read_line(&mut reader, &mut line)?;
        if line.starts_with("PING") {
            writer
                .write_all(b"PONG\r\n")
                .map_err(|err| err.to_string())?;
        } else if line.starts_with("-ERR") {
            return Err(line.trim().to_string());
        } else if line.starts_with("MSG ") {
            let size: usize = line
                .split_whitespace()
                .last()
                .and_then(|size| size.parse().ok())
                .ok_or_else(|| format!("bad MSG line {line:?}"))?;
            let mut body = vec![0; size + 2];
            reader
                .read_exact(&mut body)
                .map_err(|err| err.to_string())?;
            body.truncate(size);
            return serde_json::from_slice(&body).map_err(|err| err.to_string());
        }
    }
}

fn read_line(reader: &mut impl BufRead, line: &mut String) -> Result<(), String> {
    line.clear();
    match reader.read_line(line) {
        Ok(0) => Err("connection closed".into()),
        Ok(_) => Ok(()),
        Err(err) => Err(err.to_string()),
    }
}
