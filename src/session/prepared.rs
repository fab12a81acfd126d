//! Prepared statements: COM_STMT_PREPARE (hints stripped, kind and context remembered) and
//! COM_STMT_EXECUTE, whose SELECTs are keyed by statement and parameters and go through the
//! read path; the server is given the parameter types the client last sent whenever an
//! execute answered from the cache left it holding others.

use std::sync::Arc;

use bytes::Bytes;

use super::{Session, SessionError};
use crate::analysis;
use crate::cache::Key;
use crate::engine::command::Follow;
use crate::engine::prepared::{
    execute_came, execute_keyed, params_known, prepare_answered, ExecuteCame, ExecuteUp, SentTypes,
};
use crate::engine::read::{hints_for_server, keep_plan, with_plan};
use crate::engine::Planner;
use crate::policy::decide::{Answer, Decide, Step};
use crate::policy::read;
use crate::policy::Reason;
use crate::protocol::codec::Packet;
use crate::protocol::response::Expect;

/// What [`Session::execute_at_once`] did of an execute.
pub(super) enum ExecuteAtOnce {
    /// Served from the cache: the command is done.
    Served,
    /// Not served: how far it got.
    Ahead(ExecuteAhead),
}

/// How far the command loop took an execute it did not serve (`execute_came` done): what
/// it came as, and for a SELECT the session's facts and whether its key was looked up.
pub(crate) struct ExecuteAhead {
    came: ExecuteCame,
    select: Option<(read::Session, bool)>,
}

impl Session {
    pub(crate) async fn stmt_prepare(&mut self, pkt: Packet) -> Result<(), SessionError> {
        let text = analysis::server_text(&pkt.payload[1..], self.st.server);
        let scan = analysis::scan(&text);
        drop(text);
        // The server prepares the hints where it accepts them; the key is hint-free.
        let (sql, payload) = hints_for_server(&pkt.payload, &scan, self.st.mariadb);
        let resp = self
            .exchange(pkt.seq, &payload, Expect::Prepare, None)
            .await?;
        prepare_answered(&mut self.st, resp.prepared, sql, &scan);
        Ok(())
    }

    /// An execute, from where the command loop left it (`ahead`: what
    /// [`execute_at_once`](Self::execute_at_once) did of it; None: nothing).
    pub(crate) async fn stmt_execute(
        &mut self,
        pkt: Packet,
        ahead: Option<ExecuteAhead>,
    ) -> Result<(), SessionError> {
        let (came, select) = match ahead {
            Some(a) => (a.came, a.select),
            None => (execute_came(&mut self.st, &pkt.payload), None),
        };
        match (came, select) {
            (
                ExecuteCame::Select {
                    id,
                    hint,
                    long_data,
                },
                Some((facts, looked_up)),
            ) => {
                // Boxed, as in `execute_select`.
                Box::pin(self.execute_decide(pkt, id, hint, long_data, facts, looked_up)).await
            }
            (
                ExecuteCame::Select {
                    id,
                    hint,
                    long_data,
                },
                None,
            ) => self.execute_select(pkt, id, hint, long_data).await,
            // Boxed: this future is built for every execute, and moving the larger one of
            // an execute that is no cacheable read into it wrote lines cold since the
            // connection's last request on every hit (#36, callgrind's cache model).
            (came, _) => Box::pin(self.execute_not_select(pkt, came)).await,
        }
    }

    /// An execute served from the cache with no await, before the command's future is
    /// built: the steps [`stmt_execute`](Self::stmt_execute) takes for it (`execute_came`,
    /// the session's facts, [`execute_lookup`](Self::execute_lookup), the answer), for a
    /// hit that needs nothing from the server and no flush but the loop's own (#36). What
    /// would await steps aside before anything is touched: facts still waiting for the
    /// catalog, an L2 to confirm with, a keep-alive due. None when not tried (nothing
    /// happened); else served, or how far it got, for `stmt_execute` to go on from.
    pub(super) fn execute_at_once(&mut self, pkt: &Packet) -> Option<ExecuteAtOnce> {
        let started = crate::clock::now();
        if self.facts_wait() || self.shared.l2_remote || self.keep_alive_due(started) {
            return None;
        }
        let came = execute_came(&mut self.st, &pkt.payload);
        let ExecuteCame::Select {
            id,
            hint,
            long_data,
        } = came
        else {
            return Some(ExecuteAtOnce::Ahead(ExecuteAhead { came, select: None }));
        };
        let facts = self.read_facts();
        let looked_up = if self.identified_now() {
            match self.execute_lookup(&facts, pkt, id, hint, long_data, started) {
                Some(Some((_, e))) => {
                    self.answer_hit(&e, started);
                    let took = crate::clock::between(started, crate::clock::now());
                    self.shared.latencies.hit.observe_ns(took);
                    return Some(ExecuteAtOnce::Served);
                }
                Some(None) => true,
                None => false,
            }
        } else {
            false
        };
        Some(ExecuteAtOnce::Ahead(ExecuteAhead {
            came,
            select: Some((facts, looked_up)),
        }))
    }

