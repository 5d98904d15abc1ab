use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How to start a server.
#[derive(Clone, Debug)]
pub struct Options {
    /// `tickTime` in ms (the default session timeout range is 2..20 ticks).
    pub tick_time_ms: u32,
    /// `minSessionTimeout` in ms, so tests can use short sessions.
    pub min_session_timeout_ms: u32,
    /// Start the JVM with `-Dzookeeper.extendedTypesEnabled=true` (TTL nodes).
    pub ttl_nodes: bool,
    /// How long to wait for `ruok` to answer `imok`.
    pub start_timeout: Duration,
    /// Data directory parent; default a fresh temp dir. (`/dev/shm` makes writes cheaper.)
    pub base_dir: Option<PathBuf>,
    /// Extra JVM system properties, e.g. `-Dzookeeper.request_throttle_max_requests=100`
    /// (ZooKeeper's request throttle, off by default).
    pub jvm_flags: Vec<String>,
    /// A secure (TLS) client port besides the plain one (Netty connection factory;
    /// see [`TestServer::secure_connect_string`]).
    pub tls: Option<crate::tls::ServerTls>,
    /// SASL DIGEST-MD5 users (a JAAS `Server` section with `DigestLoginModule`), and
    /// whether the server refuses clients that do not authenticate with SASL.
    pub sasl: Option<SaslUsers>,
}

/// The SASL users of a test server (see [`Options::sasl`]).
#[derive(Clone, Debug, Default)]
pub struct SaslUsers {
    /// `(user, password)` pairs: `user_<user>="<password>"` in the JAAS file.
    pub users: Vec<(String, String)>,
    /// `zookeeper.enforce.auth.enabled=true` with `zookeeper.enforce.auth.schemes=sasl`:
    /// a client that does not authenticate with SASL is refused
    /// (`SessionClosedRequireSaslAuth`).
    pub enforce: bool,
}

impl SaslUsers {
    /// These users, enforced or not.
    pub fn new(users: &[(&str, &str)], enforce: bool) -> SaslUsers {
        SaslUsers {
            users: users
                .iter()
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect(),
            enforce,
        }
    }

    /// The JAAS file's text.
    fn jaas(&self) -> String {
        let users: String = self
            .users
            .iter()
            .map(|(u, p)| format!("\n    user_{u}=\"{p}\""))
            .collect();
        format!(
            "Server {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n"
        )
    }

    /// The JVM flags for a server whose JAAS file is `jaas`.
    fn jvm_flags(&self, jaas: &Path) -> Vec<String> {
        let mut flags = vec![
            format!("-Djava.security.auth.login.config={}", jaas.display()),
            "-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider".into(),
        ];
        if self.enforce {
            flags.push("-Dzookeeper.enforce.auth.enabled=true".into());
            flags.push("-Dzookeeper.enforce.auth.schemes=sasl".into());
        }
        flags
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tick_time_ms: 2000,
            min_session_timeout_ms: 1000,
            ttl_nodes: true,
            start_timeout: Duration::from_secs(60),
            base_dir: None,
            jvm_flags: Vec::new(),
            tls: None,
            sasl: None,
        }
    }
}

fn java() -> String {
    std::env::var("JAVA").unwrap_or_else(|_| "java".into())
}

/// The server's classpath (see [`crate::jar`]), once a `java` runs.
fn classpath() -> io::Result<String> {
    let cp = crate::jar::server_classpath()?;
    match Command::new(java()).arg("-version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => Ok(cp),
        _ => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no working `java` on PATH (set JAVA): install a JRE, e.g. `sudo apt-get install -y default-jre-headless`",
        )),
    }
}

