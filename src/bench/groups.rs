//! How big a group-commit strategy's groups were during one figure, and
//! how far behind the reapers ran during a figure with holds, read from
//! the instances' own `/metrics` (`seckill_group_size`,
//! `seckill_reaper_lag_seconds`, summed over the instances), so the bench
//! reports what the service measured rather than a guess from the load.

use crate::lab::InstanceInfo;
use crate::telemetry::{GROUP_SIZE, REAPER_LAG};

/// Buyers and groups so far under `strategy`, over every instance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    buyers: f64,
    groups: f64,
}

impl Totals {
    /// The mean group between `earlier` and these totals; `None` if no
    /// group ran (not a group-commit strategy).
    pub fn mean_since(self, earlier: Totals) -> Option<f64> {
        let groups = self.groups - earlier.groups;
        (groups > 0.0).then(|| (self.buyers - earlier.buyers) / groups)
    }
}

/// Reads every instance's totals for `strategy`.
pub async fn totals(
    http: &reqwest::Client,
    instances: &[InstanceInfo],
    strategy: &str,
) -> anyhow::Result<Totals> {
    let mut totals = Totals::default();
    let labels = format!("{{strategy=\"{strategy}\"}}");
    for text in scrape(http, instances).await? {
        totals.buyers += sample(&text, &format!("{GROUP_SIZE}_sum{labels}"));
        totals.groups += sample(&text, &format!("{GROUP_SIZE}_count{labels}"));
    }
    Ok(totals)
}

/// Every instance's reaper lag so far, summed: (seconds, holds), the
/// mean between two readings being how far behind the reapers ran.
pub async fn reaper_lag(
    http: &reqwest::Client,
    instances: &[InstanceInfo],
) -> anyhow::Result<Totals> {
    let mut totals = Totals::default();
    for text in scrape(http, instances).await? {
        totals.buyers += sample(&text, &format!("{REAPER_LAG}_sum"));
        totals.groups += sample(&text, &format!("{REAPER_LAG}_count"));
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
            buyers: 20.0,
            groups: 4.0,
        };
        let after = Totals {
            buyers: 120.0,
            groups: 8.0,
        };
        assert_eq!(after.mean_since(before), Some(25.0));
        assert_eq!(before.mean_since(before), None);
    }
}
