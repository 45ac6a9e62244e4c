//! The order in which a round runs its DUT configurations: a Williams
//! design (a balanced Latin square). Over a full cycle of rounds (n rounds
//! for n configurations, 2n when n is odd) every configuration runs in
//! every place of the round equally often, and runs right after every
//! other configuration equally often.
//!
//! Why: in this lab a run is not independent of the one before it. A
//! router's teardown frees its maps in the background (hundreds of MiB,
//! RCU-deferred) while the next run measures, the kernel's tables keep
//! what a ruleset left, and the host drifts within a round. With one fixed
//! order, whatever the place or the predecessor does to a run lands on the
//! same configuration in every round and reads as a difference between
//! configurations; balanced, it spreads over all of them alike.

/// The configurations' indexes (0..n) in the order round `round` (from 1)
/// runs them.
pub fn round_order(n: usize, round: u32) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    // The first row: 0, 1, n-1, 2, n-2, ...; row r adds r to each, mod n.
    let mut first = vec![0usize];
    let (mut low, mut high) = (1usize, n);
    for i in 1..n {
        if i % 2 == 1 {
            first.push(low);
            low += 1;
        } else {
            high -= 1;
            first.push(high);
        }
    }
    let r = (round.max(1) - 1) as usize;
    let shift = r % n;
    let mut row: Vec<usize> = first.iter().map(|&c| (c + shift) % n).collect();
    // For odd n the rows' mirror images complete the balance: rounds n+1
    // to 2n run rounds 1 to n backwards.
    if n % 2 == 1 && (r / n) % 2 == 1 {
        row.reverse();
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds in a full cycle of the design.
    fn cycle(n: usize) -> u32 {
        (if n % 2 == 1 { 2 * n } else { n }) as u32
    }

    #[test]
    fn every_round_runs_each_configuration_once() {
        for n in 1..=7 {
            for round in 1..=3 * cycle(n) {
                let mut row = round_order(n, round);
                row.sort_unstable();
                assert_eq!(row, (0..n).collect::<Vec<_>>(), "n {n} round {round}");
            }
        }
    }

    #[test]
    fn a_cycle_balances_places_and_predecessors() {
        for n in 2..=7 {
            let rounds = cycle(n);
            let mut place = vec![vec![0u32; n]; n];
            let mut after = vec![vec![0u32; n]; n];
            for round in 1..=rounds {
                let row = round_order(n, round);
                for (p, &c) in row.iter().enumerate() {
                    place[c][p] += 1;
                }
                for w in row.windows(2) {
                    after[w[1]][w[0]] += 1;
                }
            }
            let per_place = rounds / n as u32;
            for (c, places) in place.iter().enumerate() {
                assert!(
                    places.iter().all(|&k| k == per_place),
                    "n {n}: configuration {c} by place {places:?}"
                );
            }
            // Each ordered pair of distinct configurations is adjacent the
            // same number of times: (n - 1) pairs a round over n (n - 1).
            let per_pair = rounds / n as u32;
            for (c, before) in after.iter().enumerate() {
                for (b, &k) in before.iter().enumerate() {
                    let want = if b == c { 0 } else { per_pair };
                    assert_eq!(k, want, "n {n}: {c} right after {b}");
                }
            }
        }
    }

    #[test]
    fn the_first_round_keeps_the_scenarios_order_for_two() {
        assert_eq!(round_order(2, 1), vec![0, 1]);
        assert_eq!(round_order(2, 2), vec![1, 0]);
        assert_eq!(round_order(1, 5), vec![0]);
        assert_eq!(round_order(3, 1), vec![0, 1, 2]);
        assert!(round_order(0, 1).is_empty());
    }
}
