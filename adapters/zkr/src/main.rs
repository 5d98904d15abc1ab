//! `zkr`: ZooKeeper coordination from the shell, in the spirit of `etcdctl lock` and
//! `etcdctl elect`: run a command while holding a lock or leading an election (its
//! fencing token in `ZK_FENCING_TOKEN`, the command stopped if the hold is lost), pass a
//! double barrier, use a queue or a counter, read, write, list and watch nodes. Built on
//! `zk-recipes-blocking`; Unix only (process groups and signals). See `docs/zkr.md`.

#![deny(unsafe_code)]

mod duration;
mod supervise;
mod sys;
mod zk;

use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use zk::{Hold, Settings, Zk, ZkError};

/// Exit code: the node (or leader) asked for does not exist.
const EXIT_NOT_FOUND: u8 = 1;
/// Exit code: `--timeout` passed before the lock, leadership, barrier or item came.
const EXIT_TIMED_OUT: u8 = 124;
/// Exit code: zkr failed (usage, connection, ZooKeeper error), or the hold was lost
/// while CMD ran and CMD still exited 0.
const EXIT_FAILED: u8 = 125;

/// ZooKeeper coordination from the shell: run a command under a lock or as a leader,
/// barriers, queues, counters, nodes.
///
/// Exit codes: CMD's own status for `lock`, `elect` and `barrier -- CMD` (128+N if a
/// signal N ended it); 1 node or leader not found; 124 --timeout passed; 125 zkr failed
/// (or the hold was lost and CMD still exited 0); 126/127 CMD not runnable/not found.
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

    /// Session timeout asked of the server. A holder whose connection is down this long
    /// takes its hold as lost (the server will have ended the session too).
    #[arg(long, default_value = "10s", value_parser = duration::parse, global = true)]
    session_timeout: Duration,

    /// How long to keep trying the servers for a first session.
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

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Runs CMD while holding the lock PATH (fencing token in ZK_FENCING_TOKEN).
    ///
    /// The exclusive lock PATH is Curator InterProcessMutex compatible. CMD runs in its
    /// own process group with the lock's fencing token in ZK_FENCING_TOKEN. If the lock
    /// is lost (session expired or closed, lock node deleted), CMD's process group gets
    /// SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM and SIGHUP sent to zkr are
    /// passed on to the group. Exits with CMD's status (128+N if signal N ended it);
    /// 124 if --timeout passed first; 125 if the lock was lost and CMD still exited 0.
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
    /// the number of writers.
    Counter {
        /// The counter's node.
        path: String,
        /// 4-byte counter (Curator SharedCount) instead of 8-byte (DistributedAtomicLong).
        #[arg(long)]
        int32: bool,
        #[command(subcommand)]
        op: Option<CounterOp>,
    },
    /// Prints the data of node PATH.
    Get {
        /// The node.
        path: String,
    },
    /// Sets the data of node PATH, creating it and missing parents if needed.
    Set {
        /// The node.
        path: String,
        /// The data; read from standard input if absent.
        data: Option<String>,
    },
    /// Lists the children of PATH, one per line, sorted.
    Ls {
        /// The node.
        path: String,
    },
    /// Prints PATH and every node below it, one full path per line, depth first.
    Tree {
        /// The root node.
        path: String,
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

/// Where the signals zkr takes over go: to CMD's group while it runs; before that they
/// interrupt the wait (the session is closed, so nothing is left held).
#[derive(Default)]
struct Gate {
    running: bool,
    interrupted: Option<i32>,
    zk: Option<Zk>,
}

/// The signal side of a command that runs CMD.
struct Signals {
    gate: Arc<Mutex<Gate>>,
    rx: Receiver<i32>,
    /// The signals taken over (blocked in every thread of zkr, reset in CMD).
    taken: Vec<i32>,
}

impl Signals {
    /// Takes SIGINT, SIGTERM and SIGHUP over, but not one zkr was started with ignored
    /// (`nohup`'s SIGHUP): that one stays ignored, in CMD too. Call before any thread
    /// starts.
    fn take_over() -> Result<Signals, String> {
        let taken: Vec<i32> = sys::FORWARDED
            .into_iter()
            .filter(|&s| !sys::ignored(s))
            .collect();
        let blocked = sys::block(&taken).map_err(|e| format!("block signals: {e}"))?;
        let gate = Arc::new(Mutex::new(Gate::default()));
        let (tx, rx) = mpsc::channel();
        let g = gate.clone();
        std::thread::Builder::new()
            .name("zkr-signals".into())
            .spawn(move || {
                while let Ok(sig) = blocked.wait() {
                    let mut gate = g.lock().unwrap_or_else(|e| e.into_inner());
                    if gate.running {
                        let _ = tx.send(sig);
                        continue;
                    }
                    if gate.interrupted.is_some() {
                        continue;
                    }
                    gate.interrupted = Some(sig);
                    match &gate.zk {
                        Some(zk) => {
                            eprintln!(
                                "zkr: got {} while waiting; closing the session",
                                sys::signal_name(sig)
                            );
                            zk.close();
                        }
                        None => std::process::exit(128 + sig),
                    }
                }
            })
            .map_err(|e| format!("start the signal thread: {e}"))?;
        Ok(Signals { gate, rx, taken })
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session to close if a signal interrupts a wait.
    fn attach(&self, zk: &Zk) {
        self.gate().zk = Some(zk.clone());
    }

    /// The signal that interrupted a wait, if one did.
    fn interrupted(&self) -> Option<u8> {
        self.gate().interrupted.map(signal_exit)
    }

    /// From now on signals go to CMD; `Err(code)` if one interrupted the wait already.
    fn start(&self) -> Result<(), u8> {
        let mut gate = self.gate();
        match gate.interrupted {
            Some(sig) => Err(signal_exit(sig)),
            None => {
                gate.running = true;
                Ok(())
            }
        }
    }

    /// CMD has ended: signals interrupt zkr's waits again.
    fn stop(&self) {
        self.gate().running = false;
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
    if e.no_node {
        EXIT_NOT_FOUND
    } else {
        EXIT_FAILED
    }
}

/// Writes to standard output; a closed pipe (`zkr ls / | head -1`) ends zkr quietly.
fn out(bytes: &[u8]) -> Result<(), u8> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(signal_exit(libc::SIGPIPE)),
        Err(e) => Err(fail(format!("standard output: {e}"))),
    }
}

fn line(text: &str) -> Result<(), u8> {
    out(format!("{text}\n").as_bytes())
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_FAILED } else { 0 });
        }
    };
    ExitCode::from(run(cli).unwrap_or_else(|code| code))
}

