//! Private `redis-server`s for the L2 tests: one per test on a free port, never the machine's
//! :6379, stopped when dropped and by a watchdog if the test process dies first.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

/// Where the Debian package puts it; `scripts/install-deps` installs it.
const REDIS_SERVER: &str = "redis-server";

/// One private redis-server.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
    extra: Vec<String>,
    /// Listening with TLS only: readiness is a TCP connect, not a plain PING.
    tls: bool,
}

impl Redis {
    /// A standalone server on a free port, no persistence.
    pub fn start() -> Redis {
        Redis::start_fresh(|_| Vec::new())
    }

    /// A server on `port` with extra options (e.g. `--requirepass`).
    pub fn start_with(port: u16, extra: &[&str]) -> Redis {
        let mut r = Redis {
            port,
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: false,
        };
        r.spawn().unwrap_or_else(|e| panic!("{e}"));
        r
    }

    /// A server on a free port with the options `extra(port)` gives. A free port can be taken
    /// by another process before redis-server binds it (tests run in parallel); the server
    /// then exits at once, and this tries again on a new port.
    pub fn start_fresh(extra: impl Fn(u16) -> Vec<String>) -> Redis {
        let mut last = String::new();
        for _ in 0..5 {
            let port = super::free_port();
            let mut r = Redis {
                port,
                child: None,
                extra: extra(port),
                tls: false,
            };
            match r.spawn() {
                Ok(()) => return r,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    /// A server that speaks TLS only, with a certificate signed by a CA made by `openssl`;
    /// returns the CA's path too, to trust it.
    pub fn start_tls() -> (Redis, String) {
        let (r, files) = Redis::start_tls_with(false);
        (r, files.ca)
    }

    /// A TLS-only server that requires a client certificate signed by its CA
    /// (`--tls-auth-clients yes`); returns the CA and such a client certificate and key, and a
    /// second client certificate and key from another CA, which the server must refuse.
    pub fn start_mtls() -> (Redis, TlsFiles) {
        Redis::start_tls_with(true)
    }

    fn start_tls_with(auth_clients: bool) -> (Redis, TlsFiles) {
        let port = super::free_port();
        let dir =
            std::env::temp_dir().join(format!("qcache-redis-tls-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tls dir");
        let (ca, cert, key) = (
            dir.join("ca.pem"),
            dir.join("cert.pem"),
            dir.join("key.pem"),
        );
        std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
        // With an extension, so the certificate is X.509 v3 (webpki refuses v1 ones).
        std::fs::write(dir.join("client.cnf"), "extendedKeyUsage=clientAuth\n").expect("ext");
        // A CA, and a server certificate it signs (webpki refuses a CA as the server's own).
        let steps: [&[&str]; 3] = [
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=qcache-test-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "key.pem",
                "-out",
                "req.csr",
            ],
            &[
                "x509",
                "-req",
                "-in",
                "req.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "ext.cnf",
                "-out",
                "cert.pem",
            ],
        ];
        // A client certificate from the same CA, and one from a CA the server does not know.
        let client: [&[&str]; 3] = [
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=qcache-test-client",
                "-keyout",
                "client-key.pem",
                "-out",
                "client.csr",
            ],
            &[
                "x509",
                "-req",
                "-in",
                "client.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "client.cnf",
                "-out",
                "client-cert.pem",
            ],
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=qcache-test-rogue",
                "-keyout",
                "rogue-key.pem",
                "-out",
                "rogue-cert.pem",
            ],
        ];
        let extra: &[&[&str]] = if auth_clients { &client } else { &[] };
        for args in steps.iter().chain(extra) {
            let ok = Command::new("openssl")
                .args(*args)
                .current_dir(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl runs");
            assert!(ok.success(), "openssl {args:?} failed");
        }
        let (c, k) = (
            cert.to_string_lossy().into_owned(),
            key.to_string_lossy().into_owned(),
        );
        let mut r = Redis {
            port,
            child: None,
            extra: vec![
                "--port".into(),
                "0".into(),
                "--tls-port".into(),
                port.to_string(),
                "--tls-cert-file".into(),
                c.clone(),
                "--tls-key-file".into(),
                k,
                "--tls-ca-cert-file".into(),
                ca.to_string_lossy().into_owned(),
                "--tls-auth-clients".into(),
                if auth_clients { "yes" } else { "no" }.into(),
            ],
            tls: true,
        };
        r.spawn().unwrap_or_else(|e| panic!("{e}"));
        let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let files = TlsFiles {
            ca: ca.to_string_lossy().into_owned(),
            client_cert: path("client-cert.pem"),
            client_key: path("client-key.pem"),
            rogue_cert: path("rogue-cert.pem"),
            rogue_key: path("rogue-key.pem"),
        };
        (r, files)
    }

    /// Starts the server and waits until it answers; an error when it exited first (its port
    /// taken) or never answered.
    fn spawn(&mut self) -> Result<(), String> {
        let dir =
            std::env::temp_dir().join(format!("qcache-redis-{}-{}", std::process::id(), self.port));
        let _ = std::fs::create_dir_all(&dir);
        let child = Command::new(REDIS_SERVER)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--dir", &dir.to_string_lossy()])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {REDIS_SERVER} (apt-get install redis-server): {e}")
            });
        watchdog(std::process::id(), child.id());
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.ping() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited before answering ({status})",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(format!(
            "redis-server on port {} did not answer PING",
            self.port
        ))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).expect("redis running")
    }

    /// True when the server answers PING (or asks for AUTH) within 200 ms.
    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls {
            return true;
        }
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
        // A server with a password answers, too: it is up.
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
    }

    /// SIGKILL, and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().unwrap_or_else(|e| panic!("{e}"));
    }

    /// SIGSTOP: connections stay open, nothing answers.
    pub fn stall(&self) {
        signal("-STOP", self.pid());
    }

    pub fn resume(&self) {
        signal("-CONT", self.pid());
    }

    /// `redis-cli -p PORT args…`, its standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `commands` (one a line, arguments without spaces) sent by one `redis-cli` over one
    /// connection, so that `MULTI` … `EXEC` applies them at once; its standard output.
    pub fn cli_one_connection(&self, commands: &[&str]) -> String {
        let mut child = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli runs");
        let mut input = child.stdin.take().expect("stdin");
        input
            .write_all(format!("{}\n", commands.join("\n")).as_bytes())
            .expect("commands to redis-cli");
        drop(input);
        let out = child.wait_with_output().expect("redis-cli ends");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The keys matching `pattern`.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        self.cli(&["--scan", "--pattern", pattern])
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect()
    }
}

