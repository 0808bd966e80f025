//! [`NatsSupercluster`]: one `nats-server -js` per region on loopback, each its own cluster
//! named like the region, joined by gateways into one supercluster with one JetStream (the
//! layout of docs/regions.md). A test kills and restarts whole regions.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::{log_tail, remove_ports_files, spawn, stop_child, wait_for_ports_file};

/// Whole starts tried before giving up (a port taken between choosing and binding it fails
/// one start).
const START_ATTEMPTS: usize = 5;
/// How long a started supercluster may take to join its gateways and elect a meta leader.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one JetStream API request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// One server per region, killed and cleaned up on drop.
#[derive(Debug)]
pub struct NatsSupercluster {
    regions: Vec<Region>,
}

#[derive(Debug)]
struct Region {
    name: String,
    client_port: u16,
    cluster_port: u16,
    gateway_port: u16,
    store: tempfile::TempDir,
    /// Config, ports file and log.
    scratch: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsSupercluster {
    /// Starts one server per name in `regions` and returns once a stream can be placed in
    /// every region.
    ///
    /// # Panics
    /// When no attempt brings up a ready supercluster.
    pub fn start(regions: &[&str]) -> NatsSupercluster {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match NatsSupercluster::start_once(regions) {
                Ok(supercluster) => return supercluster,
                Err(reason) => failures.push(reason),
            }
        }
        panic!(
            "nats supercluster {regions:?} did not start in {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    fn start_once(names: &[&str]) -> Result<NatsSupercluster, String> {
        let ports = crate::cluster::free_ports(names.len() * 2)?;
        let mut supercluster = NatsSupercluster {
            regions: Vec::new(),
        };
        for (index, name) in names.iter().enumerate() {
            supercluster.regions.push(Region {
                name: (*name).to_string(),
                client_port: 0,
                cluster_port: ports[2 * index],
                gateway_port: ports[2 * index + 1],
                store: tempfile::tempdir().map_err(|err| err.to_string())?,
                scratch: tempfile::tempdir().map_err(|err| err.to_string())?,
                child: None,
            });
        }
        for index in 0..names.len() {
            let mut child = supercluster.spawn_region(index, None)?;
            let region = &supercluster.regions[index];
            let port =
                wait_for_ports_file(&mut child, region.scratch.path()).map_err(|reason| {
                    stop_child(&mut child);
                    format!(
                        "region {}: {reason}\n{}",
                        region.name,
                        log_tail(region.scratch.path())
                    )
                })?;
            supercluster.regions[index].client_port = port;
            supercluster.regions[index].child = Some(child);
        }
        supercluster.wait_until_ready()?;
        Ok(supercluster)
    }

    /// `nats://127.0.0.1:<client port>` of the server of region `name`.
    ///
    /// # Panics
    /// When there is no such region.
    pub fn url(&self, name: &str) -> String {
        format!("nats://127.0.0.1:{}", self.region(name).client_port)
    }

    /// Kills the server of region `name` with SIGKILL, as a lost region; its store stays.
    pub fn kill(&mut self, name: &str) {
        let index = self.index(name);
        if let Some(mut child) = self.regions[index].child.take() {
            stop_child(&mut child);
        }
    }

    /// Starts the server of region `name` again with the same ports and store.
    ///
    /// # Panics
    /// When it does not come up.
    pub fn restart(&mut self, name: &str) {
        self.kill(name);
        let index = self.index(name);
        let scratch = self.regions[index].scratch.path().to_path_buf();
        remove_ports_files(&scratch);
        let port = self.regions[index].client_port;
        let mut child = self
            .spawn_region(index, Some(port))
            .unwrap_or_else(|reason| panic!("region {name} did not restart: {reason}"));
        if let Err(reason) = wait_for_ports_file(&mut child, &scratch) {
            stop_child(&mut child);
            panic!(
                "region {name} did not restart: {reason}\n{}",
                log_tail(&scratch)
            );
        }
        self.regions[index].child = Some(child);
        crate::wait_until_connectable(port);
    }

    fn index(&self, name: &str) -> usize {
        self.regions
            .iter()
            .position(|region| region.name == name)
            .unwrap_or_else(|| panic!("no region {name:?} in this supercluster"))
    }

    fn region(&self, name: &str) -> &Region {
        &self.regions[self.index(name)]
    }

    /// Writes region `index`'s config (its cluster and a gateway to every other region)
    /// and spawns its server. A clustered JetStream server refuses to start without routes,
    /// so a region of one server routes to itself (a route to oneself is dropped).
    fn spawn_region(&self, index: usize, client_port: Option<u16>) -> Result<Child, String> {
        let region = &self.regions[index];
        let gateways: Vec<String> = self
            .regions
            .iter()
            .filter(|other| other.name != region.name)
            .map(|other| {
                format!(
                    "{{name: \"{}\", url: \"nats://127.0.0.1:{}\"}}",
                    other.name, other.gateway_port
                )
            })
            .collect();
        let config = format!(
            "server_name: \"{name}\"\n\
             cluster {{\n  name: \"{name}\"\n  listen: \"127.0.0.1:{cluster}\"\n  \
             routes: [\"nats://127.0.0.1:{cluster}\"]\n}}\n\
             gateway {{\n  name: \"{name}\"\n  listen: \"127.0.0.1:{gateway}\"\n  \
             gateways: [{gateways}]\n}}\n",
            name = region.name,
            cluster = region.cluster_port,
            gateway = region.gateway_port,
            gateways = gateways.join(", "),
        );
        let path = region.scratch.path().join("nats.conf");
        std::fs::write(&path, config).map_err(|err| err.to_string())?;
        let extra = ["-c".to_owned(), path.display().to_string()];
        Ok(spawn(
            client_port,
            region.store.path(),
            region.scratch.path(),
            &extra,
        ))
    }

    /// Polls until a probe stream can be placed in every region (a meta leader, and every
    /// region's server known to it), deleting each probe.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let port = self.regions[0].client_port;
        for region in &self.regions {
            let name = format!("KAIROS_TESTKIT_PROBE_{}", region.name.to_uppercase());
            let probe = format!(
                "{{\"name\":\"{name}\",\"subjects\":[\"kairos_testkit.probe.{}\"],\
                 \"storage\":\"memory\",\"placement\":{{\"cluster\":\"{}\"}}}}",
                region.name, region.name
            );
            let mut last = String::from("no answer yet");
            loop {
                if Instant::now() > deadline {
                    return Err(format!(
                        "no stream could be placed in region {} within {READY_TIMEOUT:?}: \
                         {last}\n{}",
                        region.name,
                        log_tail(region.scratch.path())
                    ));
                }
                let create = format!("$JS.API.STREAM.CREATE.{name}");
                match crate::protocol::request(port, &create, &probe, REQUEST_TIMEOUT) {
                    Ok(answer) if answer.get("error").is_none() => {
                        let delete = format!("$JS.API.STREAM.DELETE.{name}");
                        crate::protocol::request(port, &delete, "", REQUEST_TIMEOUT)?;
                        break;
                    }
                    Ok(answer) => last = answer.to_string(),
                    Err(reason) => last = reason,
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Ok(())
    }
}

impl Drop for NatsSupercluster {
    fn drop(&mut self) {
        for region in &mut self.regions {
            if let Some(mut child) = region.child.take() {
                stop_child(&mut child);
            }
        }
    }
}
