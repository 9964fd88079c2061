//! The live page (`GET /` through the gateway) in a real browser: headless
//! Chromium loads it while a race runs and takes a screenshot, in which a
//! bar per product is drawn and the oversell shows in red; after the race,
//! the numbers the page drew — the chart's bars and each product's card —
//! are the numbers `/report` gives, and each card shows the minute's
//! answers and the instances that served them — and, for a product with
//! holds, its holds, payments and give-backs.

use seckill_harness as harness;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use harness::{Race, TestLab, race_on};
use seckill::instance::chart;
use seckill::orders::ledger::Ledger;
use serde_json::json;

/// Runs headless Chromium on `url` with `extra` flags (a screenshot or a
/// DOM dump); returns stdout. The virtual time budget lets the page's
/// first fetch and refresh timer run before the capture.
fn chromium(url: &str, profile: &Path, extra: &[String]) -> String {
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--window-size=1100,700",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("running chromium (scripts/deps.sh installs Debian's package)");
    assert!(output.status.success(), "chromium: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `(data-strategy, data-initial, data-kept, data-oversold)` per drawn bar,
/// by label.
fn drawn_bars(dom: &str) -> BTreeMap<String, (String, i64, i64, i64)> {
    let attribute = |tag: &str, name: &str| -> String {
        let start = tag.find(&format!("{name}=\"")).expect(name) + name.len() + 2;
        tag[start..]
            .split('"')
            .next()
            .expect("closing quote")
            .to_owned()
    };
    dom.split("<g class=\"bar\"")
        .skip(1)
        .map(|rest| {
            let tag = rest.split('>').next().expect("tag");
            let number = |name: &str| attribute(tag, name).parse::<i64>().expect(name);
            (
                attribute(tag, "data-label"),
                (
                    attribute(tag, "data-strategy"),
                    number("data-initial"),
                    number("data-kept"),
                    number("data-oversold"),
                ),
            )
        })
        .collect()
}

/// Per drawn card, by product id: `(data-initial, data-kept,
/// data-oversold)` and the card's text.
fn drawn_cards(dom: &str) -> BTreeMap<i64, ((i64, i64, i64), String)> {
    dom.split("<div class=\"card\"")
        .skip(1)
        .map(|rest| {
            let tag = rest.split('>').next().expect("tag");
            let number = |name: &str| -> i64 {
                let start = tag.find(&format!("{name}=\"")).expect(name) + name.len() + 2;
                tag[start..].split('"').next().unwrap().parse().expect(name)
            };
            let body = rest.split("<div class=\"card\"").next().unwrap_or(rest);
            (
                number("data-id"),
                (
                    (
                        number("data-initial"),
                        number("data-kept"),
                        number("data-oversold"),
                    ),
                    body.to_owned(),
                ),
            )
        })
        .collect()
}

/// An RGB colour from `#rrggbb`.
fn rgb(hex: &str) -> [u8; 3] {
    let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex");
    [byte(1), byte(3), byte(5)]
}

/// The screenshot's pixels: width, height, RGB rows.
fn pixels(png_path: &Path) -> (usize, usize, Vec<[u8; 3]>) {
    let file = std::io::BufReader::new(std::fs::File::open(png_path).expect("screenshot"));
    let mut reader = png::Decoder::new(file).read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let px = data.chunks(channels).map(|c| [c[0], c[1], c[2]]).collect();
    (info.width as usize, info.height as usize, px)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_draws_every_product_and_matches_the_report() {
    let lab = TestLab::start(2);
    let gateway = lab.gateway();
    let audit = lab.audit();
    let profile = tempfile::tempdir().expect("browser profile");
    let shot = profile.path().join("dashboard.png");
    let url = format!("{}/", lab.info.gateway_url);

    // Two finished races (one oversold), then a slow one in progress while
    // the browser looks: its 200 buyers arrive 30 ms apart, so it lasts
    // 6 s whatever they are answered (the path's adaptive limit may tell
    // the queue under the 60 ms lock `busy` at once), far longer than the
    // browser needs.
    race_on(
        &audit,
        &gateway,
        Race {
            product: 1500,
            strategy: "naive",
            stock: 20,
            buyers: 100,
            concurrency: 50,
            pace: None,
            settings: json!({"work_ms": 20}),
        },
    )
    .await;
    race_on(
        &audit,
        &gateway,
        Race {
            product: 1501,
            strategy: "redis-lua",
            stock: 20,
            buyers: 100,
            concurrency: 50,
            pace: None,
            settings: json!({}),
        },
    )
    .await;
    let running = tokio::spawn({
        let gateway = gateway.clone();
        let audit = audit.clone();
        async move {
            race_on(
                &audit,
                &gateway,
                Race {
                    product: 1502,
                    strategy: "redis-lock",
                    stock: 100,
                    buyers: 200,
                    concurrency: 20,
                    pace: Some(Duration::from_millis(30)),
                    settings: json!({"work_ms": 60}),
                },
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    chromium(
        &url,
        profile.path(),
        &[format!("--screenshot={}", shot.display())],
    );
    std::fs::copy(&shot, std::env::temp_dir().join("seckill-dashboard.png")).ok();
    assert!(
        !running.is_finished(),
        "the screenshot should catch the race running"
    );

    // A bar per product: rows of track-or-green pixels where the bars
    // start, and red where naive's oversell is drawn.
    let (width, height, px) = pixels(&shot);
    let (track, sold, oversold) = (rgb(chart::TRACK), rgb(chart::SOLD), rgb(chart::OVERSOLD));
    let bar_x = (0..width)
        .find(|&x| (0..height).any(|y| px[y * width + x] == sold || px[y * width + x] == track))
        .expect("a bar in the screenshot");
    // Runs of at least 15 px: bars are 18 px tall, the legend's swatches 10.
    let mut rows = 0;
    let mut run = 0;
    for y in 0..height {
        let p = px[y * width + bar_x + 2];
        run = if p == sold || p == track { run + 1 } else { 0 };
        rows += usize::from(run == 15);
    }
    assert_eq!(rows, 3, "one bar per product in the screenshot");
    assert!(px.contains(&oversold), "naive's oversell is drawn in red");

    let finished = running.await.expect("race");
    assert_eq!(finished.oversold, 0);
    // A product with holds nobody pays, its buyers arriving over 2 s:
    // units given back sell again, so more holds are made than there is
    // stock while no more than the stock is ever kept. Its card adds the
    // order life, and nothing of it is drawn or counted as oversold.
    race_on(
        &audit,
        &gateway,
        Race {
            stock: 5,
            buyers: 40,
            concurrency: 5,
            pace: Some(Duration::from_millis(50)),
            ..Race::crowd(1503, "redis-lua", json!({"pay_within_ms": 300}))
        },
    )
    .await;
    // Operated live: units added to one, one paused, one closed.
    use seckill::model::product::operation::WindowAction;
    gateway
        .restock_answer(1501, 5, uuid::Uuid::now_v7())
        .await
        .expect("restock");
    gateway
        .window_answer(1500, WindowAction::Pause)
        .await
        .expect("pause");
    gateway
        .window_answer(1502, WindowAction::Close)
        .await
        .expect("close");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // After the race: what the page drew is what /report says.
    let dom = chromium(&url, profile.path(), &["--dump-dom".to_owned()]);
    let drawn = drawn_bars(&dom);
    let report: Vec<Ledger> = gateway
        .http
        .get(format!("{}/report", lab.info.gateway_url))
        .send()
        .await
        .expect("report")
        .json()
        .await
        .expect("json");
    assert_eq!(drawn.len(), report.len(), "{drawn:?}");
    for ledger in &report {
        let label = format!("{} #{}", ledger.strategy, ledger.id);
        assert_eq!(
            drawn.get(&label),
            Some(&(
                ledger.strategy.clone(),
                ledger.initial,
                ledger.kept,
                ledger.oversold
            )),
            "{label}"
        );
    }
    let holds = report.iter().find(|l| l.id == 1503).expect("the holds");
    assert!(
        holds.sold > holds.initial && holds.kept <= holds.initial && holds.oversold == 0,
        "{holds:?}"
    );
    assert!(report.iter().any(|l| l.oversold > 0), "naive oversold");
    // Each product's card: the same numbers, the minute's answers and the
    // two instances that served them (the gateway round-robins).
    let cards = drawn_cards(&dom);
    assert_eq!(cards.len(), report.len(), "{cards:?}");
    for (id, tag) in [(1501, "restocked +5"), (1500, "paused"), (1502, "closed")] {
        let tag = format!(r#"<span class="tag">{tag}</span>"#);
        assert!(cards[&id].1.contains(&tag), "card {id}: {}", cards[&id].1);
    }
    let untouched = &cards[&1503].1;
    assert!(
        !untouched.contains(r#"<span class="tag">paused</span>"#)
            && !untouched.contains(r#"<span class="tag">restocked"#),
        "{untouched}"
    );
    // The backend paths of the instance that answered, with their guards.
    assert!(
        dom.contains("backend paths on this instance: ") && dom.contains("breaker closed"),
        "{dom}"
    );
    for ledger in &report {
        let (numbers, text) = &cards[&ledger.id];
        assert_eq!(
            *numbers,
            (ledger.initial, ledger.kept, ledger.oversold),
            "card {}",
            ledger.id
        );
        let holds = ledger.settings.pay_within_ms > 0;
        let kept = match holds {
            true => format!("kept {} of {}", ledger.kept, ledger.initial),
            false => format!("sold {} of {}", ledger.sold, ledger.initial),
        };
        assert!(text.contains(&kept), "{text}");
        let red = text.contains(r#"<span class="tag over">"#);
        assert_eq!(red, ledger.oversold > 0, "card {}: {text}", ledger.id);
        let life = format!(
            "orders: held {} · paid {} · expired {} · returned {}",
            ledger.held, ledger.paid, ledger.expired, ledger.returned
        );
        assert_eq!(text.contains(&life), holds, "card {}: {text}", ledger.id);
        assert_eq!(
            text.contains("given back"),
            holds,
            "card {}: {text}",
            ledger.id
        );
        assert!(
            text.contains("served by instance-a") && text.contains("instance-b"),
            "{text}"
        );
    }
}