/// A free TCP port on 127.0.0.1 (bound then released).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Sends a four-letter command to `addr` and returns the whole answer.
pub fn four_letter(addr: SocketAddr, cmd: &str) -> io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(cmd.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// The `Mode:` of a server that serves requests (`standalone`, `leader`, `follower`).
fn serving_mode(addr: SocketAddr) -> Option<String> {
    let srvr = four_letter(addr, "srvr").ok()?;
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(str::to_string)
}

/// One ZooKeeper JVM: its config, data dir and process.
struct Jvm {
    main_class: &'static str,
    config: PathBuf,
    log: PathBuf,
    client_addr: SocketAddr,
    /// The secure client port's address, if there is one.
    secure_addr: Option<SocketAddr>,
    ttl_nodes: bool,
    jvm_flags: Vec<String>,
    child: Option<Child>,
}

impl Jvm {
    fn spawn(&mut self) -> io::Result<()> {
        let classpath = classpath()?;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = Command::new(java());
        cmd.arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1");
        cmd.args(&self.jvm_flags);
        if self.ttl_nodes {
            cmd.arg("-Dzookeeper.extendedTypesEnabled=true");
        }
        cmd.arg("-Dzookeeper.admin.enableServer=false")
            .arg("-cp")
            .arg(format!("{classpath}{}", self.extra_classpath()))
            .arg(self.main_class)
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.child = Some(cmd.spawn()?);
        Ok(())
    }

    /// Debian's jar names Netty's handler and transport in its manifest but not its
    /// codec, which TLS (`SslHandler`) needs; a secure server gets it, and a logger
    /// so that its log says why a handshake failed.
    fn extra_classpath(&self) -> String {
        if self.secure_addr.is_none() {
            return String::new();
        }
        ["netty-codec.jar", "netty-resolver.jar", "slf4j-simple.jar"]
            .iter()
            .map(|j| Path::new("/usr/share/java").join(j))
            .filter(|p| p.exists())
            .map(|p| format!(":{}", p.display()))
            .collect()
    }

    fn wait_ready(&mut self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            // `ruok` says imok before the server serves; `srvr` shows a Mode only once
            // it does (standalone, leader or follower).
            if serving_mode(self.client_addr).is_some()
                && self
                    .secure_addr
                    .is_none_or(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
            {
                return Ok(());
            }
            if let Some(child) = &mut self.child {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    let log = fs::read_to_string(&self.log).unwrap_or_default();
                    let tail: String = log
                        .lines()
                        .rev()
                        .take(20)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join("\n");
                    return Err(io::Error::other(format!(
                        "ZooKeeper exited with {status} during start:\n{tail}"
                    )));
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "ZooKeeper at {} is not serving (srvr shows no Mode)",
                        self.client_addr
                    ),
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn signal(&self, sig: &str) -> io::Result<()> {
        let Some(child) = &self.child else {
            return Err(io::Error::other("server is not running"));
        };
        signal(child.id(), sig)
    }

    /// SIGTERM, then SIGKILL if it lingers; waits for the process.
    fn stop(&mut self) -> io::Result<()> {
        if self.child.is_none() {
            return Ok(());
        }
        let _ = self.signal("-CONT");
        let _ = self.signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        let child = self.child.as_mut().expect("checked above");
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                child.kill()?;
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        child.wait()?;
        self.child = None;
        Ok(())
    }

    fn kill(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

fn write_config(path: &Path, lines: &[String]) -> io::Result<()> {
    fs::write(path, lines.join("\n") + "\n")
}

fn common_config(data_dir: &Path, client_port: u16, tick: u32, min_timeout: u32) -> Vec<String> {
    vec![
        format!("tickTime={tick}"),
        format!("dataDir={}", data_dir.display()),
        format!("clientPort={client_port}"),
        "clientPortAddress=127.0.0.1".into(),
        "maxClientCnxns=0".into(),
        "admin.enableServer=false".into(),
        "4lw.commands.whitelist=*".into(),
        format!("minSessionTimeout={min_timeout}"),
    ]
}

/// A standalone ZooKeeper server on 127.0.0.1 with a temp data dir.
pub struct TestServer {
    jvm: Jvm,
    // Declared after `jvm` so the process dies before its directory is removed.
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server with default [`Options`] and waits until it answers.
    pub fn start() -> io::Result<TestServer> {
        Self::start_with(Options::default())
    }

    /// Starts a server with the given options and waits until it answers.
    pub fn start_with(opts: Options) -> io::Result<TestServer> {
        let mut builder = tempfile::Builder::new();
        builder
            .prefix("zk-test-")
            .disable_cleanup(std::env::var_os("ZK_TEST_KEEP").is_some());
        let dir = match &opts.base_dir {
            Some(base) => builder.tempdir_in(base)?,
            None => builder.tempdir()?,
        };
        let data = dir.path().join("data");
        fs::create_dir_all(&data)?;
        let mut jvm_flags = opts.jvm_flags.clone();
        if let Some(sasl) = &opts.sasl {
            let jaas = dir.path().join("jaas.conf");
            fs::write(&jaas, sasl.jaas())?;
            jvm_flags.extend(sasl.jvm_flags(&jaas));
        }
        // The free port is only free when we look: another test's client may take it
        // before the JVM binds it, and the server then exits at once. Try another port.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            let config = dir.path().join("zoo.cfg");
            let mut lines =
                common_config(&data, port, opts.tick_time_ms, opts.min_session_timeout_ms);
            let secure_addr = match &opts.tls {
                Some(tls) => {
                    let secure_port = free_port()?;
                    lines.extend(tls.config(secure_port));
                    Some(SocketAddr::from(([127, 0, 0, 1], secure_port)))
                }
                None => None,
            };
            write_config(&config, &lines)?;
            let mut jvm = Jvm {
                main_class: "org.apache.zookeeper.server.ZooKeeperServerMain",
                config,
                log: dir.path().join("server.log"),
                client_addr: SocketAddr::from(([127, 0, 0, 1], port)),
                secure_addr,
                ttl_nodes: opts.ttl_nodes,
                jvm_flags: jvm_flags.clone(),
                child: None,
            };
            jvm.spawn()?;
            match jvm.wait_ready(opts.start_timeout) {
                Ok(()) => return Ok(TestServer { jvm, _dir: dir }),
                Err(e) if attempt < 3 && jvm.child.is_none() => {
                    eprintln!("test server: start failed ({e}); trying another port");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        self.jvm.client_addr.to_string()
    }

    /// The client address.
    pub fn addr(&self) -> SocketAddr {
        self.jvm.client_addr
    }

    /// `127.0.0.1:<secure port>` when started with [`Options::tls`].
    pub fn secure_connect_string(&self) -> Option<String> {
        self.jvm.secure_addr.map(|a| a.to_string())
    }

    /// The server's log so far (stdout and stderr of the JVM).
    pub fn log(&self) -> String {
        fs::read_to_string(&self.jvm.log).unwrap_or_default()
    }

    /// The JVM's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.jvm.pid()
    }

    /// Stops the server gracefully (SIGTERM) and waits for it.
    pub fn stop(&mut self) -> io::Result<()> {
        self.jvm.stop()
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn kill(&mut self) -> io::Result<()> {
        self.jvm.kill()
    }

    /// Starts the server again on the same port and data dir (after stop/kill).
    pub fn restart(&mut self) -> io::Result<()> {
        self.jvm.stop()?;
        self.jvm.spawn()?;
        self.jvm.wait_ready(Duration::from_secs(60))
    }

    /// Freezes the JVM (SIGSTOP): connections stay open but nothing answers. Returns
    /// once every thread of the JVM has stopped (a thread already running when the
    /// signal is sent can otherwise still answer a request sent just after).
    pub fn pause(&self) -> io::Result<()> {
        let pid = self
            .jvm
            .pid()
            .ok_or_else(|| io::Error::other("server is not running"))?;
        freeze(pid)
    }

    /// Thaws a paused JVM (SIGCONT).
    pub fn resume(&self) -> io::Result<()> {
        self.jvm.signal("-CONT")
    }

    /// Sends a four-letter command (`ruok`, `srvr`, `mntr`, `cons`, ...).
    pub fn four_letter(&self, cmd: &str) -> io::Result<String> {
        four_letter(self.jvm.client_addr, cmd)
    }

    /// The `mntr` counters as key → value.
    pub fn mntr(&self) -> io::Result<HashMap<String, String>> {
        parse_mntr(&self.four_letter("mntr")?)
    }

    /// One numeric `mntr` counter.
    pub fn mntr_value(&self, key: &str) -> io::Result<i64> {
        mntr_value(&self.mntr()?, key)
    }
}

/// Sends `sig` (`-STOP`, `-CONT`, `-TERM`...) to `pid`.
pub(crate) fn signal(pid: u32, sig: &str) -> io::Result<()> {
    let status = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("kill {sig} {pid} failed")))
    }
}

/// SIGSTOP to `pid`, then waits (up to 10 s) until every one of its threads is stopped.
/// `kill` returns once the signal is queued; the stop itself begins when one of the
/// process's threads next runs, and until then the others go on (a server thread woken
/// by a request answers it).
pub(crate) fn freeze(pid: u32) -> io::Result<()> {
    signal(pid, "-STOP")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_threads_stopped(pid)? {
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "process {pid} did not stop within 10 s of SIGSTOP"
            )));
        }
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Whether every thread of `pid` is in state `T` (stopped) per `/proc/<pid>/task/*/stat`.
fn all_threads_stopped(pid: u32) -> io::Result<bool> {
    for task in fs::read_dir(format!("/proc/{pid}/task"))? {
        // A thread that ended since the listing has nothing left to stop.
        let Ok(stat) = fs::read_to_string(task?.path().join("stat")) else {
            continue;
        };
        // `pid (comm) S ...`: the state follows the last `)` (comm may hold any byte).
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if !matches!(state, Some('T' | 't')) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn parse_mntr(text: &str) -> io::Result<HashMap<String, String>> {
    let map: HashMap<_, _> = text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if map.is_empty() {
        return Err(io::Error::other(format!(
            "unexpected mntr answer: {text:?}"
        )));
    }
    Ok(map)
}

fn mntr_value(map: &HashMap<String, String>, key: &str) -> io::Result<i64> {
    map.get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::other(format!("mntr has no numeric {key}")))
}

/// The quorum and election addresses of one server, or where another server reaches
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerPorts {
    /// Followers connect here to the leader.
    pub quorum: SocketAddr,
    /// Leader election connects here.
    pub election: SocketAddr,
}

/// Where server `i` reaches server `j` (0-based), given `j`'s own ports: each server's
/// config lists its peers at these addresses (see [`EnsembleOptions::peer_view`]).
pub type PeerView = dyn Fn(usize, usize, PeerPorts) -> io::Result<PeerPorts> + Send + Sync;

/// How to start a [`TestEnsemble`].
#[derive(Clone)]
pub struct EnsembleOptions {
    /// `tickTime` in ms.
    pub tick_time_ms: u32,
    /// `initLimit` in ticks (a follower's time to connect and sync).
    pub init_limit: u32,
    /// `syncLimit` in ticks (how long the leader and a follower go without hearing from
    /// each other before giving the other up).
    pub sync_limit: u32,
    /// `minSessionTimeout` in ms.
    pub min_session_timeout_ms: u32,
    /// Each server's view of its peers' addresses: `None` lists everyone at their own
    /// ports; the nemesis puts a proxy per directed link there. Each server lists itself
    /// at its own ports. ZooKeeper 3.8 keeps each server's own view (a follower connects
    /// to the leader at the address its own config gives), with one exception: a higher
    /// id connects back to a lower one at the election address the lower one announced
    /// (the nemesis's module docs say how its proxies deal with it).
    pub peer_view: Option<std::sync::Arc<PeerView>>,
    /// Dynamic reconfiguration on (`reconfigEnabled=true`, the membership in a
    /// dynamic config file, client addresses in the `server.N` lines), with the
    /// superuser [`SUPERUSER`] allowed to `reconfig` (default off: ZooKeeper's default,
    /// `reconfig` is refused `ReconfigDisabled`).
    pub reconfig: bool,
    /// Read-only mode (`-Dreadonlymode.enabled=true`): a server cut off from its quorum
    /// keeps serving reads to clients that accept a read-only server. Also turns on
    /// local sessions (`localSessionsEnabled`, `localSessionsUpgradingEnabled`): 3.8's
    /// read-only server creates a session only as a local one and answers any other
    /// new-session handshake with a bare reply header carrying NotReadOnly (-119), and
    /// a session is a global one (one that can move between servers) only once it
    /// created an ephemeral node.
    pub read_only: bool,
}

/// The superuser (`digest` scheme, user and password) of an ensemble started with
/// [`EnsembleOptions::reconfig`]: ZooKeeper 3.8 lets only a superuser (or anyone, on a
/// server started with `skipACL=yes`) write `/zookeeper/config`, so `reconfig` needs
/// `add_auth("digest", "super:reconfig")` first; anyone else gets `NoAuth`.
pub const SUPERUSER: (&str, &str) = ("super", "reconfig");

impl Default for EnsembleOptions {
    fn default() -> Self {
        EnsembleOptions {
            tick_time_ms: 500,
            init_limit: 10,
            sync_limit: 5,
            min_session_timeout_ms: 1000,
            peer_view: None,
            reconfig: false,
            read_only: false,
        }
    }
}

/// `server.N=...` for server `i` (N = i + 1) at `peer`; with `client`, the client
/// address after `;` (the dynamic-config form).
fn server_line(i: usize, client: u16, peer: PeerPorts, with_client: bool) -> String {
    let mut line = format!("server.{}={}:{}", i + 1, peer.quorum, peer.election.port());
    if with_client {
        line.push_str(&format!(":participant;127.0.0.1:{client}"));
    }
    line
}

/// Server `i`'s JVM (not started), its data dir (`myid`) and config files in `dir`;
/// `members` are `(index, client port, peer ports as i sees them)`.
fn quorum_peer(
    dir: &Path,
    opts: &EnsembleOptions,
    i: usize,
    client: u16,
    members: &[(usize, u16, PeerPorts)],
) -> io::Result<Jvm> {
    let data = dir.join(format!("data{}", i + 1));
    fs::create_dir_all(&data)?;
    fs::write(data.join("myid"), format!("{}\n", i + 1))?;
    let mut lines = common_config(
        &data,
        client,
        opts.tick_time_ms,
        opts.min_session_timeout_ms,
    );
    lines.extend([
        format!("initLimit={}", opts.init_limit),
        format!("syncLimit={}", opts.sync_limit),
    ]);
    if opts.read_only {
        lines.extend([
            "localSessionsEnabled=true".into(),
            "localSessionsUpgradingEnabled=true".into(),
        ]);
    }
    let servers: Vec<String> = members
        .iter()
        .map(|(j, client, peer)| server_line(*j, *client, *peer, opts.reconfig))
        .collect();
    let mut jvm_flags = Vec::new();
    if opts.read_only {
        jvm_flags.push("-Dreadonlymode.enabled=true".into());
    }
    if opts.reconfig {
        // The client address lives in the member lines; the membership in a file of
        // its own, which the server rewrites on every reconfig.
        lines.retain(|l| !l.starts_with("clientPort"));
        let dynamic = dir.join(format!("zoo{}.cfg.dynamic", i + 1));
        write_config(&dynamic, &servers)?;
        lines.extend([
            "reconfigEnabled=true".into(),
            "standaloneEnabled=false".into(),
            format!("dynamicConfigFile={}", dynamic.display()),
        ]);
        let (user, password) = SUPERUSER;
        jvm_flags.push(format!(
            "-Dzookeeper.DigestAuthenticationProvider.superDigest={}",
            zk_recipes::client::ops::digest_id(user, password)
        ));
    } else {
        lines.extend(servers);
    }
    let config = dir.join(format!("zoo{}.cfg", i + 1));
    write_config(&config, &lines)?;
    Ok(Jvm {
        main_class: "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        config,
        log: dir.join(format!("server{}.log", i + 1)),
        client_addr: SocketAddr::from(([127, 0, 0, 1], client)),
        secure_addr: None,
        ttl_nodes: true,
        jvm_flags,
        child: None,
    })
}

/// A three-server ZooKeeper ensemble on loopback ports.
pub struct TestEnsemble {
    servers: Vec<Jvm>,
    peers: Vec<PeerPorts>,
    opts: EnsembleOptions,
    _dir: tempfile::TempDir,
}

impl TestEnsemble {
    /// Starts three quorum peers (tickTime 500) and waits until all answer and one leads.
    pub fn start() -> io::Result<TestEnsemble> {
        Self::start_with(EnsembleOptions::default())
    }

    /// Starts three quorum peers with `opts` and waits until all answer and one leads.
    pub fn start_with(opts: EnsembleOptions) -> io::Result<TestEnsemble> {
        let dir = tempfile::Builder::new()
            .prefix("zk-ensemble-")
            .disable_cleanup(std::env::var_os("ZK_TEST_KEEP").is_some())
            .tempdir()?;
        let ports: Vec<(u16, PeerPorts)> = (0..3)
            .map(|_| {
                let at = |p| SocketAddr::from(([127, 0, 0, 1], p));
                Ok((
                    free_port()?,
                    PeerPorts {
                        quorum: at(free_port()?),
                        election: at(free_port()?),
                    },
                ))
            })
            .collect::<io::Result<_>>()?;
        let mut servers = Vec::new();
        for (i, (client, _)) in ports.iter().enumerate() {
            let mut members = Vec::new();
            for (j, (client, own)) in ports.iter().enumerate() {
                let seen = match &opts.peer_view {
                    Some(view) if i != j => view(i, j, *own)?,
                    _ => *own,
                };
                members.push((j, *client, seen));
            }
            let mut jvm = quorum_peer(dir.path(), &opts, i, *client, &members)?;
            jvm.spawn()?;
            servers.push(jvm);
        }
        let peers = ports.iter().map(|(_, own)| *own).collect();
        let ensemble = TestEnsemble {
            servers,
            peers,
            opts,
            _dir: dir,
        };
        ensemble.wait_serving(&[0, 1, 2], Duration::from_secs(60))?;
        Ok(ensemble)
    }

    /// The `server.N=host:quorum:election:participant;host:clientPort` spec of server
    /// `i` (0-based; N = i + 1), as `reconfig` takes it.
    pub fn server_spec(&self, i: usize) -> String {
        server_line(i, self.servers[i].client_addr.port(), self.peers[i], true)
    }

    /// Starts one more server (index [`len`](Self::len) before the call) that knows
    /// every server started so far as a member, and itself: with
    /// [`EnsembleOptions::reconfig`] it syncs with the leader as a non-voting follower
    /// and serves clients until a `reconfig` adds it ([`server_spec`](Self::server_spec))
    /// or it is stopped. Waits until it serves; returns its index.
    pub fn start_joiner(&mut self) -> io::Result<usize> {
        let i = self.servers.len();
        let at = |p| SocketAddr::from(([127, 0, 0, 1], p));
        let own = PeerPorts {
            quorum: at(free_port()?),
            election: at(free_port()?),
        };
        let client = free_port()?;
        let mut members: Vec<(usize, u16, PeerPorts)> = self
            .servers
            .iter()
            .zip(&self.peers)
            .enumerate()
            .map(|(j, (s, p))| (j, s.client_addr.port(), *p))
            .collect();
        members.push((i, client, own));
        let mut jvm = quorum_peer(self._dir.path(), &self.opts, i, client, &members)?;
        jvm.spawn()?;
        self.servers.push(jvm);
        self.peers.push(own);
        self.wait_serving(&[i], Duration::from_secs(60))?;
        Ok(i)
    }

    /// How many servers were started (members or not).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Never empty (three servers at least).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Stops server `i` (SIGTERM, then SIGKILL) and waits for it.
    pub fn stop(&mut self, i: usize) -> io::Result<()> {
        self.servers[i].stop()
    }

    /// Waits until the given servers answer `srvr` with a leader or follower mode.
    pub fn wait_serving(&self, which: &[usize], timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        for &i in which {
            loop {
                if self.mode(i).is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("ensemble server {i} is not serving"),
                    ));
                }
                thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    /// `leader` / `follower` for a serving server, else `None`.
    pub fn mode(&self, i: usize) -> Option<String> {
        serving_mode(self.servers[i].client_addr)
    }

    /// All three client addresses, comma separated.
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.client_addr.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Client address of server `i` (0-based).
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.servers[i].client_addr
    }

    /// Index of the server whose client port is `port`.
    pub fn index_of_port(&self, port: u16) -> Option<usize> {
        self.servers
            .iter()
            .position(|s| s.client_addr.port() == port)
    }

    /// Server `i`'s own quorum and election addresses (what it listens on).
    pub fn peer_ports(&self, i: usize) -> PeerPorts {
        self.peers[i]
    }

    /// Server `i`'s JVM pid while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.servers[i].pid()
    }

    /// Server `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        fs::read_to_string(&self.servers[i].log).unwrap_or_default()
    }

    /// Kills server `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) -> io::Result<()> {
        self.servers[i].kill()
    }

    /// Restarts server `i` on its ports and data.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        self.servers[i].stop()?;
        self.servers[i].spawn()?;
        self.wait_serving(&[i], Duration::from_secs(60))
    }

    /// Sends a four-letter command to server `i`.
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        four_letter(self.servers[i].client_addr, cmd)
    }

    /// `mntr` of server `i`.
    pub fn mntr_value(&self, i: usize, key: &str) -> io::Result<i64> {
        mntr_value(&parse_mntr(&self.four_letter(i, "mntr")?)?, key)
    }
}
