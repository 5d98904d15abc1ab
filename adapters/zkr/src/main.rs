//! `zkr`: ZooKeeper coordination from the shell, in the spirit of `etcdctl lock` and
//! `etcdctl elect`: run a command while holding a lock or leading an election (its
//! fencing token in `ZK_FENCING_TOKEN`, the command stopped if the hold is lost), pass a
//! double barrier, use a queue or a counter, see what the recipe nodes under a path
//! mean (`inspect`), and read, write, create, delete, list and watch nodes. Built on
//! `zk-recipes-blocking`; Unix only (process groups and signals). See `docs/zkr.md`.

#![deny(unsafe_code)]

mod duration;
mod inspect;
mod serve;
mod show;
mod signals;
mod supervise;
mod sys;
mod zk;

use std::io::{self, Read};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};

use duration::show as dur;
use show::{json_line, line, out};
use signals::Signals;
use zk::{Cause, Hold, NewNode, Settings, Zk, ZkError};

/// Exit code: the node (or leader) asked for does not exist.
const EXIT_NOT_FOUND: u8 = 1;
/// Exit code: the node exists already (`create`), its version is not `--version`, or
/// it has children (`delete` without `-r`).
const EXIT_CONFLICT: u8 = 2;
/// Exit code: `--timeout` passed before the lock, leadership, barrier or item came.
const EXIT_TIMED_OUT: u8 = 124;
/// Exit code: zkr failed (usage, connection, ZooKeeper error), or the hold was lost
/// while CMD ran and CMD still exited 0.
const EXIT_FAILED: u8 = 125;

/// ZooKeeper coordination from the shell: run a command under a lock or as a leader,
/// barriers, queues, counters, what the recipe nodes under a path mean, nodes.
///
/// Exit codes: CMD's own status for `lock`, `elect` and `barrier -- CMD` (128+N if a
/// signal N ended it); 1 node or leader not found; 2 node exists, version differs or
/// node not empty; 124 --timeout passed; 125 zkr failed (or the hold was lost and CMD
/// still exited 0); 126/127 CMD not runnable/not found. See docs/zkr.md.
#[derive(Parser, Debug)]
#[command(name = "zkr", version)]
struct Cli {
    /// ZooKeeper servers, HOST:PORT[,HOST:PORT...], optionally followed by a /chroot.
    #[arg(
        long,
        short = 's',
        env = "ZK_SERVERS",
        default_value = "127.0.0.1:2181",
        global = true
    )]
    server: String,

    /// Session timeout asked of the server (the library's default is 30s). A holder
    /// whose connection is down this long takes its hold as lost, and a zkr killed
    /// with -9 keeps its lock this long. The server clamps it to 2-20 ticks (4s-40s
    /// with its default tickTime of 2s). See docs/sessions.md.
    #[arg(long, default_value = "10s", value_parser = duration::parse, global = true)]
    session_timeout: Duration,

    /// How long to keep trying the servers for a first session (the library's default
    /// is 30s, for services; at a shell an unreachable server should show sooner).
    #[arg(long, default_value = "15s", value_parser = duration::parse, global = true)]
    connect_timeout: Duration,

    /// TLS to the servers' secure client port, trusting the CA certificates in this PEM
    /// file (each host is checked against its name or IP address as given).
    #[arg(long, env = "ZK_TLS_CA", global = true)]
    tls_ca: Option<std::path::PathBuf>,

    /// Client certificate (PEM, chain) for mutual TLS; needs --tls-ca and --tls-key.
    #[arg(long, env = "ZK_TLS_CERT", global = true, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, env = "ZK_TLS_KEY", global = true, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,

    /// SASL DIGEST-MD5 user (a user of the servers' JAAS `Server` section); needs
    /// --sasl-password-file.
    #[arg(
        long,
        env = "ZK_SASL_USER",
        global = true,
        requires = "sasl_password_file"
    )]
    sasl_user: Option<String>,

    /// File holding the SASL user's password (its first line; kept out of the command
    /// line and the environment).
    #[arg(
        long,
        env = "ZK_SASL_PASSWORD_FILE",
        global = true,
        requires = "sasl_user"
    )]
    sasl_password_file: Option<std::path::PathBuf>,

    /// Accept a read-only server (a server cut off from its quorum, run with
    /// read-only mode enabled): reads work, writes fail with "server is read-only".
    #[arg(long, env = "ZK_READ_ONLY", global = true)]
    read_only: bool,

    /// Follow the ensemble's membership (`/zookeeper/config`, ZooKeeper 3.5+): servers
    /// added by a reconfiguration are used, and the session moves off a removed one.
    #[arg(long, env = "ZK_TRACK_ENSEMBLE", global = true)]
    track_ensemble: bool,

    #[command(subcommand)]
    command: Cmd,
}