/// The PEM files of a TLS test server ([`Redis::start_mtls`]; only `ca` for
/// [`Redis::start_tls`]).
pub struct TlsFiles {
    pub ca: String,
    pub client_cert: String,
    pub client_key: String,
    /// Self-signed: a client certificate the server must refuse.
    pub rogue_cert: String,
    pub rogue_key: String,
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal(sig: &str, pid: u32) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// Kills the server once the test process is gone (statics are never dropped, and a test may
/// end by a signal).
fn watchdog(owner: u32, pid: u32) {
    const SCRIPT: &str = r#"
while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
kill -CONT "$2" 2>/dev/null; kill -KILL "$2" 2>/dev/null; exit 0
"#;
    let _ = Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("qcache-redis-watchdog")
        .arg(owner.to_string())
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
}

/// A 3-node Redis Cluster (no replicas) on free ports, or why it could not be made.
pub fn cluster() -> Result<Vec<Redis>, String> {
    // The bus port is named: by default it is the client port + 10000, which a free port
    // above 55535 cannot have (the node then refuses to start).
    let nodes: Vec<Redis> = (0..3)
        .map(|_| {
            Redis::start_fresh(|port| {
                let bus = super::free_port().to_string();
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    &format!("nodes-{port}.conf"),
                    "--cluster-port",
                    &bus,
                    "--cluster-node-timeout",
                    "2000",
                ]
                .map(str::to_string)
                .to_vec()
            })
        })
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    // Slots are assigned; wait for every node to agree the cluster is up.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if nodes
            .iter()
            .all(|n| n.cli(&["cluster", "info"]).contains("cluster_state:ok"))
        {
            return Ok(nodes);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("cluster_state never became ok".into())
}
