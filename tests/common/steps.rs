//! Step lists run directly and through qcache by the Rust differential tests
//! (`tests/privileges.rs`, `tests/diagnostics.rs`): each step names its connection and
//! statement, and a run returns every step's rows or error with the run's names put back.

use std::collections::HashMap;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Row};

/// One step: the connection (`root`, or `name:user` opened as `user{u}` with password `pw`;
/// a `!` prefix opens it straight to the server in every run) and the statement.
/// `sleep N` pauses N ms.
pub type Step = (&'static str, &'static str);

pub type Outcome = Result<Vec<Vec<String>>, String>;

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
            return Ok(Vec::new());
        }
        let sql = self.fill(sql);
        let c = self.conn(who).await;
        // `P …`: through the binary protocol.
        let res = match sql.strip_prefix("P ") {
            Some(sql) => c.exec::<Row, _, _>(sql, ()).await,
            None => c.query::<Row, _>(sql).await,
        };
        match res {
            Ok(rows) => Ok(rows
                .into_iter()
                .map(|r| r.unwrap().into_iter().map(|v| format!("{v:?}")).collect())
                .collect()),
            Err(mysql_async::Error::Server(e)) => Err(format!("{} {}", e.code, e.message)),
            Err(e) => panic!("{who}: {e}"),
        }
    }
}

pub async fn run(schema: &str, steps: &[Step], proxy: Option<&super::TestProxy>) -> Vec<Outcome> {
    let mut r = Run {
        schema,
        suffix: super::unique_name("u"),
        proxy,
        conns: HashMap::new(),
    };
    let mut out = Vec::new();
    for (who, sql) in steps {
        // Names are the run's own; errors are compared with them put back.
        let o = r.step(who, sql).await;
        out.push(o.map_err(|e| e.replace(&r.suffix, "{u}").replace(schema, "{db}")));
    }
    for (_, c) in r.conns.drain() {
        let _ = c.disconnect().await;
    }
    out
}
