//! The state every session shares: the running config, the cache, the analysis memo, the
//! read plans, the schema catalog, the binlog tail and the counters /metrics reads. The
//! listener (`server`) builds it once; sessions and the admin surfaces hold an `Arc` of it.
//!
//! [`reload`]: SIGHUP and POST /reload re-read the config (and the log filter).

pub mod reload;
pub mod verify;

pub use reload::set_log_reloader;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::analysis::{self, Analysis, Analyzer, WriteTargets};
use crate::cache::plans::ReadPlans;
use crate::cache::sliceplans::SlicePlans;
use crate::cache::Cache;
use crate::cli::Cli;
use crate::config::{BinlogMode, Config};
use crate::invalidation::binlog::{self, BinlogHandle, WriteAnalyser};
use crate::invalidation::catalog::{Catalog, Changed};
use crate::invalidation::ddl;
use crate::invalidation::{Invalidation, Invalidator};
use crate::observe::digests::Digests;
use crate::observe::latency::Latencies;

/// State shared by every session.
pub struct Shared {
    config: ArcSwap<Config>,
    /// Results, table versions and the counters behind Qcache_*.
    pub cache: Cache,
    /// The one invalidation entry point, over `cache`'s versions and counters: every source
    /// applies its [`Invalidation`] through it.
    pub invalidator: Invalidator,
    /// Statement analyses memoised by digest.
    pub analyzer: Analyzer,
    /// The tables each read shape depends on, per default database.
    pub plans: ReadPlans,
    /// The slice plan of each statement a miss planned, per database and parameter values.
    pub slice_plans: SlicePlans,
    /// Views, triggers and cascading foreign keys of the upstream's schemas.
    pub catalog: Arc<Catalog>,
    /// The binlog tail, when it runs.
    pub binlog: Option<Arc<BinlogHandle>>,
    /// The shared second level (`l2.mode = "on"`); its settings need a restart.
    pub l2: Option<Arc<crate::l2::L2>>,
    /// `l2.validate_hits = "remote"` with L2 on: the one flag an L1 hit reads.
    pub l2_remote: bool,
    /// Client connections open now.
    pub connections: AtomicU64,
    /// Hit and miss timings for /metrics.
    pub latencies: Latencies,
    /// Per-digest statistics (`SHOW QCACHE DIGESTS`, `/digests`).
    pub digests: Digests,
    /// The command line the config came from, for SIGHUP and POST /reload; None when started
    /// from a bare `Config` (then there is nothing to re-read).
    reload_source: std::sync::Mutex<Option<Cli>>,
    /// The id the next session gets (the listener hands them out).
    pub(crate) next_session: AtomicU64,
    /// Per server version (its id and flavour), which of the optional key variables
    /// (`policy::context::optional_key_variables`) the server has: asked at the first connect
    /// to that version, then read with the others (`session::context`).
    pub(crate) optional_vars: std::sync::Mutex<Vec<OptionalVars>>,
    /// DDL through qcache whose reload has not started (`reload_after_ddl`): the next reload
    /// takes them all, so that a burst of DDL (a migration) costs one reload per reload time
    /// rather than one per statement queued behind each other.
    ddl_queue: std::sync::Mutex<Vec<(u64, Changed)>>,
    /// One DDL reload at a time, so that the queue drains into the next one.
    ddl_reloading: tokio::sync::Mutex<()>,
}

