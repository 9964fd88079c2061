//! How a product's stock is dealt out: over counters (a reset splits it
//! over `segmented`'s segments) and over waves (`waves` shares, one every
//! `wave_every_ms`). Pure arithmetic, shared by the reset, every store's
//! wave release and the ledger's "on sale so far".

/// Splits `stock` over `parts` as evenly as possible, the remainder spread
/// one unit each over the first parts: how a reset deals the stock out
/// over counters, and over waves.
pub fn split(stock: i64, parts: usize) -> Vec<i64> {
    let parts_i = parts.max(1) as i64;
    (0..parts_i)
        .map(|i| stock / parts_i + i64::from(i < stock % parts_i))
        .collect()
}

/// Units released to each of `cells` counters through each wave:
/// `through[c][k]` for waves `0..=waves` (`through[c][0]` is 0). Each
/// wave's share is split over the counters as a reset splits the stock.
pub fn through(initial: i64, waves: u32, cells: usize) -> Vec<Vec<i64>> {
    let mut through = vec![vec![0]; cells.max(1)];
    for share in split(initial, waves.max(1) as usize) {
        for (c, part) in split(share, cells.max(1)).into_iter().enumerate() {
            let sum = through[c].last().copied().unwrap_or(0) + part;
            through[c].push(sum);
        }
    }
    through
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_splits_evenly_with_the_remainder_spread() {
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(100, 1), vec![100]);
        assert_eq!(split(3, 8), vec![1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(split(10, 4).iter().sum::<i64>(), 10);
    }

    #[test]
    fn every_unit_is_released_once_wave_by_wave() {
        // 10 units, 3 waves (4, 3, 3), over 2 counters.
        let through = through(10, 3, 2);
        assert_eq!(through, vec![vec![0, 2, 4, 6], vec![0, 2, 3, 4]]);
        let last: i64 = through.iter().map(|t| t[3]).sum();
        assert_eq!(last, 10);
        assert_eq!(super::through(7, 1, 1), vec![vec![0, 7]]);
    }
}