/// How a command run under a hold is stopped.
#[derive(Args, Debug)]
struct Stopping {
    /// Time CMD gets between SIGTERM and SIGKILL once the hold is lost.
    #[arg(long, default_value = "5s", value_parser = duration::parse)]
    grace: Duration,

    /// Take a dropped connection as a loss at once (Curator's advice), instead of
    /// waiting until the session is known to be over (at most the session timeout).
    #[arg(long)]
    stop_on_suspend: bool,
}

/// How `get` prints the data (default: as stored, then a newline).
#[derive(Args, Debug)]
#[group(multiple = false)]
struct Encoding {
    /// Exactly the bytes stored, nothing added (`zkr get --raw A | zkr set B` copies).
    #[arg(long)]
    raw: bool,
    /// Lower-case hex, then a newline.
    #[arg(long)]
    hex: bool,
    /// Standard base64, then a newline.
    #[arg(long)]
    base64: bool,
    /// One JSON object: path, data (text, or null if not UTF-8), data_base64, stat.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Runs CMD while holding the lock PATH (fencing token in ZK_FENCING_TOKEN).
    ///
    /// The exclusive lock PATH is Curator InterProcessMutex compatible. CMD runs in its
    /// own process group with the lock's fencing token in ZK_FENCING_TOKEN. If the lock
    /// is lost (session expired or closed, lock node deleted), CMD's process group gets
    /// SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM and SIGHUP sent to zkr are
    /// passed on to the group; if zkr itself dies, CMD gets SIGTERM (Linux). Exits with
    /// CMD's status (128+N if signal N ended it); 124 if --timeout passed first; 125 if
    /// the lock was lost and CMD still exited 0.
    Lock {
        /// The lock's directory.
        path: String,
        /// Give up waiting for the lock after this long (exit 124).
        #[arg(long, value_parser = duration::parse)]
        timeout: Option<Duration>,
        #[command(flatten)]
        stopping: Stopping,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Runs CMD while leader of the election PATH (fencing token in ZK_FENCING_TOKEN).
    ///
    /// Stands for election in PATH as ID (Curator LeaderLatch compatible), waits to
    /// lead, then runs CMD as `lock` does: same fencing token, loss rule and exit codes.
    /// The candidacy is withdrawn when CMD exits.
    Elect {
        /// The election's directory.
        path: String,
        /// Our participant id (what `zkr leader` prints).
        #[arg(long)]
        id: String,
        /// Give up waiting for leadership after this long (exit 124).
        #[arg(long, value_parser = duration::parse)]
        timeout: Option<Duration>,
        #[command(flatten)]
        stopping: Stopping,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Runs CMD while the service instance NAME at HOST:PORT is registered.
    ///
    /// Curator ServiceDiscovery compatible: the instance is the ephemeral node
    /// BASE/NAME/ID holding the instance's JSON, re-registered after a session expiry,
    /// unregistered when CMD exits. The node's creation zxid is in ZK_FENCING_TOKEN.
    /// Same signals, loss rule and exit codes as `lock`.
    Register {
        /// The service's name.
        name: String,
        /// The instance's address, HOST:PORT.
        address: String,
        /// The discovery base path.
        #[arg(long, default_value = "/services")]
        base: String,
        /// The instance id (default: a fresh one).
        #[arg(long)]
        id: Option<String>,
        /// The instance's payload, one JSON value.
        #[arg(long)]
        payload: Option<String>,
        #[command(flatten)]
        stopping: Stopping,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Prints the instances of service NAME, one per line: ID ADDRESS:PORT.
    ///
    /// Reads a Curator ServiceDiscovery base path. With --watch, then prints each
    /// change (`added`, `updated`, `removed`) until interrupted.
    Discover {
        /// The service's name.
        name: String,
        /// The discovery base path.
        #[arg(long, default_value = "/services")]
        base: String,
        /// Each instance as its JSON (Curator's format), one per line.
        #[arg(long)]
        json: bool,
        /// Follow the changes until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// Prints the id of the current leader of the election PATH (exit 1 if none).
    Leader {
        /// The election's directory.
        path: String,
    },
    /// Enters the double barrier PATH, runs CMD if given, leaves.
    ///
    /// Double barrier for COUNT participants (Curator DistributedDoubleBarrier
    /// compatible): entering waits until COUNT have entered; leaving waits until all
    /// have left. Exits with CMD's status (0 without CMD); 124 if --timeout passed.
    Barrier {
        /// The barrier's directory.
        path: String,
        /// How many participants the barrier waits for.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
        /// Give up entering (or leaving) after this long (exit 124).
        #[arg(long, value_parser = duration::parse)]
        timeout: Option<Duration>,
        /// Time CMD gets between a forwarded signal and SIGKILL.
        #[arg(long, default_value = "5s", value_parser = duration::parse)]
        grace: Duration,
        /// The command and its arguments (after `--`).
        #[arg(last = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// A FIFO queue (Curator SimpleDistributedQueue compatible).
    Queue {
        #[command(subcommand)]
        op: QueueOp,
    },
    /// Prints the shared counter PATH; `add N` adds N first.
    ///
    /// A missing node counts as 0. Increments are never lost or counted twice, whatever
    /// the number of writers. An add that would leave the counter's range is refused
    /// (nothing written, exit 125).
    Counter {
        /// The counter's node.
        path: String,
        /// 4-byte counter (Curator SharedCount) instead of 8-byte (DistributedAtomicLong).
        #[arg(long)]
        int32: bool,
        #[command(subcommand)]
        op: Option<CounterOp>,
    },
    /// Shows what the recipe nodes at or below PATH mean.
    ///
    /// For each lock, read/write lock, election, semaphore, queue and double barrier
    /// found (ours, Curator's, kazoo's): who holds, leads or has entered, since when,
    /// with which session and fencing token, and who waits, in order; a queue's length,
    /// oldest item and claims. Reads only.
    Inspect {
        /// The path (a recipe's directory, or any node above some).
        path: String,
        /// One JSON object per look.
        #[arg(long)]
        json: bool,
        /// Look again on every change below PATH, until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// Prints the data of node PATH: as stored, then a newline.
    Get {
        /// The node.
        path: String,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Sets the data of node PATH to DATA or, without it, to standard input exactly.
    ///
    /// Without --version, creates the node and missing parents if needed.
    Set {
        /// The node.
        path: String,
        /// The data; standard input, byte for byte, if absent.
        data: Option<String>,
        /// Only if the node's data version is this (exit 2 otherwise; 1 if missing).
        #[arg(long, allow_negative_numbers = true)]
        version: Option<i32>,
    },
    /// Creates node PATH holding DATA (empty if absent); prints its path.
    ///
    /// Exit 2 if it exists already. An ephemeral node is refused: it would end with
    /// zkr's session, as zkr exits.
    Create {
        /// The node (for --sequential, the prefix of its name).
        path: String,
        /// The data (empty if absent).
        data: Option<String>,
        /// Sequential: the server appends a 10-digit number (the path is printed).
        /// (zkCli's `-s`; here `-s` is --server.)
        #[arg(long)]
        sequential: bool,
        /// A container: the server deletes it some time after its last child goes.
        #[arg(long, short = 'c', conflicts_with_all = ["sequential", "ttl"])]
        container: bool,
        /// A TTL node: the server deletes it once unchanged and childless this long
        /// (the server must run with -Dzookeeper.extendedTypesEnabled=true).
        #[arg(long, value_parser = duration::parse)]
        ttl: Option<Duration>,
        /// Create missing parents too (persistent).
        #[arg(long, short = 'p')]
        parents: bool,
        /// Refused: see docs/zkr.md (use `zkr lock`/`elect` to hold something while a
        /// command runs).
        #[arg(long, short = 'e')]
        ephemeral: bool,
    },
    /// Deletes node PATH (`rm` too); -r: and everything below it.
    #[command(visible_alias = "rm")]
    Delete {
        /// The node.
        path: String,
        /// Only if the node's data version is this (exit 2 otherwise).
        #[arg(long, allow_negative_numbers = true, conflicts_with = "recursive")]
        version: Option<i32>,
        /// Everything below PATH first (exit 2 without it if PATH has children).
        #[arg(long, short = 'r')]
        recursive: bool,
    },
    /// Prints the Stat of node PATH (zkCli's names; times in UTC).
    Stat {
        /// The node.
        path: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Lists the children of PATH, one per line, sorted.
    Ls {
        /// The node.
        path: String,
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Prints PATH and every node below it, one full path per line, depth first.
    Tree {
        /// The root node.
        path: String,
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Prints each change of PATH until interrupted.
    ///
    /// One line per change: `changed`, `created`, `deleted` or `children`, then the
    /// path. Exits 125 if the session ends.
    Watch {
        /// The node.
        path: String,
        /// Every node below PATH too.
        #[arg(long, short)]
        recursive: bool,
    },
    /// Runs a ZooKeeper-compatible server for development and tests, in the foreground.
    ///
    /// The embedded server (zk-recipes-server): one node, in memory, everything gone when
    /// zkr stops (SIGINT, SIGTERM, SIGHUP: exit 0); never for production. Prints its
    /// connect string (127.0.0.1:2181 by default).
    Serve(serve::ServeArgs),
}

#[derive(Subcommand, Debug)]
enum QueueOp {
    /// Puts DATA (or standard input) into the queue PATH; prints the item's name.
    Put {
        /// The queue's directory.
        path: String,
        /// The item; read from standard input if absent.
        data: Option<String>,
    },
    /// Takes the next item of the queue PATH and prints it; waits for one.
    ///
    /// The item is deleted as it is taken (at most once).
    Take {
        /// The queue's directory.
        path: String,
        /// Give up waiting after this long (exit 124).
        #[arg(long, value_parser = duration::parse)]
        timeout: Option<Duration>,
    },
}

#[derive(Subcommand, Debug)]
enum CounterOp {
    /// Adds N (negative subtracts) and prints the value after it.
    Add {
        /// The amount.
        #[arg(allow_negative_numbers = true)]
        n: i64,
    },
}

impl Cmd {
    /// Runs a command (CMD) under zkr's supervision.
    fn runs_cmd(&self) -> bool {
        matches!(
            self,
            Cmd::Lock { .. } | Cmd::Elect { .. } | Cmd::Barrier { .. } | Cmd::Register { .. }
        )
    }

    /// The path the command works on.
    fn path(&self) -> &str {
        match self {
            Cmd::Lock { path, .. }
            | Cmd::Elect { path, .. }
            | Cmd::Leader { path }
            | Cmd::Barrier { path, .. }
            | Cmd::Queue {
                op: QueueOp::Put { path, .. } | QueueOp::Take { path, .. },
            }
            | Cmd::Counter { path, .. }
            | Cmd::Inspect { path, .. }
            | Cmd::Get { path, .. }
            | Cmd::Set { path, .. }
            | Cmd::Create { path, .. }
            | Cmd::Delete { path, .. }
            | Cmd::Stat { path, .. }
            | Cmd::Ls { path, .. }
            | Cmd::Tree { path, .. }
            | Cmd::Watch { path, .. } => path,
            Cmd::Register { base, .. } | Cmd::Discover { base, .. } => base,
            // Connects nowhere: `run` serves it before any check.
            Cmd::Serve(_) => "/",
        }
    }

    /// What can be refused before connecting: the path, and arguments that cannot work.
    fn check(&self) -> Result<(), ZkError> {
        zk::check_path(self.path())?;
        match self {
            Cmd::Create {
                ephemeral: true, ..
            } => Err(ZkError::failed(
                "create --ephemeral: an ephemeral node ends with zkr's session, that is when \
                 zkr exits; to keep a node while a command runs use `zkr lock` or `zkr elect` \
                 (see docs/zkr.md)",
            )),
            Cmd::Delete {
                path,
                recursive: true,
                ..
            } if path == "/" => Err(ZkError::failed("delete -r: refusing to delete /")),
            Cmd::Counter {
                int32: true,
                op: Some(CounterOp::Add { n }),
                path,
            } if i32::try_from(*n).is_err() => Err(ZkError::failed(format!(
                "counter {path}: {n} does not fit a 4-byte counter (--int32)"
            ))),
            _ => Ok(()),
        }
    }
}

fn signal_exit(sig: i32) -> u8 {
    u8::try_from(128 + sig).unwrap_or(EXIT_FAILED)
}

fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("zkr: {message}");
    EXIT_FAILED
}

fn zk_fail(e: ZkError) -> u8 {
    eprintln!("zkr: {e}");
    match e.cause {
        Cause::NotFound => EXIT_NOT_FOUND,
        Cause::Conflict => EXIT_CONFLICT,
        Cause::Failed => EXIT_FAILED,
    }
}

fn data_or_stdin(data: Option<String>) -> Result<Vec<u8>, u8> {
    match data {
        Some(d) => Ok(d.into_bytes()),
        None => {
            let mut buf = Vec::new();
            io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| fail(format!("standard input: {e}")))?;
            Ok(buf)
        }
    }
}

/// For a usage error of a command that runs CMD given without `--`: where CMD goes.
fn dash_dash_hint(e: &clap::Error) -> Option<String> {
    use clap::error::ErrorKind;
    if !matches!(
        e.kind(),
        ErrorKind::UnknownArgument | ErrorKind::MissingRequiredArgument
    ) {
        return None;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--") {
        return None;
    }
    let sub = args
        .iter()
        .find(|a| matches!(a.as_str(), "lock" | "elect" | "barrier"))?;
    let form = match sub.as_str() {
        "lock" => "zkr lock PATH [OPTIONS] -- CMD [ARGS...]",
        "elect" => "zkr elect PATH --id ID [OPTIONS] -- CMD [ARGS...]",
        _ => "zkr barrier PATH --count N [OPTIONS] -- CMD [ARGS...]",
    };
    Some(format!(
        "hint: the command to run goes after `--`: {form} (e.g. zkr {sub} /locks/job -- echo hi)"
    ))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            if let Some(hint) = dash_dash_hint(&e) {
                eprintln!("\n{hint}");
            }
            return ExitCode::from(if e.use_stderr() { EXIT_FAILED } else { 0 });
        }
    };
    ExitCode::from(run(cli).unwrap_or_else(|code| code))
}

fn run(cli: Cli) -> Result<u8, u8> {
    if let Cmd::Serve(args) = &cli.command {
        return serve::run(args);
    }
    cli.command.check().map_err(zk_fail)?;
    // Before any thread starts (the session's I/O thread inherits the mask).
    let signals = if cli.command.runs_cmd() {
        Some(Signals::take_over().map_err(fail)?)
    } else {
        None
    };
    let zk = zk::connect(&settings(&cli)).map_err(zk_fail)?;
    if let Some(s) = &signals {
        s.attach(&zk);
    }
    let code = run_command(&zk, cli.command, signals);
    zk.close();
    Ok(code.unwrap_or_else(|code| code))
}

/// The session settings the flags give.
fn settings(cli: &Cli) -> Settings<'_> {
    Settings {
        servers: &cli.server,
        session_timeout: cli.session_timeout,
        connect_timeout: cli.connect_timeout,
        tls_ca: cli.tls_ca.as_deref(),
        tls_client: cli.tls_cert.as_deref().zip(cli.tls_key.as_deref()),
        sasl: cli
            .sasl_user
            .as_deref()
            .zip(cli.sasl_password_file.as_deref()),
        read_only: cli.read_only,
        track_ensemble: cli.track_ensemble,
    }
}

/// Runs `command` on the connected session: the ones that run a command while they
/// hold something (with the signals taken over), or a simple one.
fn run_command(zk: &Zk, command: Cmd, signals: Option<Signals>) -> Result<u8, u8> {
    match (command, signals) {
        (
            Cmd::Lock {
                path,
                timeout,
                stopping,
                cmd,
            },
            Some(signals),
        ) => {
            let hold = zk.lock(&path, timeout, stopping.stop_on_suspend);
            let waited = format!("waiting for the lock {path}");
            held(&signals, hold, &cmd, &stopping, (timeout, &waited))
        }
        (
            Cmd::Elect {
                path,
                id,
                timeout,
                stopping,
                cmd,
            },
            Some(signals),
        ) => {
            let hold = zk.elect(&path, &id, timeout, stopping.stop_on_suspend);
            let waited = format!("waiting to lead the election {path} as {id:?}");
            held(&signals, hold, &cmd, &stopping, (timeout, &waited))
        }
        (
            Cmd::Barrier {
                path,
                count,
                timeout,
                grace,
                cmd,
            },
            Some(signals),
        ) => barrier(zk, &signals, &path, count, timeout, grace, &cmd),
        (
            Cmd::Register {
                name,
                address,
                base,
                id,
                payload,
                stopping,
                cmd,
            },
            Some(signals),
        ) => match instance(&name, &address, id, payload) {
            Ok(i) => {
                let hold = zk.register(&base, &i, stopping.stop_on_suspend).map(Some);
                held(&signals, hold, &cmd, &stopping, (None, ""))
            }
            Err(e) => Err(zk_fail(e)),
        },
        (command, _) => simple(zk, command),
    }
}

/// The message of a `--timeout` that passed.
fn timed_out(after: Option<Duration>, what: &str) -> u8 {
    let after = after
        .map(|t| format!(" after {}", dur(t)))
        .unwrap_or_default();
    eprintln!("zkr: timed out{after} {what} (--timeout)");
    EXIT_TIMED_OUT
}

/// Runs CMD under a lock or leadership, as the loss rule says.
fn held(
    signals: &Signals,
    hold: Result<Option<Box<dyn Hold>>, ZkError>,
    cmd: &[String],
    stopping: &Stopping,
    (timeout, waited): (Option<Duration>, &str),
) -> Result<u8, u8> {
    let hold = match hold {
        Ok(hold) => hold,
        Err(e) => return Err(signals.interrupted().unwrap_or_else(|| zk_fail(e))),
    };
    let Some(mut hold) = hold else {
        return Ok(timed_out(timeout, waited));
    };
    if let Err(code) = signals.start() {
        let _ = hold.release();
        return Err(code);
    }
    if let Some(why) = hold.wait_loss(Duration::ZERO) {
        // Gone between acquiring and starting CMD: do not start it.
        signals.stop();
        eprintln!("zkr: lost before CMD started: {why}");
        return Ok(EXIT_FAILED);
    }
    let env = [("ZK_FENCING_TOKEN", hold.token().to_string())];
    let ended = supervise::run(
        cmd,
        &env,
        Some(&mut *hold),
        stopping.grace,
        &signals.rx,
        &signals.taken,
    );
    signals.stop();
    if let Err(e) = hold.release() {
        // The session's end removes our node all the same.
        eprintln!("zkr: {e}");
    }
    let ended = ended.map_err(|e| {
        eprintln!("zkr: {}", e.message);
        e.code
    })?;
    let code = supervise::exit_code(ended.status);
    Ok(match ended.lost {
        Some(_) if code == 0 => EXIT_FAILED, // a run that lost its hold never reads as success
        _ => code,
    })
}

fn barrier(
    zk: &Zk,
    signals: &Signals,
    path: &str,
    count: u32,
    timeout: Option<Duration>,
    grace: Duration,
    cmd: &[String],
) -> Result<u8, u8> {
    let failed = |e: ZkError| signals.interrupted().unwrap_or_else(|| zk_fail(e));
    let mut seat = zk.barrier(path, count);
    if !seat.enter(timeout).map_err(failed)? {
        let what = format!("entering barrier {path}: fewer than {count} participants came");
        return Ok(timed_out(timeout, &what));
    }
    let mut code = 0;
    if !cmd.is_empty() {
        signals.start()?;
        let ended = supervise::run(cmd, &[], None, grace, &signals.rx, &signals.taken);
        signals.stop();
        code = match ended {
            Ok(ended) => supervise::exit_code(ended.status),
            Err(e) => {
                eprintln!("zkr: {}", e.message);
                e.code
            }
        };
    }
    match seat.leave(timeout) {
        Ok(true) => Ok(code),
        Ok(false) => {
            let what = format!("leaving barrier {path}: others were still in it");
            let timed = timed_out(timeout, &what);
            Ok(if code == 0 { timed } else { code })
        }
        Err(e) => {
            let failure = failed(e);
            Ok(if code == 0 { failure } else { code })
        }
    }
}

/// The commands that run no CMD.
fn simple(zk: &Zk, command: Cmd) -> Result<u8, u8> {
    match command {
        Cmd::Leader { path } => match zk.leader(&path).map_err(zk_fail)? {
            Some(id) => line(&id).map(|()| 0),
            None => {
                eprintln!("zkr: no leader in {path}");
                Ok(EXIT_NOT_FOUND)
            }
        },
        Cmd::Queue { op } => queue(zk, op),
        Cmd::Counter { path, int32, op } => {
            let add = op.map(|CounterOp::Add { n }| n);
            let value = zk.counter(&path, !int32, add).map_err(zk_fail)?;
            line(&value.to_string()).map(|()| 0)
        }
        Cmd::Inspect { path, json, watch } => inspect::run(zk, &path, json, watch),
        Cmd::Get { path, encoding } => get(zk, &path, &encoding),
        Cmd::Set {
            path,
            data,
            version,
        } => {
            let data = data_or_stdin(data)?;
            zk.set(&path, data, version).map_err(zk_fail).map(|_| 0)
        }
        Cmd::Create {
            path,
            data,
            sequential,
            container,
            ttl,
            parents,
            ephemeral: _,
        } => {
            let how = NewNode {
                sequential,
                container,
                ttl,
                parents,
            };
            let data = data.map(String::into_bytes).unwrap_or_default();
            let created = zk.create(&path, data, &how).map_err(zk_fail)?;
            line(&created).map(|()| 0)
        }
        Cmd::Delete {
            path,
            version,
            recursive,
        } => zk
            .delete(&path, version, recursive)
            .map_err(zk_fail)
            .map(|()| 0),
        Cmd::Stat { path, json } => stat(zk, &path, json),
        Cmd::Ls { path, json } => list(zk.ls(&path).map_err(zk_fail)?, json),
        Cmd::Tree { path, json } => list(zk.tree(&path).map_err(zk_fail)?, json),
        Cmd::Watch { path, recursive } => {
            let mut watching = zk.watch(&path, recursive).map_err(zk_fail)?;
            eprintln!("zkr: watching {path}");
            while let Some(change) = watching.next() {
                line(&format!("{} {}", change.kind, change.path))?;
            }
            Err(zk_fail(zk.ended("watch", &path)))
        }
        Cmd::Discover {
            name,
            base,
            json,
            watch,
        } => discover(zk, &base, &name, json, watch),
        Cmd::Lock { .. }
        | Cmd::Elect { .. }
        | Cmd::Barrier { .. }
        | Cmd::Register { .. }
        | Cmd::Serve(_) => Err(fail("internal: a command that runs CMD reached `simple`")),
    }
}

/// `zkr register`'s instance: NAME at HOST:PORT, the id given or a fresh one.
fn instance(
    name: &str,
    address: &str,
    id: Option<String>,
    payload: Option<String>,
) -> Result<zk::ServiceInstance, ZkError> {
    let bad = || ZkError::failed(format!("register: {address:?} is not HOST:PORT"));
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let id = id.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{:x}-{:x}", std::process::id(), nanos)
    });
    let mut i = zk::ServiceInstance::new(name, &id, host, i32::from(port));
    i.payload = payload;
    Ok(i)
}

/// `zkr discover`: the instances, then (`--watch`) each change.
fn discover(zk: &Zk, base: &str, name: &str, json: bool, watch: bool) -> Result<u8, u8> {
    let show = |i: &zk::ServiceInstance| {
        if json {
            i.to_json().map_err(|e| fail(e.to_string()))
        } else {
            Ok(zk::instance_line(i))
        }
    };
    let (cache, now) = zk.discover(base, name).map_err(zk_fail)?;
    for i in &now {
        line(&show(i)?)?;
    }
    if !watch {
        return Ok(0);
    }
    eprintln!("zkr: watching service {name} in {base}");
    for e in cache {
        match e {
            zk::ServiceCacheEvent::Added(i) => line(&format!("added {}", show(&i)?))?,
            zk::ServiceCacheEvent::Updated(i) => line(&format!("updated {}", show(&i)?))?,
            zk::ServiceCacheEvent::Removed(i) => line(&format!("removed {}", i.id))?,
            e if e.is_final() => break,
            _ => {}
        }
    }
    Err(zk_fail(zk.ended("discover", &format!("{base}/{name}"))))
}

/// `zkr queue put` (the item's name, if the queue gives one) and `zkr queue take`.
fn queue(zk: &Zk, op: QueueOp) -> Result<u8, u8> {
    match op {
        QueueOp::Put { path, data } => {
            let data = data_or_stdin(data)?;
            match zk.queue_put(&path, data).map_err(zk_fail)? {
                Some(name) => line(&name).map(|()| 0),
                None => Ok(0),
            }
        }
        QueueOp::Take { path, timeout } => {
            let taken = zk.queue_take(&path, timeout).map_err(zk_fail)?;
            match taken {
                Some(mut data) => {
                    data.push(b'\n');
                    out(&data).map(|()| 0)
                }
                None => Ok(timed_out(
                    timeout,
                    &format!("waiting for an item: queue {path} stayed empty"),
                )),
            }
        }
    }
}

/// `zkr get`: the data as asked (JSON with the stat, raw bytes, hex, base64, or text
/// and a newline).
fn get(zk: &Zk, path: &str, encoding: &Encoding) -> Result<u8, u8> {
    let (data, stat) = zk.get(path).map_err(zk_fail)?;
    if encoding.json {
        let (text, b64) = show::data_json(&data);
        let v = json!({
            "path": path,
            "data": text,
            "data_base64": b64,
            "stat": show::stat_json(&stat),
        });
        json_line(&v)
    } else if encoding.raw {
        out(&data)
    } else if encoding.hex {
        line(&show::hex(&data))
    } else if encoding.base64 {
        line(&show::base64(&data))
    } else {
        let mut data = data.to_vec();
        data.push(b'\n');
        out(&data)
    }
    .map(|()| 0)
}

/// `zkr stat`: zkCli's fields, or JSON with the path.
fn stat(zk: &Zk, path: &str, json: bool) -> Result<u8, u8> {
    let stat = zk.stat(path).map_err(zk_fail)?;
    if json {
        let mut v = show::stat_json(&stat);
        v["path"] = Value::from(path);
        json_line(&v)
    } else {
        out(show::stat_text(&stat).as_bytes())
    }
    .map(|()| 0)
}

/// `zkr ls` and `zkr tree`: one name per line, or a JSON array.
fn list(names: Vec<String>, json: bool) -> Result<u8, u8> {
    if json {
        return json_line(&json!(names)).map(|()| 0);
    }
    for name in names {
        line(&name)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// `--read-only` and `--track-ensemble` reach the session's settings, off unless
    /// given, in any position (they are global).
    #[test]
    fn read_only_and_track_ensemble_reach_the_settings() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap();
        let plain = parse(&["zkr", "get", "/a"]);
        let s = settings(&plain);
        assert!(!s.read_only && !s.track_ensemble);
        let both = parse(&["zkr", "--track-ensemble", "get", "/a", "--read-only"]);
        let s = settings(&both);
        assert!(s.read_only && s.track_ensemble);
        let one = parse(&["zkr", "ls", "/", "--track-ensemble"]);
        let s = settings(&one);
        assert!(!s.read_only && s.track_ensemble);
    }
}