fn run(cli: Cli) -> Result<u8, u8> {
    let runs_cmd = matches!(
        cli.command,
        Cmd::Lock { .. } | Cmd::Elect { .. } | Cmd::Barrier { .. }
    );
    // Before any thread starts (the session's I/O thread inherits the mask).
    let signals = if runs_cmd {
        Some(Signals::take_over().map_err(fail)?)
    } else {
        None
    };
    let zk = zk::connect(&Settings {
        servers: &cli.server,
        session_timeout: cli.session_timeout,
        connect_timeout: cli.connect_timeout,
        tls_ca: cli.tls_ca.as_deref(),
        tls_client: cli.tls_cert.as_deref().zip(cli.tls_key.as_deref()),
    })
    .map_err(zk_fail)?;
    if let Some(s) = &signals {
        s.attach(&zk);
    }
    let code = match (cli.command, signals) {
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
            held(&signals, hold, &cmd, stopping.grace)
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
            held(&signals, hold, &cmd, stopping.grace)
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
        ) => barrier(&zk, &signals, &path, count, timeout, grace, &cmd),
        (command, _) => simple(&zk, command),
    };
    zk.close();
    Ok(code.unwrap_or_else(|code| code))
}

/// Runs CMD under a lock or leadership, as the loss rule says.
fn held(
    signals: &Signals,
    hold: Result<Option<Box<dyn Hold>>, ZkError>,
    cmd: &[String],
    grace: Duration,
) -> Result<u8, u8> {
    let hold = match hold {
        Ok(hold) => hold,
        Err(e) => return Err(signals.interrupted().unwrap_or_else(|| zk_fail(e))),
    };
    let Some(mut hold) = hold else {
        eprintln!("zkr: timed out");
        return Ok(EXIT_TIMED_OUT);
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
        grace,
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
        eprintln!("zkr: timed out entering barrier {path}");
        return Ok(EXIT_TIMED_OUT);
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
            eprintln!("zkr: timed out leaving barrier {path}");
            Ok(if code == 0 { EXIT_TIMED_OUT } else { code })
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
        Cmd::Queue {
            op: QueueOp::Put { path, data },
        } => {
            let data = data_or_stdin(data)?;
            match zk.queue_put(&path, data).map_err(zk_fail)? {
                Some(name) => line(&name).map(|()| 0),
                None => Ok(0),
            }
        }
        Cmd::Queue {
            op: QueueOp::Take { path, timeout },
        } => match zk.queue_take(&path, timeout).map_err(zk_fail)? {
            Some(mut data) => {
                data.push(b'\n');
                out(&data).map(|()| 0)
            }
            None => {
                eprintln!("zkr: timed out: queue {path} stayed empty");
                Ok(EXIT_TIMED_OUT)
            }
        },
        Cmd::Counter { path, int32, op } => {
            let add = op.map(|CounterOp::Add { n }| n);
            let value = zk.counter(&path, !int32, add).map_err(zk_fail)?;
            line(&value.to_string()).map(|()| 0)
        }
        Cmd::Get { path } => {
            let mut data = zk.get(&path).map_err(zk_fail)?;
            data.push(b'\n');
            out(&data).map(|()| 0)
        }
        Cmd::Set { path, data } => {
            let data = data_or_stdin(data)?;
            zk.set(&path, data).map_err(zk_fail).map(|()| 0)
        }
        Cmd::Ls { path } => {
            for name in zk.ls(&path).map_err(zk_fail)? {
                line(&name)?;
            }
            Ok(0)
        }
        Cmd::Tree { path } => {
            for node in zk.tree(&path).map_err(zk_fail)? {
                line(&node)?;
            }
            Ok(0)
        }
        Cmd::Watch { path, recursive } => {
            let mut watching = zk.watch(&path, recursive).map_err(zk_fail)?;
            eprintln!("zkr: watching {path}");
            while let Some(change) = watching.next() {
                line(&format!("{} {}", change.kind, change.path))?;
            }
            Err(fail(format!("watch {path}: the session ended")))
        }
        Cmd::Lock { .. } | Cmd::Elect { .. } | Cmd::Barrier { .. } => {
            Err(fail("internal: a command that runs CMD reached `simple`"))
        }
    }
}
