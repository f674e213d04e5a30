//! α-time as the length of a union of intervals (003 §3.5.1 eq 3.3).
//!
//! Eq 3.3 splits the α-intervals of a prefix flow into an overlapping set O
//! (merged run by run into M: earliest start, latest end) and a non-overlapping
//! set N, and sums the lengths of both. That is exactly the length of the union:
//! sort by start and merge. Touching intervals (\[a,b\], \[b,c\]) merge too; their
//! union length is the same either way.

/// Length of the union of `[start, end]` intervals, in the intervals' unit.
/// Sorts `intervals` in place (no allocation); intervals with `end < start`
/// count as empty.
pub fn union_length(intervals: &mut [(u64, u64)]) -> u64 {
    intervals.sort_unstable();
    let mut total: u64 = 0;
    let mut cur: Option<(u64, u64)> = None;
    for &(s, e) in intervals.iter() {
        if e < s {
            continue;
        }
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total = total.saturating_add(ce - cs);
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total = total.saturating_add(ce - cs);
    }
    total
}

/// The merged set M ∪ N of eq 3.3: disjoint intervals, sorted, whose lengths
/// sum to [`union_length`]. Writes into `out` (cleared first).
pub fn merge_into(intervals: &mut [(u64, u64)], out: &mut Vec<(u64, u64)>) {
    out.clear();
    intervals.sort_unstable();
    for &(s, e) in intervals.iter() {
        if e < s {
            continue;
        }
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq_3_3_overlapping_and_separate_sets() {
        // O = {[0,60],[30,90],[80,100]} merges to [0,100]; N = {[200,260]}.
        let mut v = vec![(200, 260), (30, 90), (0, 60), (80, 100)];
        assert_eq!(union_length(&mut v), 160);
        let mut m = Vec::new();
        merge_into(&mut v, &mut m);
        assert_eq!(m, vec![(0, 100), (200, 260)]);
    }

    #[test]
    fn nested_touching_empty_and_inverted() {
        assert_eq!(union_length(&mut []), 0);
        assert_eq!(union_length(&mut [(5, 5)]), 0);
        assert_eq!(union_length(&mut [(0, 10), (2, 3), (10, 12)]), 12);
        assert_eq!(union_length(&mut [(9, 3), (0, 1)]), 1);
        assert_eq!(union_length(&mut [(0, u64::MAX), (1, 2)]), u64::MAX);
    }
}
