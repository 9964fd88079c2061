//! How big a group-commit strategy's groups were during one figure, how
//! far behind the reapers ran during a figure with holds, and how many
//! orders the writers moved per batch, read from the instances' own
//! `/metrics` (`seckill_group_size`, `seckill_reaper_lag_seconds`,
//! `seckill_order_writer_batch_size`, summed over the instances), so the
//! bench reports what the service measured rather than a guess from the
//! load.

use crate::lab::InstanceInfo;

/// A histogram's sum and count so far, over every instance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// The histogram's sum.
    sum: f64,
    /// Its count.
    count: f64,
}

impl Totals {
    /// The mean between `earlier` and these totals; `None` if nothing
    /// was counted (for a group's size: not a group-commit strategy).
    pub fn mean_since(self, earlier: Totals) -> Option<f64> {
        let count = self.count - earlier.count;
        (count > 0.0).then(|| (self.sum - earlier.sum) / count)
    }
}

/// Histograms' sums and counts so far, over every instance, from one
/// scrape: each of `series` is a metric and its labels (`{strategy="…"}`,
/// or empty). Between two readings, a histogram's mean is the mean group
/// (`GROUP_SIZE`), the reapers' lag (`REAPER_LAG`) or the writers' batch
/// (`WRITER_BATCH`).
pub async fn totals(
    http: &reqwest::Client,
    instances: &[InstanceInfo],
    series: &[(&str, &str)],
) -> anyhow::Result<Vec<Totals>> {
    let mut totals = vec![Totals::default(); series.len()];
    for text in scrape(http, instances).await? {
        for ((metric, labels), total) in series.iter().zip(&mut totals) {
            total.sum += sample(&text, &format!("{metric}_sum{labels}"));
            total.count += sample(&text, &format!("{metric}_count{labels}"));
        }
    }
    Ok(totals)
}

/// Every instance's `/metrics`.
async fn scrape(http: &reqwest::Client, instances: &[InstanceInfo]) -> anyhow::Result<Vec<String>> {
    let mut texts = Vec::new();
    for instance in instances {
        let text = http
            .get(format!("{}/metrics", instance.url))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        texts.push(text);
    }
    Ok(texts)
}

/// The value of the series `series` (name and labels) in a Prometheus
/// text, 0 if absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strategys_series_is_read_and_others_ignored() {
        let text = "# TYPE seckill_group_size histogram\n\
            seckill_group_size_sum{strategy=\"db-group\"} 120\n\
            seckill_group_size_count{strategy=\"db-group\"} 8\n\
            seckill_group_size_sum{strategy=\"redis-group\"} 7\n";
        let db = "{strategy=\"db-group\"}";
        let redis = "{strategy=\"redis-group\"}";
        assert_eq!(sample(text, &format!("seckill_group_size_sum{db}")), 120.0);
        assert_eq!(sample(text, &format!("seckill_group_size_count{db}")), 8.0);
        assert_eq!(
            sample(text, &format!("seckill_group_size_count{redis}")),
            0.0
        );
        let before = Totals {
            sum: 20.0,
            count: 4.0,
        };
        let after = Totals {
            sum: 120.0,
            count: 8.0,
        };
        assert_eq!(after.mean_since(before), Some(25.0));
        assert_eq!(before.mean_since(before), None);
    }
}
