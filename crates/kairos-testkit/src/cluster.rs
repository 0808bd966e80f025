//! [`NatsCluster`]: `nats-server -js` processes on loopback, routed into one JetStream
//! cluster, each with its own client port, cluster port and store; a test kills and
//! restarts single nodes.

use std::net::TcpListener;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::{
    log_tail, remove_ports_files, spawn, stop_child, wait_for_ports_file, wait_until_connectable,
};

/// Whole-cluster starts tried before giving up (a cluster port taken between choosing and
/// binding it fails one start).
const START_ATTEMPTS: usize = 5;
/// How long a started cluster may take to elect a JetStream meta leader and place a
/// replicated stream.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one JetStream API request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A cluster of `nats-server -js` processes named `n0`, `n1`, … owned by one test; every
/// node is killed and its store removed on drop.
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    client_port: u16,
    cluster_port: u16,
    store: tempfile::TempDir,
    /// Ports file and log.
    scratch: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsCluster {
    /// Starts `size` nodes and returns once the cluster has a JetStream meta leader and can
    /// place a stream with `size` replicas.
    ///
    /// Client ports are chosen by each server (`-p -1`, read back from its ports file, as
    /// [`crate::NatsServer`] does). Cluster ports must be known to every node before any
    /// starts (each is in the others' `--routes`), so they are found free by binding and
    /// releasing; if another process takes one meanwhile, that node exits and the whole
    /// start is tried again.
    ///
    /// # Panics
    /// When no attempt brings up a ready cluster.
    pub fn start(size: usize) -> NatsCluster {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match NatsCluster::start_once(size) {
                Ok(cluster) => return cluster,
                Err(reason) => failures.push(reason),
            }
        }
        panic!(
            "nats cluster of {size} did not start in {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    fn start_once(size: usize) -> Result<NatsCluster, String> {
        let cluster_ports = free_ports(size)?;
        let mut cluster = NatsCluster { nodes: Vec::new() };
        for cluster_port in &cluster_ports {
            cluster.nodes.push(Node {
                client_port: 0,
                cluster_port: *cluster_port,
                store: tempfile::tempdir().map_err(|err| err.to_string())?,
                scratch: tempfile::tempdir().map_err(|err| err.to_string())?,
                child: None,
            });
        }
        for index in 0..size {
            let mut child = cluster.spawn_node(index, None);
            let node = &cluster.nodes[index];
            let port = wait_for_ports_file(&mut child, node.scratch.path()).map_err(|reason| {
                stop_child(&mut child);
                format!("node n{index}: {reason}\n{}", log_tail(node.scratch.path()))
            })?;
            cluster.nodes[index].client_port = port;
            cluster.nodes[index].child = Some(child);
        }
        // Dropping `cluster` on failure kills every node started.
        cluster.wait_until_ready()?;
        Ok(cluster)
    }

    /// The seed list of every node, comma-separated, as async-nats accepts it.
    pub fn urls(&self) -> String {
        (0..self.nodes.len())
            .map(|index| self.url(index))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `nats://127.0.0.1:<client port>` of node `index`.
    pub fn url(&self, index: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[index].client_port)
    }

    /// How many nodes the cluster has (running or not).
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// Kills node `index` with SIGKILL, as a crash would; its store stays.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.nodes[index].child.take() {
            stop_child(&mut child);
        }
    }

    /// Starts node `index` again with the same name, ports and store.
    ///
    /// # Panics
    /// When it does not come up within 10 s (e.g. a port was taken while it was down).
    pub fn restart(&mut self, index: usize) {
        self.kill(index);
        let scratch = self.nodes[index].scratch.path().to_path_buf();
        remove_ports_files(&scratch);
        let port = self.nodes[index].client_port;
        let mut child = self.spawn_node(index, Some(port));
        if let Err(reason) = wait_for_ports_file(&mut child, &scratch) {
            stop_child(&mut child);
            panic!(
                "node n{index} did not restart: {reason}\n{}",
                log_tail(&scratch)
            );
        }
        self.nodes[index].child = Some(child);
        wait_until_connectable(port);
    }

    /// The index of the node leading JetStream stream `stream` (`n<index>`), asked of the
    /// running nodes in turn; `None` while the stream has no leader (an election) or no
    /// running node answers.
    pub fn stream_leader(&self, stream: &str) -> Option<usize> {
        let subject = format!("$JS.API.STREAM.INFO.{stream}");
        self.running().find_map(|index| {
            let port = self.nodes[index].client_port;
            let info = crate::protocol::request(port, &subject, "", REQUEST_TIMEOUT).ok()?;
            let leader = info.pointer("/cluster/leader")?.as_str()?;
            leader.strip_prefix('n')?.parse().ok()
        })
    }

    fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|index| self.nodes[*index].child.is_some())
    }

    fn spawn_node(&self, index: usize, client_port: Option<u16>) -> Child {
        let node = &self.nodes[index];
        let routes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != index)
            .map(|(_, other)| format!("nats://127.0.0.1:{}", other.cluster_port))
            .collect();
        let extra = [
            "--name".to_owned(),
            format!("n{index}"),
            "--cluster_name".to_owned(),
            "kairos-test".to_owned(),
            "--cluster".to_owned(),
            format!("nats://127.0.0.1:{}", node.cluster_port),
            "--routes".to_owned(),
            routes.join(","),
        ];
        spawn(client_port, node.store.path(), node.scratch.path(), &extra)
    }

    /// Polls until a probe stream with one replica per node can be created (which needs a
    /// meta leader and every node known to it as a JetStream peer), then deletes it.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let replicas = self.nodes.len();
        let probe = format!(
            "{{\"name\":\"KAIROS_TESTKIT_PROBE\",\"subjects\":[\"kairos_testkit.probe\"],\
             \"storage\":\"memory\",\"num_replicas\":{replicas}}}"
        );
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            if let Some(exited) = self.exited_node() {
                return Err(format!(
                    "node n{exited} exited (cluster port taken?)\n{}",
                    log_tail(self.nodes[exited].scratch.path())
                ));
            }
            let port = self.nodes[0].client_port;
            let subject = "$JS.API.STREAM.CREATE.KAIROS_TESTKIT_PROBE";
            match crate::protocol::request(port, subject, &probe, REQUEST_TIMEOUT) {
                Ok(answer) if answer.get("error").is_none() => {
                    let delete = "$JS.API.STREAM.DELETE.KAIROS_TESTKIT_PROBE";
                    crate::protocol::request(port, delete, "", REQUEST_TIMEOUT)?;
                    return Ok(());
                }
                Ok(answer) => last = answer.to_string(),
                Err(reason) => last = reason,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "no replicated stream could be placed within {READY_TIMEOUT:?}: {last}\n{}",
            log_tail(self.nodes[0].scratch.path())
        ))
    }

    fn exited_node(&mut self) -> Option<usize> {
        self.nodes.iter_mut().position(|node| {
            node.child
                .as_mut()
                .is_some_and(|child| child.try_wait().ok().flatten().is_some())
        })
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for index in 0..self.nodes.len() {
            self.kill(index);
        }
    }
}

/// `count` loopback ports that were free a moment ago (bound, then released together, so
/// they are distinct).
pub(crate) fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("no free port: {err}"))?;
    listeners
        .iter()
        .map(|listener| {
            listener
                .local_addr()
                .map(|address| address.port())
                .map_err(|err| err.to_string())
        })
        .collect()
}