/// A server version (its id and flavour) and the optional key variables it has.
pub(crate) type OptionalVars = ((u32, bool), Vec<&'static str>);

impl Shared {
    /// Builds the shared state; the binlog tail and the first catalog load start in the
    /// background of the current runtime.
    pub fn new(config: Config) -> Shared {
        let cache = Cache::new(&config.cache);
        let invalidator = Invalidator::new(cache.versions_arc(), cache.stats_arc());
        let analyzer = Analyzer::new(config.cache.analysis_memo_entries);
        let plans = ReadPlans::new(config.cache.analysis_memo_entries);
        let slice_plans = SlicePlans::new(config.cache.analysis_memo_entries);
        let upstream = config.server.upstream.clone();
        let catalog = Catalog::new(upstream.clone(), &config.invalidation);
        let c2 = catalog.clone();
        tokio::spawn(async move {
            // A failure is logged by the catalog itself, once, naming qcache's account.
            let _ = c2.refresh().await;
        });
        // With L2 and `l2.binlog_tails` > 0 the fleet's lease decides whether this instance
        // streams (`l2::tails`): it starts as a standby and opens no stream until told to.
        let leased = config.l2.enabled() && config.l2.binlog_tails > 0;
        let binlog = (config.invalidation.binlog != BinlogMode::Off).then(|| {
            let mut inv = config.invalidation.clone();
            inv.server_id = inv.effective_server_id();
            binlog::spawn_with(
                upstream,
                inv,
                cache.versions_arc(),
                cache.stats_arc(),
                catalog.clone(),
                binlog_analyser(catalog.clone()),
                !leased,
            )
        });
        let l2 = config.l2.enabled().then(|| {
            let tail = binlog.clone().map(|b| b as Arc<dyn crate::l2::TailStatus>);
            // Column ids for row slices in L2, from the catalog this instance keys slices by.
            let cat = catalog.clone();
            let ids: crate::l2::ColumnIds = Arc::new(move |schema, table, column| {
                let info = cat.column(&(schema.to_string(), table.to_string()), column)?;
                Some(crate::l2::column_id(column, &info))
            });
            let learned = crate::invalidation::l2::on_learned(invalidator.clone(), catalog.clone());
            let l2 = crate::l2::L2::start(
                config.l2.clone(),
                cache.versions_arc(),
                tail,
                Some(ids),
                learned,
            );
            if let (true, Some(b)) = (leased, &binlog) {
                // Standbys have no stream: the DDL this one's stream sees reaches their
                // catalogs through L2. Weak: L2 holds the tail already.
                let weak = Arc::downgrade(&l2);
                b.on_ddl(Arc::new(move |changed| {
                    if let Some(l2) = weak.upgrade() {
                        l2.publish_ddl(changed);
                    }
                }));
            }
            l2
        });
        let l2_remote = l2.as_ref().is_some_and(|l| l.remote_validation());
        let digests = Digests::new(config.stats.digests);
        Shared {
            digests,
            l2,
            l2_remote,
            config: ArcSwap::from_pointee(config),
            cache,
            invalidator,
            analyzer,
            plans,
            slice_plans,
            catalog,
            binlog,
            connections: AtomicU64::new(0),
            latencies: Default::default(),
            reload_source: std::sync::Mutex::new(None),
            next_session: AtomicU64::new(1),
            optional_vars: std::sync::Mutex::new(Vec::new()),
            ddl_queue: std::sync::Mutex::new(Vec::new()),
            ddl_reloading: tokio::sync::Mutex::new(()),
        }
    }

    /// While the binlog stream has been down longer than `max_lag`, or is more than
    /// `max_lag` behind the server or cannot tell (`policy::lag`), writes that bypass qcache
    /// may be missed: no hits until it is back and caught up.
    pub fn hits_suspended(&self) -> bool {
        self.hits_suspended_at(crate::clock::now())
    }

    /// [`hits_suspended`](Self::hits_suspended) as of `now`: a hit passes the clock it
    /// already read for its latency, so the lag bound costs it no second clock read
    /// (about 100 instructions per hit under callgrind).
    pub fn hits_suspended_at(&self, now: u64) -> bool {
        match &self.binlog {
            Some(b) => crate::policy::lag::hits_stop(
                b.lag_at(now),
                self.config.load().invalidation.max_lag,
            ),
            None => false,
        }
    }

    /// A child write's parent lookups, asked in order (`Catalog::parent_lookups`; under the
    /// debug fault `BusyParentLookups` every one finds no idle connection, under
    /// `SlowParentLookups` each waits first).
    pub async fn parent_lookups(
        &self,
        questions: &[Vec<(crate::cache::fkmap::MapKey, Vec<i128>)>],
    ) -> Vec<Vec<crate::invalidation::catalog::Lookup>> {
        use crate::faults::{Fault, SLOW_PARENT_LOOKUP};
        let faults = &self.cache.versions().faults;
        if faults.on(Fault::SlowParentLookups) {
            tokio::time::sleep(SLOW_PARENT_LOOKUP).await;
        }
        let busy = faults.on(Fault::BusyParentLookups);
        self.catalog.parent_lookups(questions, busy).await
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Applies an invalidation (the entry point every source uses); returns the tables
    /// bumped.
    pub fn invalidate(&self, inv: &Invalidation) -> u64 {
        self.invalidator.apply(inv)
    }

    /// Learns what DDL `seq` (registered with [`Catalog::register_ddl`] before its OK went
    /// out) changed, in the background: the session relays the OK at once, and until the
    /// reload has landed the catalog answers unknown for what the DDL named
    /// (`invalidation::pending`). Lands after the second bump, whether the reload worked or
    /// not (a failed one invalidated everything).
    ///
    /// DDL queued while a reload runs are reloaded together by the next one: what they
    /// changed, merged, is reloaded and bumped once, and they all land after it.
    pub fn reload_after_ddl(self: &Arc<Self>, seq: u64, changed: Changed) {
        self.ddl_queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((seq, changed));
        let shared = self.clone();
        tokio::spawn(async move {
            let _one = shared.ddl_reloading.lock().await;
            let queued =
                std::mem::take(&mut *shared.ddl_queue.lock().unwrap_or_else(|e| e.into_inner()));
            if queued.is_empty() {
                // An earlier task's reload took this DDL with its own.
                return;
            }
            let mut all = Changed::default();
            for (_, c) in &queued {
                all.extend(c);
            }
            shared.refresh_catalog(&all).await;
            for (seq, _) in queued {
                shared.catalog.ddl_landed(seq);
            }
        });
    }

    /// Reloads what a DDL changed in the schema catalog ([`reload_after_ddl`](Self::reload_after_ddl)
    /// runs it in the background).
    ///
    /// Then the DDL's tables are widened again with the reloaded catalog and bumped: a DDL
    /// may run what it just defined (`CREATE TABLE t (id INT DEFAULT NEXTVAL(s)) SELECT …`,
    /// `ALTER TABLE t ADD c INT DEFAULT NEXTVAL(s)` fill rows with the default), which the
    /// catalog could not know when the statement was planned; and a read that resolved with
    /// the old catalog before the DDL was registered holds stamps this bump makes stale.
    pub async fn refresh_catalog(&self, changed: &Changed) {
        self.cache.versions().faults.before_catalog_reload().await;
        if let Some(inv) = ddl::reload(&self.catalog, changed).await {
            self.invalidate(&inv);
        }
    }
}

/// What the binlog tail uses for statement events: the same analysis as proxied writes.
fn binlog_analyser(catalog: Arc<Catalog>) -> WriteAnalyser {
    Arc::new(move |sql: &str, default_schema: &str| {
        let qualify = |schema: &Option<String>, name: &str| {
            let s = schema
                .clone()
                .unwrap_or_else(|| default_schema.to_lowercase());
            (s, name.to_lowercase())
        };
        match analysis::analyze(sql) {
            Analysis::Write(w) => match w.targets {
                WriteTargets::Tables(list) => {
                    Some(list.iter().map(|t| qualify(&t.schema, &t.name)).collect())
                }
                WriteTargets::Schema(s) => {
                    let s = s.to_lowercase();
                    Some(
                        catalog
                            .schema_tables(&s)
                            .into_iter()
                            .map(|n| (s.clone(), n))
                            .collect(),
                    )
                }
                WriteTargets::Unknown => None,
            },
            Analysis::Read(r) if r.may_write => None,
            _ => Some(Vec::new()),
        }
    })
}