    /// [`stmt_execute`](Self::stmt_execute) of an execute that is no cacheable read.
    async fn execute_not_select(
        &mut self,
        pkt: Packet,
        came: ExecuteCame,
    ) -> Result<(), SessionError> {
        let id = match came {
            ExecuteCame::AsIs => return self.relay_command(&pkt, Expect::Results).await.map(drop),
            // `stmt_execute` takes reads itself; served here all the same, not assumed away.
            ExecuteCame::Select {
                id,
                hint,
                long_data,
            } => return self.execute_select(pkt, id, hint, long_data).await,
            ExecuteCame::Transaction { id, sql, kind } => {
                if self.answer_transaction_locally(pkt.seq, &sql, kind).await? {
                    return Ok(());
                }
                id
            }
            ExecuteCame::Up { id } => id,
        };
        let planner = Planner::new(&self.shared);
        let (up, next) = planner.execute_up(&mut self.st, id, &pkt.payload);
        let pkt = Packet::new(pkt.seq, up);
        match next {
            ExecuteUp::Write { sql, digest } => self.write(&pkt, &sql, digest).await,
            ExecuteUp::Relay { qct } => {
                self.relay_following(&pkt, Expect::Results, Follow::Qct(qct))
                    .await
            }
            ExecuteUp::Boundary(sent) => {
                let follow = Follow::ExecuteBoundary(sent);
                self.relay_following(&pkt, Expect::Results, follow).await
            }
        }
    }

    /// An execute of a prepared SELECT: the steps of `policy::decide`, carried out. The hit
    /// path borrows the statement and builds its key in the session's scratch buffer: no
    /// clone, no allocation.
    pub(super) async fn execute_select(
        &mut self,
        pkt: Packet,
        id: u32,
        hint: analysis::Hint,
        long_data: bool,
    ) -> Result<(), SessionError> {
        let facts = self.settled_read_facts().await;
        let mut looked_up = false;
        if self.identified_now() {
            match self
                .execute_hit_at_once(&facts, &pkt, id, hint, long_data)
                .await?
            {
                Some(true) => return Ok(()),
                Some(false) => looked_up = true,
                None => {}
            }
        }
        // Boxed: a hit builds only the small future above, not this large one (#36).
        Box::pin(self.execute_decide(pkt, id, hint, long_data, facts, looked_up)).await
    }

