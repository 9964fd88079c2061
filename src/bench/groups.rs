//! How big a group-commit strategy's groups were during one figure, read
//! from the instances' own `/metrics` (`seckill_group_size`, summed over
//! the instances), so the bench reports what the service measured rather
//! than a guess from the load.

use crate::lab::InstanceInfo;
use crate::telemetry::GROUP_SIZE;

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
    for instance in instances {
        let text = http
            .get(format!("{}/metrics", instance.url))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        totals.buyers += sample(&text, &format!("{GROUP_SIZE}_sum"), strategy);
        totals.groups += sample(&text, &format!("{GROUP_SIZE}_count"), strategy);
    }
    Ok(totals)
}

/// The value of `name{strategy="…"}` in a Prometheus text, 0 if absent.
fn sample(text: &str, name: &str, strategy: &str) -> f64 {
    let series = format!("{name}{{strategy=\"{strategy}\"}}");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
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
        assert_eq!(sample(text, "seckill_group_size_sum", "db-group"), 120.0);
        assert_eq!(sample(text, "seckill_group_size_count", "db-group"), 8.0);
        assert_eq!(sample(text, "seckill_group_size_count", "redis-group"), 0.0);
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
