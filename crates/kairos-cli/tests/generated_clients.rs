//! Clients generated from the OpenAPI document that `kairos serve` serves at
//! `GET /openapi.json`, used as a new user in another language would use them, against a real
//! `kairos serve` (api, planner, dispatcher, status) with PostgreSQL and nats-server, in
//! `auth.mode = tokens` with a deployer, an executor and a reader token.
//!
//! - Python: `openapi-python-client` (the version in `tests/clients/python/requirements.txt`)
//!   generates a package from the served document, and `tests/clients/python/tour.py` walks an
//!   operator's day through it alone: deploy, dry-run, upsert, get with explain, list pages,
//!   preview, pause and resume, trigger, backfill, a schedule's runs page by page, cancel, run
//!   detail, a dead letter made by the executor and retried, calendars, refusals. Every client
//!   raises on a status the document does not declare, every answer is parsed into the
//!   generated models, and an answer field the document does not declare fails the tour. The
//!   tour first checks the generated code (one class per nullable enum, every operation
//!   taking a plain `Client`), and runs twice: with a bearer token per role, and with plain
//!   clients and no credentials against a second server in `auth.mode = none`.
//! - TypeScript: `openapi-typescript` turns the served document into `schema.d.ts`,
//!   `tests/clients/typescript/tour.ts` is type-checked against it (`strict`), compiled and
//!   run with node through `openapi-fetch`: deploy a workflow with a schedule, trigger a run.
//!
//! Generated code goes to a temporary directory. A missing tool fails the test, never skips
//! it: `scripts/test` installs the Python generator (pip) and the TypeScript packages
//! (`npm ci` in `tests/clients/typescript`).

use crate::support;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kairos_testkit::NatsServer;
use support::{sha256_hex, Served};

const DEPLOYER: &str = "client-deployer-secret";
const EXECUTOR: &str = "client-executor-secret";
const READER: &str = "client-reader-secret";

/// The longest any one subprocess (generator, compiler, tour) may take.
const STEP_LIMIT: Duration = Duration::from_secs(120);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `kairos serve` with every role a client's tour needs, and a token per role.
fn serve(db_tag: &str, dir: &Path) -> Served {
    let mut text = String::from("[auth]\nmode = \"tokens\"\n");
    for (name, role, token) in [
        ("compiler", "deployer", DEPLOYER),
        ("executor", "executor", EXECUTOR),
        ("viewer", "reader", READER),
    ] {
        text += &format!(
            "\n[[auth.tokens]]\nname = \"{name}\"\nrole = \"{role}\"\nsha256 = \"{}\"\n",
            sha256_hex(token)
        );
    }
    serve_with(db_tag, dir, &text)
}

/// `kairos serve` with every role a client's tour needs, with no authentication: every
/// route answers a call without credentials.
fn serve_open(db_tag: &str, dir: &Path) -> Served {
    serve_with(db_tag, dir, "[auth]\nmode = \"none\"\n")
}

fn serve_with(db_tag: &str, dir: &Path, config_text: &str) -> Served {
    let config = dir.join(format!("kairos-{db_tag}.toml"));
    std::fs::write(&config, config_text).expect("write config");
    let config = config.to_str().expect("utf8 path");
    let mut served = Served::launch_with(
        "api,planner,dispatcher,status",
        db_tag,
        NatsServer::start(),
        &["--config", config],
    );
    served.wait_for("/readyz", " 200 ");
    served
}

/// Runs `command` to its end (at most [`STEP_LIMIT`]) with its output in files under `dir`;
/// its output. Panics, printing that output, when it cannot start, runs too long or fails.
fn run(what: &str, command: &mut Command, dir: &Path) -> String {
    let log_path = dir.join(format!("{}.log", what.replace(' ', "-")));
    let log = File::create(&log_path).expect("create the log");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone the log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    let deadline = Instant::now() + STEP_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    match status {
        Some(status) if status.success() => output,
        Some(status) => panic!("{what} failed ({status}): {command:?}\n{output}"),
        None => panic!("{what} ran longer than {STEP_LIMIT:?}: {command:?}\n{output}"),
    }
}

/// The pinned version of a requirement in a requirements file.
fn pinned(requirements: &Path, package: &str) -> String {
    let text = std::fs::read_to_string(requirements).expect("read the requirements");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{package}==")))
        .unwrap_or_else(|| panic!("{} pins no {package}", requirements.display()))
        .trim()
        .to_string()
}