    /// The rest of [`execute_select`](Self::execute_select) once the hit at once did not
    /// serve: the steps of `policy::decide` from the start.
    async fn execute_decide(
        &mut self,
        pkt: Packet,
        id: u32,
        hint: analysis::Hint,
        long_data: bool,
        facts: read::Session,
        looked_up: bool,
    ) -> Result<(), SessionError> {
        // An execute may be answered locally, as a text read is (a read of qcache's
        // `query_cache_type`: the server's answer with qcache's value, `Step::Local`).
        let (mut d, mut step) = Decide::start(&facts, hint, true, looked_up);
        // Whether the execute's parameters were read (`Step::Via`), and the key they gave.
        let mut came = false;
        let mut keyed: Option<Key> = None;
        let mut planned_for = None;
        let mut kept = None;
        loop {
            let answer = match step {
                Step::Identify => {
                    // The common case (identified, nothing to read back) copies no text.
                    if self.identified_now() {
                        Answer::Identified(true)
                    } else {
                        let Some(sql) = self.st.stmts.get(&id).map(|s| s.sql.clone()) else {
                            return self.relay_command(&pkt, Expect::Results).await.map(drop);
                        };
                        Answer::Identified(self.identify_for(&sql).await?)
                    }
                }
                Step::Via => {
                    came = true;
                    let Some(next) = self.execute_came(&mut d, &pkt, id, long_data, &mut keyed)
                    else {
                        return self.relay_command(&pkt, Expect::Results).await.map(drop);
                    };
                    step = next;
                    continue;
                }
                // Answered with the key in `execute_came`.
                Step::Key => Answer::Keyed,
                Step::Consult(mode) => {
                    // `consult`, written out: on an execute's hit path its nested future cost
                    // about 100 instructions per hit (callgrind), over the 2% the hit path
                    // may move.
                    let started = crate::clock::now();
                    let mut served = false;
                    if let Some(k) = keyed {
                        if let Some(e) = self.lookup(k, &mode) {
                            if !self.shared.l2_remote || self.l2_confirm(k, &e).await {
                                self.serve_hit(&e, started).await?;
                                served = true;
                            }
                        }
                    }
                    Answer::Looked(served)
                }
                Step::Local => {
                    if let Some(rw) = self.prepared_variable_answer(id) {
                        let Some(s) = self.st.stmts.get_mut(&id) else {
                            return self.relay_command(&pkt, Expect::Results).await.map(drop);
                        };
                        if !came {
                            s.learn_types(&pkt.payload);
                        }
                        let (up, typed) = s.execute_for_upstream(&pkt.payload);
                        let sent = Packet::new(pkt.seq, up);
                        self.relay_rewriting_as(&sent, rw, true).await?;
                        if let Some(s) = self.st.stmts.get_mut(&id) {
                            s.types_sent(typed);
                        }
                        return Ok(());
                    }
                    Answer::Local(false)
                }
                Step::Plan => {
                    let Some((sql, digest, an)) = self.prepared_analysis(id) else {
                        return self.relay_command(&pkt, Expect::Results).await.map(drop);
                    };
                    let params = params_known(&self.st, id, &pkt.payload);
                    let plan = match keyed {
                        Some(k) => self.plan_read(&an, k, digest, &sql, params).await,
                        None => Err(Reason::MalformedExecute),
                    };
                    planned_for = Some((sql, an));
                    Answer::Planned(keep_plan(plan, &mut kept))
                }
                Step::Served => return Ok(()),
                Step::Decided(planned, mode) => {
                    return self
                        .execute_decided(
                            &pkt,
                            id,
                            with_plan(planned, kept),
                            mode,
                            came,
                            keyed.is_some(),
                            planned_for,
                        )
                        .await;
                }
            };
            step = d.next(answer);
        }
    }

    /// Statement `id`'s text, digest and analysis; None when it is gone.
    fn prepared_analysis(&self, id: u32) -> Option<(Bytes, u64, Arc<analysis::Analysis>)> {
        let (sql, digest) = self.st.stmts.get(&id).map(|s| (s.sql.clone(), s.digest))?;
        let an = self.analysis_of(&sql, Some(digest));
        Some((sql, digest, an))
    }

    /// How qcache answers an execute of statement `id` when it reads qcache's own
    /// `query_cache_type` (`engine::answers::session_variable`): the server's result with
    /// qcache's value in those columns, as the text read is answered. None otherwise, and
    /// for MySQL's own one-row answer, which a binary result is not built for (MySQL has no
    /// such variable: it refuses to prepare the statement).
    fn prepared_variable_answer(&self, id: u32) -> Option<crate::protocol::rows::Rewrite> {
        let sql = self.st.stmts.get(&id)?.sql.clone();
        match self.session_variable_answer(&sql)? {
            crate::engine::answers::VarAnswer::Relay(rw) => Some(rw),
            crate::engine::answers::VarAnswer::Own(_) => None,
        }
    }

    /// `Step::Via` of an execute (`engine::prepared::execute_keyed` with the machine
    /// deciding whether it is keyed). The machine's next step; None when the statement is
    /// gone.
    fn execute_came(
        &mut self,
        d: &mut Decide<crate::cache::Snapshot>,
        pkt: &Packet,
        id: u32,
        long_data: bool,
        keyed: &mut Option<Key>,
    ) -> Option<Step<crate::cache::Snapshot, ()>> {
        let view = self.st.txn.read_view();
        let hits_suspended = self.shared.hits_suspended();
        let mut step = Step::Served;
        *keyed = execute_keyed(
            &mut self.st,
            &mut self.key_scratch,
            &pkt.payload,
            id,
            long_data,
            |via| {
                step = d.next(Answer::Came {
                    via,
                    view,
                    hits_suspended,
                });
                matches!(step, Step::Key)
            },
        )?;
        Some(step)
    }

