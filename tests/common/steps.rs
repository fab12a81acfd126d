//! Step lists run directly and through qcache by the Rust differential tests
//! (`tests/privileges.rs`, `tests/diagnostics.rs`): each step names its connection and
//! statement, and a run returns every step's outcome (`outcome::Outcome`, compared as the
//! scenario files' are) with the run's names put back.

use std::collections::HashMap;
use std::time::Duration;

use mysql_async::Conn;

use super::outcome;

/// One step: the connection (`root`, or `name:user` opened as `user{u}` with password `pw`;
/// a `!` prefix opens it straight to the server in every run) and the statement.
/// `sleep N` pauses N ms.
pub type Step = (&'static str, &'static str);

pub use super::outcome::Outcome;

struct Run<'a> {
    schema: &'a str,
    suffix: String,
    proxy: Option<&'a super::TestProxy>,
    conns: HashMap<String, Conn>,
}

impl Run<'_> {
    fn fill(&self, s: &str) -> String {
        s.replace("{db}", self.schema).replace("{u}", &self.suffix)
    }

    async fn conn(&mut self, spec: &str) -> &mut Conn {
        if !self.conns.contains_key(spec) {
            let direct = spec.starts_with('!');
            let spec_t = spec.trim_start_matches('!');
            let (user, pw) = match spec_t.split_once(':') {
                Some((_, u)) => (self.fill(u), "pw".to_string()),
                None => ("root".to_string(), String::new()),
            };
            let d = super::db();
            let addr = match (self.proxy, direct) {
                (Some(p), false) => p.addr.to_string(),
                _ => d.addr(),
            };
            let auth = if pw.is_empty() {
                user
            } else {
                format!("{user}:{pw}")
            };
            // No default database: a user without privileges on it could not connect at all.
            let url = format!("mysql://{auth}@{addr}/?prefer_socket=false");
            let c = Conn::from_url(url)
                .await
                .unwrap_or_else(|e| panic!("connect {spec}: {e}"));
            self.conns.insert(spec.to_string(), c);
        }
        self.conns.get_mut(spec).unwrap()
    }

    async fn step(&mut self, who: &str, sql: &str) -> Outcome {
        if let Some(ms) = sql.strip_prefix("sleep ") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            return Outcome::new();
        }
        let sql = self.fill(sql);
        let c = self.conn(who).await;
        // `P …`: through the binary protocol.
        match sql.strip_prefix("P ") {
            Some(sql) => outcome::run_prepared(c, sql).await,
            None => outcome::run_text(c, &sql).await,
        }
    }
}

/// Runs `steps` (directly when `proxy` is None); every step's [`Outcome`], with the run's
/// names put back as `{u}` and `{db}`.
pub async fn run(schema: &str, steps: &[Step], proxy: Option<&super::TestProxy>) -> Vec<Outcome> {
    let mut r = Run {
        schema,
        suffix: super::unique_name("u"),
        proxy,
        conns: HashMap::new(),
    };
    let mut out = Vec::new();
    for (who, sql) in steps {
        let o = r.step(who, sql).await;
        out.push(o.replace(&r.suffix, "{u}").replace(schema, "{db}"));
    }
    for (_, c) in r.conns.drain() {
        let _ = c.disconnect().await;
    }
    out
}

/// Panics with the first step whose outcome through qcache (`got`) differs from the
/// server's (`want`), or when the runs produced different numbers of outcomes
/// (`outcome::compare`, the scenario files' comparison).
pub fn assert_same(steps: &[Step], want: &[Outcome], got: &[Outcome]) {
    let label = |o: &[Outcome]| -> Vec<(String, Outcome)> {
        o.iter()
            .enumerate()
            .map(|(i, o)| {
                let (who, sql) = steps.get(i).copied().unwrap_or(("?", "?"));
                (format!("step {i} ({who}: {sql})"), o.clone())
            })
            .collect()
    };
    if let Err(e) = outcome::compare(&label(want), &label(got)) {
        panic!("qcache answered differently: {e}");
    }
}
