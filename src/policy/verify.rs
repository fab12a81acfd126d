//! Which patched aggregates the verifier re-reads (`cache.verify_patched`): a budget of
//! server time per statement shape, earned by the misses its patches saved.
//!
//! A verification re-reads the aggregate from the server: it costs what a miss of the shape
//! costs (the dashboard's per-day revenue: ~100 ms of the server's time). A share of
//! *patches* is the wrong measure of it: one insert patches every cached window of a
//! dashboard, and most patched entries are patched again before anyone reads them, so a
//! share of patches re-read more than the invalidations they replaced ever cost
//! (docs/benchmarks.md, row P1). So the budget is in server time, per shape:
//!
//! - a patch *saves* a miss only when the entry it kept is served before it changes again:
//!   then it earns `share` of that miss's server time (the entry's fill time) as credit;
//! - a verification is sent when the credit covers its expected cost (the shape's last
//!   verification's time, else the entry's fill time), which it then spends; what the
//!   re-read really took replaces the estimate when it ends (nothing when it was never sent);
//! - trust must be earned: a shape's first [`TRUST_FIRST`] verifications are taken in
//!   advance of any credit (the debt is repaid by later savings before any other), so a
//!   wrong patch is caught at its shape's first patches whatever the budget;
//! - a shape verified clean many times earns less: past [`BACK_OFF_FROM`] clean
//!   verifications its share halves with every doubling of them, down to an eighth;
//! - one verification per shape at a time, and at most [`MAX_BANKED`] verifications' worth
//!   of credit banked, so that a quiet shape does not re-read in bursts;
//! - `share` 0 verifies nothing; 1 verifies every patch (tests and audits).
//!
//! In the long run a shape's re-reads take at most `share` of the server time its patches
//! saved, plus its first verifications.

/// Verifications a shape gets before its patches have saved anything.
pub const TRUST_FIRST: u32 = 3;
/// Clean verifications after which a shape's share starts halving.
pub const BACK_OFF_FROM: u32 = 16;
/// The smallest part of the share a shape trusted long keeps (`1 / MIN_PART`).
pub const MIN_PART: u32 = 8;
/// Verifications' worth of credit a shape may hold.
pub const MAX_BANKED: i64 = 4;

/// One statement shape's verification budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Budget {
    /// Server time (ns) verifications may still spend; negative while first verifications
    /// taken in advance are owed.
    pub credit_ns: i64,
    /// Verifications that agreed with the server.
    pub clean: u32,
    /// Verifications taken in advance of credit so far.
    pub advanced: u32,
    /// What the shape's last verification took (ns), 0 before one ended: its next estimate.
    pub last_ns: u64,
    /// A verification of this shape is on its way.
    pub in_flight: bool,
}

/// How a verification ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Never sent (the entry changed or writes did not quiet): it cost nothing.
    NotSent,
    /// Sent, but not comparable (a write began meanwhile, the entry changed): it cost the
    /// server its read.
    Inconclusive,
    /// Compared and equal.
    Clean,
    /// Compared and different: the shape's patching is off (`cache::patches`).
    Mismatch,
}

impl Budget {
    /// A patch of this shape was stored. `saved_ns`: the server time the previous patch of
    /// the entry saved (its fill time, when the patched version was served since; else 0).
    /// `fill_ns`: what a miss of the entry costs, the estimate before the shape's first
    /// verification. Whether to verify this patch; if so, its estimate was charged and
    /// [`ended`](Self::ended) must follow with it.
    pub fn patched(&mut self, share: f64, saved_ns: u64, fill_ns: u64) -> Option<u64> {
        if share.is_nan() || share <= 0.0 {
            return None;
        }
        let estimate = self.estimate(fill_ns);
        if share >= 1.0 {
            return Some(estimate);
        }
        let earned = saved_ns as f64 * share / f64::from(self.part());
        let cap = MAX_BANKED.saturating_mul(estimate as i64);
        self.credit_ns = self.credit_ns.saturating_add(earned as i64).min(cap);
        if self.in_flight {
            return None;
        }
        if self.credit_ns >= estimate as i64 {
            // Nothing more.
        } else if self.advanced < TRUST_FIRST && self.clean < TRUST_FIRST {
            self.advanced += 1;
        } else {
            return None;
        }
        self.credit_ns = self.credit_ns.saturating_sub(estimate as i64);
        self.in_flight = true;
        Some(estimate)
    }