    /// The hit of an execute whose session has nothing to ask (identified, no setting to
    /// read back): [`execute_lookup`](Self::execute_lookup), then the answer. None when not
    /// tried (the machine decides from the start); Some(served) once looked up.
    async fn execute_hit_at_once(
        &mut self,
        facts: &read::Session,
        pkt: &Packet,
        id: u32,
        hint: analysis::Hint,
        long_data: bool,
    ) -> Result<Option<bool>, SessionError> {
        let started = crate::clock::now();
        let Some(found) = self.execute_lookup(facts, pkt, id, hint, long_data, started) else {
            return Ok(None);
        };
        if let Some((key, e)) = found {
            // Boxed, as the text hit's rare awaits are (`hit_before_scan`).
            if !self.shared.l2_remote || Box::pin(self.l2_confirm(key, &e)).await {
                self.serve_hit(&e, started).await?;
                return Ok(Some(true));
            }
        }
        Ok(Some(false))
    }

    /// The lookup of an execute whose session has nothing to ask: the machine's first
    /// steps at once (`Decide::consult_at_once`), with the key `execute_keyed` builds, then
    /// the lookup. None when not tried; Some(the entry found, under its key) once looked
    /// up. `consult`, written out: on an execute's hit path its nested future cost about
    /// 100 instructions per hit (callgrind).
    #[inline(always)]
    fn execute_lookup(
        &mut self,
        facts: &read::Session,
        pkt: &Packet,
        id: u32,
        hint: analysis::Hint,
        long_data: bool,
        started: u64,
    ) -> Option<Option<(Key, Arc<crate::cache::Entry>)>> {
        let view = self.st.txn.read_view();
        let hits_suspended = self.shared.hits_suspended_at(started);
        let mut consult = None;
        let keyed = execute_keyed(
            &mut self.st,
            &mut self.key_scratch,
            &pkt.payload,
            id,
            long_data,
            |via| {
                consult = Decide::consult_at_once(facts, hint, &via, view, hits_suspended);
                consult.is_some()
            },
        );
        let (Some(Some(key)), Some(mode)) = (keyed, consult) else {
            return None;
        };
        Some(self.lookup(key, &mode).map(|e| (key, e)))
    }

    /// Carries out an execute's decision: what goes upstream carries the types the client
    /// last sent, and only an execute that reached the server taught it them (one served
    /// from another session's fill did not). `came`: its parameters were read; `key_kept`:
    /// it was keyed. `planned_for`: its text and analysis, when it was planned.
    #[allow(clippy::too_many_arguments)]
    async fn execute_decided(
        &mut self,
        pkt: &Packet,
        id: u32,
        planned: read::Planned<crate::engine::read::ReadPlan>,
        mode: Option<crate::engine::read::ReadMode>,
        came: bool,
        key_kept: bool,
        planned_for: Option<(Bytes, Arc<analysis::Analysis>)>,
    ) -> Result<(), SessionError> {
        let not_keyed = match &planned {
            read::Planned::Relay { reason, .. } if !key_kept => Some(*reason),
            _ => None,
        };
        if let Some(s) = self.st.stmts.get_mut(&id) {
            s.before_decided(&pkt.payload, came, not_keyed);
        }
        let Some((sql, an)) = planned_for.or_else(|| {
            let (sql, _, an) = self.prepared_analysis(id)?;
            Some((sql, an))
        }) else {
            return self.relay_command(pkt, Expect::Results).await.map(drop);
        };
        let (up, typed) = match self.st.stmts.get(&id) {
            Some(s) => s.execute_for_upstream(&pkt.payload),
            None => (pkt.payload.clone(), SentTypes::None),
        };
        self.read_answer = None;
        let went = self
            .carry_out(planned, &an, pkt.seq, &up, &sql, mode)
            .await?;
        if went {
            let answer = self.read_answer.take();
            if let Some(s) = self.st.stmts.get_mut(&id) {
                s.after_execute(typed, answer);
            }
        }
        Ok(())
    }
}
