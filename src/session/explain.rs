//! `QCACHE EXPLAIN <statement>`, `QCACHE EXPLAIN STATEMENT <id>` (a binary-protocol prepared
//! statement, keyed with its last bound parameters) and `SHOW QCACHE LAST`: what this session
//! would do with a statement, asked of the same functions a real statement goes through
//! (without sending it), and how its previous statement went.
//!
//! Who sees what: both speak of the session's own statements, so any user may run them.
//! What EXPLAIN would otherwise reveal of other sessions — whether an entry is present (and
//! so whether its verdict is "hit") when users share entries (`cache.shared_between_users`),
//! the tables under views, the operator's rules — is shown only to users with the admin
//! privilege (RELOAD or `admin.users`). With per-user keys (the default) an entry under
//! this session's key was stored by its own account, so its presence is no one else's.

use super::{Session, SessionError};
use crate::admin::statements::Rows;
use crate::analysis::{self, Analysis, StatementKind};
use crate::cache::key;
use crate::cache::key::{TAG_BINARY, TAG_TEXT};
use crate::engine::explain::{self as words, rows, Fields, Verdict};
use crate::policy::decide::{Answer, Decide, Step};
use crate::policy::read::{Planned, Via};
use crate::policy::Reason;

/// What EXPLAIN asks about: a statement (its text, hints stripped), how it arrives, and its
/// key's tag and material (None for a prepared statement whose parameters are not bound yet:
/// its key is not known).
struct Asked<'a> {
    stmt: &'a [u8],
    hint: crate::analysis::Hint,
    via: Via,
    keyed: Option<(u8, &'a [u8])>,
    /// A prepared statement's context at PREPARE, compared with the session's once its
    /// stale context is read back (`policy::read::Execute::context_moved`).
    prepared_in: Option<u64>,
    /// What is known of an execute's bound parameters (`policy::timecol::params_known`);
    /// nothing for text.
    params: crate::policy::timecol::Params,
}

impl Session {
    /// `QCACHE EXPLAIN <sql>`: the path `query` would take, step by step, stopping before
    /// anything is sent. It may ask the server who the session is (as the statement's own
    /// first lookup would) and reload the catalog for an unknown table; it never runs `sql`.
    pub(crate) async fn explain(&mut self, sql: &[u8]) -> Result<Rows, SessionError> {
        let privileged = self.may_administer().await?;
        let text = analysis::server_text(sql, self.st.server).into_owned();
        let scan = analysis::scan(&text);
        let mut f = words::statement_fields(sql, &text);
        let verdict = self.explain_verdict(sql, &scan, privileged, &mut f).await?;
        f.insert(3, ("decision", Some(verdict.decision.to_string())));
        f.insert(4, ("reason", verdict.reason));
        if scan.kind == analysis::StatementKind::Select {
            let planner = crate::engine::Planner::new(&self.shared);
            let patch = planner.explain_patch(&self.st, &text, false, self.shared.l2.is_some());
            f.push(("patched_by_insert", Some(patch)));
        }
        f.extend(words::key_context(&self.st));
        Ok(rows(f))
    }

    /// `QCACHE EXPLAIN STATEMENT <id>` (`LAST`: the one prepared last): what an execute of
    /// the session's binary-protocol prepared statement would do, keyed with the parameters
    /// its last execute bound, under the session as it is now. Never executes it.
    pub(crate) async fn explain_statement(
        &mut self,
        id: Option<u32>,
    ) -> Result<Rows, SessionError> {
        let privileged = self.may_administer().await?;
        let (p, mut f) = match words::statement(&self.st, id) {
            Ok(asked) => asked,
            Err(rows) => return Ok(rows),
        };
        let kind = p.kind;
        let verdict = if kind != StatementKind::Select {
            Verdict::not_a_read(kind)
        } else {
            let asked = Asked {
                stmt: &p.sql,
                hint: p.hint,
                via: Via::Execute(p.execute),
                keyed: p.material.as_deref().map(|m| (TAG_BINARY, m)),
                prepared_in: Some(p.context),
                params: p.params,
            };
            self.explain_read(asked, privileged, &mut f).await?
        };
        f.insert(4, ("decision", Some(verdict.decision.to_string())));
        f.insert(5, ("reason", verdict.reason));
        f.extend(words::key_context(&self.st));
        Ok(rows(f))
    }

    async fn explain_verdict(
        &mut self,
        sql: &[u8],
        scan: &analysis::Scan,
        privileged: bool,
        f: &mut Fields,
    ) -> Result<Verdict, SessionError> {
        if let Some(v) = words::before_read(scan, f) {
            return Ok(v);
        }
        let stmt: Vec<u8> = if scan.hint_spans.is_empty() {
            sql.to_vec()
        } else {
            analysis::strip_hints(sql, scan).into_owned()
        };
        let material = analysis::key_text(&stmt).to_vec();
        let asked = Asked {
            stmt: &stmt,
            hint: scan.hint,
            via: Via::Text,
            keyed: Some((TAG_TEXT, &material)),
            prepared_in: None,
            params: crate::policy::timecol::Params::UNKNOWN,
        };
        self.explain_read(asked, privileged, f).await
    }