    /// A verification charged `estimate` ended: `spent_ns` what its re-read took (0 when
    /// it was never sent) replaces the estimate.
    pub fn ended(&mut self, estimate: u64, spent_ns: u64, outcome: Outcome) {
        self.in_flight = false;
        self.credit_ns = self
            .credit_ns
            .saturating_add(estimate as i64)
            .saturating_sub(spent_ns as i64);
        if outcome != Outcome::NotSent {
            self.last_ns = spent_ns;
        }
        if outcome == Outcome::Clean {
            self.clean = self.clean.saturating_add(1);
        }
    }

    /// What the next verification is expected to cost: the last one's time, else a miss's.
    /// Never 0: a shape whose reads cost nothing measurable still pays a microsecond.
    fn estimate(&self, fill_ns: u64) -> u64 {
        let ns = if self.last_ns > 0 {
            self.last_ns
        } else {
            fill_ns
        };
        ns.max(1_000)
    }

    /// The share's divisor: 1 until [`BACK_OFF_FROM`] clean verifications, then doubling
    /// with every doubling of them, at most [`MIN_PART`].
    fn part(&self) -> u32 {
        let mut part = 1;
        let mut clean = self.clean / BACK_OFF_FROM;
        while clean > 1 && part < MIN_PART {
            part *= 2;
            clean /= 2;
        }
        part
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// One row per rule: a budget, a patch (share, saved, fill time), whether it is
    /// verified, and the credit after.
    #[test]
    fn patches_are_verified_within_the_budget() {
        let fresh = Budget::default();
        let trusted = Budget {
            clean: TRUST_FIRST,
            advanced: TRUST_FIRST,
            last_ns: 100 * MS,
            ..Budget::default()
        };
        type Row = (&'static str, Budget, f64, u64, u64, Option<u64>, i64);
        let rows: &[Row] = &[
            (
                "share 0 verifies nothing",
                fresh.clone(),
                0.0,
                100 * MS,
                100 * MS,
                None,
                0,
            ),
            (
                "share 1 verifies every patch",
                trusted.clone(),
                1.0,
                0,
                100 * MS,
                Some(100 * MS),
                0,
            ),
            (
                "a shape's first patch is verified in advance of any saving",
                fresh.clone(),
                0.05,
                0,
                100 * MS,
                Some(100 * MS),
                -100 * (MS as i64),
            ),
            (
                "once trusted, a patch that saved nothing earns nothing",
                trusted.clone(),
                0.05,
                0,
                100 * MS,
                None,
                0,
            ),
            (
                "a saved miss earns its share of the miss's time",
                trusted.clone(),
                0.05,
                100 * MS,
                100 * MS,
                None,
                5 * MS as i64,
            ),
            (
                "credit that covers the last verification's time verifies",
                Budget {
                    credit_ns: 98 * MS as i64,
                    ..trusted.clone()
                },
                0.05,
                40 * MS,
                40 * MS,
                Some(100 * MS),
                0,
            ),
            (
                "one verification of a shape at a time",
                Budget {
                    credit_ns: 500 * MS as i64,
                    in_flight: true,
                    ..trusted.clone()
                },
                0.05,
                0,
                100 * MS,
                None,
                400 * MS as i64,
            ),
            (
                "the debt of advanced verifications is repaid before more",
                Budget {
                    credit_ns: -300 * MS as i64,
                    clean: 2,
                    advanced: TRUST_FIRST,
                    last_ns: 100 * MS,
                    in_flight: false,
                },
                0.5,
                100 * MS,
                100 * MS,
                None,
                -250 * MS as i64,
            ),
            (
                "past sixteen clean, a shape earns half its share",
                Budget {
                    clean: 2 * BACK_OFF_FROM,
                    ..trusted.clone()
                },
                0.1,
                100 * MS,
                100 * MS,
                None,
                5 * MS as i64,
            ),
            (
                "and never less than an eighth",
                Budget {
                    clean: u32::MAX,
                    ..trusted.clone()
                },
                0.8,
                100 * MS,
                100 * MS,
                None,
                10 * MS as i64,
            ),
            (
                "credit banks at most four verifications",
                Budget {
                    credit_ns: 399 * MS as i64,
                    in_flight: true,
                    ..trusted.clone()
                },
                0.5,
                100 * MS,
                100 * MS,
                None,
                400 * MS as i64,
            ),
            (
                "a shape whose reads cost nothing still pays a microsecond",
                fresh.clone(),
                0.05,
                0,
                0,
                Some(1_000),
                -1_000,
            ),
        ];
        for (rule, budget, share, saved, fill, want, credit) in rows {
            let mut b = budget.clone();
            assert_eq!(b.patched(*share, *saved, *fill), *want, "{rule}");
            assert_eq!(b.credit_ns, *credit, "{rule}: credit");
            assert_eq!(
                b.in_flight,
                budget.in_flight || want.is_some() && *share < 1.0,
                "{rule}: in flight"
            );
        }
    }

    /// What a verification really took replaces its estimate, and only a clean one counts.
    #[test]
    fn a_verification_is_charged_what_it_took() {
        type Row = (&'static str, Outcome, u64, i64, u32, u64);
        let rows: &[Row] = &[
            ("never sent: refunded", Outcome::NotSent, 0, 0, 0, 0),
            (
                "inconclusive: the read is paid",
                Outcome::Inconclusive,
                70 * MS,
                -70 * MS as i64,
                0,
                70 * MS,
            ),
            (
                "clean: paid and counted",
                Outcome::Clean,
                130 * MS,
                -130 * MS as i64,
                1,
                130 * MS,
            ),
            (
                "a mismatch is not clean",
                Outcome::Mismatch,
                100 * MS,
                -100 * MS as i64,
                0,
                100 * MS,
            ),
        ];
        for (rule, outcome, spent, credit, clean, last) in rows {
            let mut b = Budget::default();
            let est = b
                .patched(0.05, 0, 100 * MS)
                .expect("a first patch is verified");
            b.ended(est, *spent, *outcome);
            assert_eq!(
                (b.credit_ns, b.clean, b.last_ns, b.in_flight),
                (*credit, *clean, *last, false),
                "{rule}"
            );
        }
    }

    /// Over a long run the re-reads stay within the share of what the patches saved, plus
    /// the first verifications; a shape whose patches save nothing is verified
    /// [`TRUST_FIRST`] times and no more.
    #[test]
    fn the_long_run_stays_within_the_share() {
        for (share, saved_every) in [(0.05, 1), (0.05, 10), (0.2, 3), (0.01, 1), (0.05, 0)] {
            let mut b = Budget::default();
            let (mut saved, mut spent, mut verified) = (0u64, 0u64, 0u32);
            for n in 1..=100_000u64 {
                let s = if saved_every > 0 && n % saved_every == 0 {
                    100 * MS
                } else {
                    0
                };
                saved += s;
                if let Some(est) = b.patched(share, s, 100 * MS) {
                    verified += 1;
                    spent += 100 * MS;
                    b.ended(est, 100 * MS, Outcome::Clean);
                }
            }
            let allowed = share * saved as f64 + f64::from(TRUST_FIRST) * 100e6;
            assert!(
                spent as f64 <= allowed,
                "{share} every {saved_every}: {spent} > {allowed}"
            );
            if saved_every == 0 {
                assert_eq!(verified, TRUST_FIRST);
            } else {
                assert!(
                    verified > TRUST_FIRST,
                    "{share} every {saved_every}: keeps verifying"
                );
            }
        }
    }
}
