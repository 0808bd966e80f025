//! The check of `nats.replicas` against the cluster, made on connect before any stream is
//! created, and the mapping of the server's own refusals to the same error.
//!
//! What a client can see of the cluster is the `INFO` the server sends on connect: its
//! cluster name (none for a single server), whether JetStream is on, and `connect_urls`,
//! the client addresses of every server in the cluster that is up now (itself included).
//! A replica count above the number of servers up is still accepted when the launch stream
//! already has that many peers (a node is down, the stream keeps its quorum): otherwise an
//! instance could not start during a one-node outage that the streams themselves survive.
//! When the `INFO` overstates the JetStream servers (a cluster mixing servers without
//! JetStream), the server refuses the stream with "insufficient resources", which
//! [`create_error`] reports as the same [`Error::Replicas`].

use std::collections::HashSet;

use async_nats::jetstream::context::{CreateStreamError, CreateStreamErrorKind};
use async_nats::jetstream::ErrorCode;

use crate::{Error, NatsLauncher, Result};

/// Checks that the cluster behind `launcher` can hold `replicas` copies of each stream.
///
/// # Errors
/// [`Error::Replicas`] naming the count asked and what the server reported.
pub(crate) async fn check(launcher: &NatsLauncher) -> Result<()> {
    let asked = launcher.config().replicas;
    if asked <= 1 {
        return Ok(());
    }
    let info = launcher.jetstream().client().server_info();
    let too_small = |reported: String| Err(Error::Replicas { asked, reported });
    if !info.jetstream {
        return too_small(format!(
            "server {:?} does not have JetStream enabled",
            info.server_name
        ));
    }
    let Some(cluster) = info.cluster.as_deref() else {
        return too_small(format!(
            "server {:?} is a single server, not part of a cluster",
            info.server_name
        ));
    };
    let servers = servers_up(&info.connect_urls);
    if servers >= asked {
        return Ok(());
    }
    let peers = launch_stream_peers(launcher).await;
    if peers >= asked {
        tracing::warn!(
            cluster,
            servers,
            peers,
            replicas = asked,
            "nats cluster has servers down; the launch stream keeps its peers"
        );
        return Ok(());
    }
    too_small(format!("cluster {cluster:?} has {servers} server(s) up"))
}

/// Servers announced in `INFO`: distinct `connect_urls` (each server's client addresses,
/// the connected server's own included), at least the connected server itself. A server
/// listening on every interface announces each of its addresses, so this can overstate the
/// count, never understate it; the server's own refusal (see [`create_error`]) covers the
/// rest.
fn servers_up(connect_urls: &[String]) -> usize {
    let urls: HashSet<&str> = connect_urls.iter().map(String::as_str).collect();
    urls.len().max(1)
}

/// Peers (leader and followers, online or not) of the launch stream, 0 when it does not
/// exist yet or cannot be read.
async fn launch_stream_peers(launcher: &NatsLauncher) -> usize {
    let Ok(mut stream) = launcher
        .jetstream()
        .get_stream(&launcher.config().stream)
        .await
    else {
        return 0;
    };
    match stream.info().await {
        Ok(info) => info
            .cluster
            .as_ref()
            .map_or(0, |cluster| cluster.replicas.len() + 1),
        Err(_) => 0,
    }
}

/// The error of creating or updating stream `stream` with `asked` replicas: the server's
/// refusals of the replica count become [`Error::Replicas`], the rest [`Error::Stream`].
pub(crate) fn create_error(stream: &str, asked: usize, err: CreateStreamError) -> Error {
    if let CreateStreamErrorKind::JetStream(server) = err.kind() {
        let code = server.error_code();
        if code == ErrorCode::STREAM_REPLICAS_NOT_SUPPORTED
            || (asked > 1 && code == ErrorCode::INSUFFICIENT_RESOURCES)
        {
            return Error::Replicas {
                asked,
                reported: format!("creating stream {stream:?}: {server}"),
            };
        }
    }
    Error::Stream {
        stream: stream.to_string(),
        reason: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::servers_up;

    #[test]
    fn servers_are_counted_by_address() {
        let urls = |list: &[&str]| list.iter().map(|url| url.to_string()).collect::<Vec<_>>();
        assert_eq!(servers_up(&[]), 1);
        assert_eq!(servers_up(&urls(&["127.0.0.1:4222"])), 1);
        assert_eq!(
            servers_up(&urls(&["10.0.0.1:4222", "10.0.0.2:4222", "10.0.0.1:4222"])),
            2
        );
    }
}