    /// The read path from the session's state on, for a text statement or a prepared one:
    /// the machine a read drives (`policy::decide`), driven here without effects: nothing
    /// is served, sent or stored, so EXPLAIN takes every step the read takes, in its order.
    async fn explain_read(
        &mut self,
        asked: Asked<'_>,
        privileged: bool,
        f: &mut Fields,
    ) -> Result<Verdict, SessionError> {
        let Asked {
            stmt,
            hint,
            mut via,
            keyed,
            prepared_in,
            params,
        } = asked;
        let facts = self.settled_read_facts().await;
        let (mut d, mut step) = Decide::start(&facts, hint, via == Via::Text, false);
        let mut k = None;
        // The statement's analysis and digest, once its entry is described.
        let mut described = None;
        let mut kept = None;
        loop {
            let answer = match step {
                Step::Identify => Answer::Identified(self.identify_for(stmt).await?),
                Step::Via => {
                    if let (Via::Execute(e), Some(at)) = (&mut via, prepared_in) {
                        e.context_moved =
                            crate::policy::context::prepared_context_moved(at, self.st.prepare_ctx);
                    }
                    step = d.next(Answer::Came {
                        via,
                        view: self.st.txn.read_view(),
                        hits_suspended: self.shared.hits_suspended(),
                    });
                    if let Step::Decided(
                        Planned::Relay {
                            reason: Reason::Cursor | Reason::LongData | Reason::MalformedExecute,
                            ..
                        },
                        _,
                    ) = step
                    {
                        // How the client executes it, not the session: the next execute
                        // like it.
                        f.push((
                            "note",
                            Some(
                                "as its last execute was sent; an execute sent otherwise may \
                                 differ"
                                    .into(),
                            ),
                        ));
                    }
                    continue;
                }
                Step::Key => {
                    k = keyed.map(|(tag, m)| key(self.st.fingerprint, tag, m));
                    Answer::Keyed
                }
                Step::Consult(mode) => {
                    let present = k.and_then(|k| self.cached().servable(k, &mode)).is_some();
                    let (an, digest, verdict) =
                        self.explain_entry(stmt, k, present, privileged, f).await;
                    if let Some(v) = verdict {
                        return Ok(v);
                    }
                    described = Some((an, digest));
                    Answer::Looked(false)
                }
                Step::Local => {
                    if self.session_variable_answer(stmt).is_some() {
                        return Ok(Verdict {
                            decision: "answer",
                            reason: Some("qcache answers it with its own value".into()),
                        });
                    }
                    Answer::Local(false)
                }
                Step::Plan => {
                    let (an, digest) = match described.take() {
                        Some(d) => d,
                        None => {
                            // Not consulted (no view): described without an entry to serve.
                            let (an, digest, verdict) =
                                self.explain_entry(stmt, k, false, privileged, f).await;
                            if let Some(v) = verdict {
                                return Ok(v);
                            }
                            (an, digest)
                        }
                    };
                    // The plan does not depend on the key (only the store does): any key
                    // will do.
                    let plan_key = k.unwrap_or_else(|| key(self.st.fingerprint, 0, &[]));
                    let plan = self.plan_read(&an, plan_key, digest, stmt, params).await;
                    Answer::Planned(crate::engine::read::keep_plan(plan, &mut kept))
                }
                Step::Served => return Ok(Verdict::hit()),
                Step::Decided(planned, mode) => {
                    return Ok(match crate::engine::read::with_plan(planned, kept) {
                        Planned::Fill(plan) => self.explain_fill(&plan, k, mode, privileged, f),
                        Planned::Relay { reason, .. } => Verdict::send(reason),
                    });
                }
            };
            step = d.next(answer);
        }
    }

    /// What a read that was not served finds of its statement and entry: the tables (and,
    /// for the privileged, the rule), whether an entry is present, and the verdict when the
    /// entry decides it (present, or outdated under a `max_stale` rule that serves it).
    /// `present`: an entry this session may be served is under the key; `mode`: the view
    /// the cache was consulted in.
    async fn explain_entry(
        &self,
        stmt: &[u8],
        k: Option<crate::cache::Key>,
        present: bool,
        privileged: bool,
        f: &mut Fields,
    ) -> (std::sync::Arc<Analysis>, u64, Option<Verdict>) {
        // A present entry is this account's own unless users share entries.
        let may_see_entry = privileged || !self.st.shared_users;
        let digest = analysis::digest(&analysis::server_text(stmt, self.st.server));
        let an = self.analysis_of(stmt, Some(digest));
        // The tables it names and, for the privileged, those under its views and the rule
        // that matches (`engine::explain::tables`); resolving them may refresh the catalog.
        if let Analysis::Read(info) = &*an {
            let resolved = match privileged {
                true => Some(self.resolve_tables(info).await),
                false => None,
            };
            let cfg = self.shared.config();
            words::tables(&self.st, info, resolved, &cfg.rules, (digest, stmt), f);
        }
        let holds = |k| self.shared.cache.holds_servable(k);
        let v = words::entry(k, present, holds, may_see_entry, f);
        (an, digest, v)
    }

    /// The verdict on a read planned to fill: the same decision a miss makes (`fill_view`),
    /// so EXPLAIN cannot drift from it. `k`: the key, None while an execute's parameters are
    /// not bound.
    fn explain_fill(
        &self,
        plan: &crate::engine::read::ReadPlan,
        k: Option<crate::cache::Key>,
        mode: Option<crate::engine::read::ReadMode>,
        privileged: bool,
        f: &mut Fields,
    ) -> Verdict {
        let start = self
            .cached()
            .miss_start(plan, mode, self.shared.l2_remote)
            .map(|(_, stale)| stale);
        let may_see_entry = privileged || !self.st.shared_users;
        words::fill(start, k.is_some(), may_see_entry, &plan.opts, f)
    }
}
