//! ECMP groups as the fast path holds them: each member next hop gets a
//! share of the group's buckets in proportion to its weight, and a flow's
//! hash picks a bucket (bpf/router/router.bpf.c, flow_bucket). The kernel's
//! hash-threshold does the same over its weights, at a finer grain.
use linerate_dataplane::layout::NH_GROUP_BUCKETS;

/// How many buckets each of `weights` gets: every member at least one
/// (the kernel sends some flows to every member), the rest by largest
/// remainder of its share. None with no members or more members than
/// buckets, or a zero weight.
pub fn bucket_counts(weights: &[u32]) -> Option<Vec<usize>> {
    let n = weights.len();
    if n == 0 || n > NH_GROUP_BUCKETS || weights.contains(&0) {
        return None;
    }
    let total: u64 = weights.iter().map(|&w| w as u64).sum();
    let spare = (NH_GROUP_BUCKETS - n) as u64;
    // Share of the spare buckets, in units of 1/total bucket.
    let exact: Vec<u64> = weights.iter().map(|&w| w as u64 * spare).collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| 1 + (e / total) as usize).collect();
    let mut left = NH_GROUP_BUCKETS - counts.iter().sum::<usize>();
    let mut by_remainder: Vec<usize> = (0..n).collect();
    // Largest remainder first; ties to the earlier member.
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(exact[i] % total));
    for &i in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    Some(counts)
}

/// The buckets: member `i`'s id repeated `counts[i]` times, in order.
pub fn buckets(ids: &[u32], counts: &[usize]) -> [u32; NH_GROUP_BUCKETS] {
    let mut b = [0u32; NH_GROUP_BUCKETS];
    let mut at = 0;
    for (&id, &c) in ids.iter().zip(counts) {
        b[at..at + c].fill(id);
        at += c;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_share_equally() {
        assert_eq!(bucket_counts(&[1, 1]), Some(vec![32, 32]));
        assert_eq!(bucket_counts(&[1; 4]), Some(vec![16; 4]));
        // 64 / 3: one member gets the odd bucket.
        let c = bucket_counts(&[1, 1, 1]).unwrap();
        assert_eq!(c.iter().sum::<usize>(), 64);
        assert!(c.iter().all(|&x| x == 21 || x == 22), "{c:?}");
    }

    #[test]
    fn weights_are_followed_within_a_bucket() {
        for w in [[1u32, 2], [1, 3], [5, 11], [1, 255], [200, 7]] {
            let c = bucket_counts(&w).unwrap();
            assert_eq!(c.iter().sum::<usize>(), 64, "{w:?}");
            let total = (w[0] + w[1]) as f64;
            for i in 0..2 {
                let want = 64.0 * w[i] as f64 / total;
                assert!(
                    (c[i] as f64 - want).abs() <= 1.0,
                    "{w:?}: member {i} has {} buckets, its share is {want:.2}",
                    c[i]
                );
                assert!(c[i] >= 1, "{w:?}: every member gets a bucket");
            }
        }
    }

    #[test]
    fn groups_the_buckets_cannot_hold_are_refused() {
        assert_eq!(bucket_counts(&[]), None);
        assert_eq!(bucket_counts(&[1; 65]), None);
        assert_eq!(bucket_counts(&[1, 0]), None);
        assert_eq!(bucket_counts(&[1; 64]), Some(vec![1; 64]));
    }

    #[test]
    fn buckets_repeat_each_id_its_count() {
        let b = buckets(&[7, 9], &[40, 24]);
        assert_eq!(b.iter().filter(|&&x| x == 7).count(), 40);
        assert_eq!(b.iter().filter(|&&x| x == 9).count(), 24);
    }
}
