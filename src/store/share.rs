//! [`Rule::per_node`]: one node's share of a rule, for deciding locally while the
//! shared store is out of reach.

use crate::algorithm::{Rule, Share};
use crate::error::ConfigError;

impl Rule {
    /// One node's share of this rule when `nodes` nodes each decide alone: what a
    /// node applies locally while the shared store is down, so that together the nodes
    /// admit no more than the rule.
    ///
    /// Every count (limit, burst, capacity, maximum) is divided by `nodes`, rounded
    /// down; every rate is divided by `nodes` too, its interval multiplied (for GCRA,
    /// the leaky bucket and a sliding log's minimum gap) or its permits per second
    /// divided and, if the division rounded up, lowered to the next smaller `f64`
    /// (Guava's limiters). So `nodes` shares never add up to more than the whole,
    /// but for one thing: Guava's limiters grant a request at once whatever it costs
    /// and charge the next, so each node may admit one request ahead of its rate.
    /// Window lengths, leases, warm-up periods, timeouts and other settings stay as
    /// they are.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{FixedWindow, Gcra};
    /// use tollgate::store::Rule;
    /// use tollgate::{ConfigError, Quota};
    ///
    /// let whole = Rule::from(FixedWindow::new(100, Duration::from_secs(60))?);
    /// let share = whole.per_node(3)?;
    /// assert_eq!(share.capacity(), 33);
    ///
    /// // 10 per second, burst 10, over 4 nodes: 2.5 per second, burst 2 each.
    /// let bucket = Rule::from(Gcra::new(Quota::per_second(10)?));
    /// let Rule::Gcra(share) = bucket.per_node(4)? else { unreachable!() };
    /// assert_eq!(share.emission_interval(), Duration::from_millis(400));
    ///
    /// // Three permits cannot be shared by four nodes.
    /// let tiny = Rule::from(FixedWindow::new(3, Duration::from_secs(1))?);
    /// assert!(matches!(tiny.per_node(4), Err(ConfigError::OutOfRange { parameter: "nodes", .. })));
    /// # Ok::<(), ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`ConfigError::Zero`] for `nodes == 0`;
    /// - [`ConfigError::OutOfRange`] (parameter `"nodes"`) when a node's share of a
    ///   count would be zero, e.g. a limit of 3 over 4 nodes, or a rate would fall
    ///   below what its algorithm accepts;
    /// - [`ConfigError::Overflow`] (parameter `"nodes"`) when a multiplied interval
    ///   or gap no longer fits.
    pub fn per_node(&self, nodes: u32) -> Result<Rule, ConfigError> {
        self.share(Share::new(nodes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{
        Algorithm, Gcra, LeakyBucket, RuleKind, SlidingLog, SmoothBursty, SmoothWarmingUp,
        sample_rule,
    };
    use crate::quota::Quota;
    use crate::time::Nanos;
    use std::time::Duration;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn every_kind(limit: u64) -> Vec<Rule> {
        RuleKind::ALL
            .iter()
            .map(|&kind| sample_rule(kind, limit))
            .collect()
    }

    /// Permits one fresh state admits over `span` under saturating demand: every
    /// millisecond, one permit at a time until denied.
    fn admitted_over(rule: &Rule, span: Duration) -> u64 {
        use super::super::rule::{RuleOutcome, Step};
        let start = Nanos::new(1_000_000_000_000);
        let mut state = rule.initial_state(start);
        let mut admitted = 0;
        let mut t = start;
        while t <= start + span {
            while let Some(RuleOutcome::Decision(Ok(_))) =
                rule.apply(&mut state, t, Step::Acquire(1))
            {
                admitted += 1;
            }
            t = t + Duration::from_millis(1);
        }
        admitted
    }

    #[test]
    fn one_node_keeps_the_whole() {
        for rule in every_kind(10) {
            assert_eq!(rule.per_node(1).unwrap(), rule, "{rule:?}");
        }
    }

    #[test]
    fn zero_nodes_is_an_error() {
        for rule in every_kind(10) {
            assert_eq!(
                rule.per_node(0),
                Err(ConfigError::Zero { parameter: "nodes" })
            );
        }
    }

    #[test]
    fn a_share_of_nothing_is_an_error_for_every_kind() {
        for rule in every_kind(3) {
            if matches!(rule, Rule::SmoothBursty(_) | Rule::SmoothWarmingUp(_)) {
                continue; // a rate has no whole units to run out of
            }
            let error = rule.per_node(4).unwrap_err();
            assert!(
                matches!(
                    error,
                    ConfigError::OutOfRange {
                        parameter: "nodes",
                        ..
                    }
                ),
                "{rule:?}: {error:?}"
            );
        }
    }

    #[test]
    fn counts_are_divided_rounding_down() {
        for rule in every_kind(10) {
            let share = rule.per_node(3).unwrap();
            assert_eq!(share.kind(), rule.kind());
            match &share {
                Rule::SmoothBursty(_) | Rule::SmoothWarmingUp(_) => {}
                // Its capacity counts the cycles a reservation may book ahead.
                Rule::RefreshPeriod(r4j) => assert_eq!(r4j.limit_for_period(), 3),
                _ => assert_eq!(share.capacity(), 3, "{share:?}"),
            }
        }
    }

    #[test]
    fn shares_never_add_up_to_more_than_the_whole() {
        for nodes in [2u32, 3, 4, 7] {
            for rule in every_kind(28) {
                let share = rule.per_node(nodes).unwrap();
                let span = secs(3);
                let whole = admitted_over(&rule, span);
                let parts = admitted_over(&share, span) * u64::from(nodes);
                // Guava's limiters grant a first request at once whatever it costs and
                // charge the next one: every node can do that once.
                let prepaid = match rule {
                    Rule::SmoothBursty(_) | Rule::SmoothWarmingUp(_) => u64::from(nodes) - 1,
                    _ => 0,
                };
                assert!(
                    parts <= whole + prepaid,
                    "{nodes} nodes of {share:?} admit {parts} > {whole} of {rule:?}"
                );
            }
        }
    }

    #[test]
    fn rates_are_divided() {
        let Rule::Gcra(g) = Rule::from(Gcra::new(Quota::per_second(10).unwrap()))
            .per_node(4)
            .unwrap()
        else {
            panic!("kind changed")
        };
        assert_eq!(g.emission_interval(), Duration::from_millis(400));
        assert_eq!(g.capacity(), 2);

        let bucket = LeakyBucket::new(9, Quota::per_second(9).unwrap()).unwrap();
        let Rule::LeakyBucket(b) = Rule::from(bucket).per_node(3).unwrap() else {
            panic!("kind changed")
        };
        assert_eq!(b.drain_interval(), bucket.drain_interval() * 3);
        assert_eq!(b.capacity(), 3);

        let Rule::SmoothWarmingUp(w) = Rule::from(SmoothWarmingUp::new(6.0, secs(2)).unwrap())
            .per_node(3)
            .unwrap()
        else {
            panic!("kind changed")
        };
        assert_eq!((w.rate(), w.warmup(), w.cold_factor()), (2.0, secs(2), 3.0));

        let log = SlidingLog::new(10, secs(1))
            .unwrap()
            .min_gap(Duration::from_millis(50))
            .unwrap()
            .count_blocked(true);
        let Rule::SlidingLog(l) = Rule::from(log).per_node(2).unwrap() else {
            panic!("kind changed")
        };
        assert_eq!(l.minimum_gap(), Duration::from_millis(100));
        assert!(l.counts_blocked());
        assert_eq!((l.limit(), l.window()), (5, secs(1)));
    }

    #[test]
    fn overflowing_gaps_and_too_slow_rates_are_errors() {
        // A GCRA's interval cannot overflow before its burst's share is zero: the
        // whole burst fits, and the share keeps interval × burst within it.
        let slow = Gcra::new(Quota::with_period(Duration::from_secs(1 << 33)).unwrap());
        assert!(matches!(
            Rule::from(slow).per_node(u32::MAX),
            Err(ConfigError::OutOfRange {
                parameter: "nodes",
                ..
            })
        ));
        let gapped = SlidingLog::new(1_000, secs(1))
            .unwrap()
            .min_gap(Duration::from_nanos(1 << 60))
            .unwrap();
        assert_eq!(
            Rule::from(gapped).per_node(32),
            Err(ConfigError::Overflow { parameter: "nodes" })
        );
        let slow_rate = SmoothBursty::new(1e-9).unwrap();
        assert!(matches!(
            Rule::from(slow_rate).per_node(1_000_000),
            Err(ConfigError::OutOfRange {
                parameter: "nodes",
                ..
            })
        ));
    }
}