#[test]
fn python_client_generated_from_the_served_document_runs_the_operator_tour() {
    let root = repo_root();
    let client_dir = root.join("tests/clients/python");
    let want = pinned(
        &client_dir.join("requirements.txt"),
        "openapi-python-client",
    );
    let dir = tempfile::tempdir().expect("tempdir");

    let version = Command::new("python3")
        .args(["-m", "openapi_python_client", "--version"])
        .output()
        .expect("python3");
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(
        version.trim().ends_with(&format!("version: {want}")),
        "openapi-python-client {want} is needed (scripts/test installs it: python3 -m pip \
         install -r tests/clients/python/requirements.txt); found: {version:?}"
    );

    let served = serve("pyclient", dir.path());
    let url = format!("http://127.0.0.1:{}", served.port);

    let package = dir.path().join("kairos_client");
    run(
        "python client generation",
        Command::new("python3")
            .args(["-m", "openapi_python_client", "generate", "--url"])
            .arg(format!("{url}/openapi.json"))
            .args(["--meta", "none", "--fail-on-warning", "--output-path"])
            .arg(&package),
        dir.path(),
    );
    assert!(
        package
            .join("api/default/put_workflow_version.py")
            .is_file(),
        "the generator wrote no client into {}",
        package.display()
    );

    let output = run(
        "python tour",
        Command::new("python3")
            .arg(client_dir.join("tour.py"))
            .env("PYTHONPATH", dir.path())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("KAIROS_URL", &url)
            .env("KAIROS_DEPLOYER_TOKEN", DEPLOYER)
            .env("KAIROS_EXECUTOR_TOKEN", EXECUTOR)
            .env("KAIROS_READER_TOKEN", READER),
        dir.path(),
    );
    assert!(output.contains("tour complete"), "{output}");
    drop(served);

    // The same client, with no credentials, against a server that reads none.
    let open = serve_open("pyclient_open", dir.path());
    let output = run(
        "python tour without auth",
        Command::new("python3")
            .arg(client_dir.join("tour.py"))
            .env("PYTHONPATH", dir.path())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("KAIROS_URL", format!("http://127.0.0.1:{}", open.port))
            .env("KAIROS_AUTH_MODE", "none"),
        dir.path(),
    );
    assert!(output.contains("tour complete"), "{output}");
    assert!(output.contains("auth.mode = none"), "{output}");
}

#[test]
fn typescript_client_typed_from_the_served_document_deploys_and_triggers() {
    let client_dir = repo_root().join("tests/clients/typescript");
    let modules = client_dir.join("node_modules");
    for tool in ["openapi-typescript", "tsc"] {
        assert!(
            modules.join(".bin").join(tool).exists(),
            "{tool} is not installed in {}: run `npm ci` there (scripts/test does)",
            modules.display()
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("client");
    std::fs::create_dir(&work).expect("mkdir");
    for file in ["package.json", "tsconfig.json", "tour.ts"] {
        std::fs::copy(client_dir.join(file), work.join(file)).expect("copy the tour");
    }
    std::os::unix::fs::symlink(&modules, work.join("node_modules")).expect("link node_modules");

    let served = serve("tsclient", dir.path());
    let url = format!("http://127.0.0.1:{}", served.port);

    // Request fields with a `default` are optional to a caller (the server fills them in);
    // the generator's own default would type them as required.
    run(
        "typescript types generation",
        Command::new("node")
            .arg("node_modules/.bin/openapi-typescript")
            .arg(format!("{url}/openapi.json"))
            .args(["--default-non-nullable", "false", "-o", "schema.d.ts"])
            .current_dir(&work),
        dir.path(),
    );
    run(
        "typescript type check and compile",
        Command::new("node")
            .args(["node_modules/.bin/tsc", "-p", "tsconfig.json"])
            .current_dir(&work),
        dir.path(),
    );
    let output = run(
        "typescript tour",
        Command::new("node")
            .arg("out/tour.js")
            .env("KAIROS_URL", &url)
            .env("KAIROS_DEPLOYER_TOKEN", DEPLOYER)
            .env("KAIROS_READER_TOKEN", READER)
            .current_dir(&work),
        dir.path(),
    );
    assert!(output.contains("tour complete"), "{output}");
}
