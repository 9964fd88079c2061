"""Schemathesis hooks for seckill (loaded by scripts/schemathesis.sh).

They shape generated requests where the document cannot say enough, and
never turn a valid request into an invalid one or the reverse
(Schemathesis re-checks which a case is after `before_call`).
"""

import json
import os

import schemathesis

SLOW_KNOBS = (
    "work_ms",
    "acquire_timeout_ms",
    "crash_gap_ms",
    "repair_pause_ms",
    "reaper_pause_ms",
)
SLOW_MS = 20
MAX_MS = 60_000  # src/model/product/settings.rs: MAX_MS


@schemathesis.hook
def before_call(context, case, kwargs):
    lower_slow_knobs(case)
    a_window_closes_after_it_opens(case)
    prebooking_needs_an_opening(case)
    a_recipe_is_zookeepers(case)
    a_store_the_strategy_takes(case)
    no_buyer_means_no_buyer(case)


def lower_slow_knobs(case):
    """A reset body may ask for up to a minute of simulated work, lock wait
    or crash gap per buy, or of a pause inside the repair or the reaper
    (the failure scenarios need that much; a repair pauses twice per try,
    so one product at the maximum holds `POST /admin/reconcile` for
    minutes, past the run's request timeout); a fuzzer
    that picks the maximum spends its run waiting, and its next buys queue
    behind the lock. Values in range and above SLOW_MS are lowered to it,
    so the body stays valid."""
    body = case.body
    if not isinstance(body, dict):
        return
    for knob in SLOW_KNOBS:
        value = body.get(knob)
        if type(value) in (int, float) and SLOW_MS < value <= MAX_MS:
            body[knob] = SLOW_MS


def a_window_closes_after_it_opens(case):
    """A sale window must close after it opens (`closes_at_ms` greater
    than `opens_at_ms`, or 0 for never): one field compared with another,
    which the document can only say in words. A generated body that has it
    backwards is given no close, so it stays valid; the refusal of a
    backwards window is tested in tests/api/window.rs."""
    body = case.body
    if not isinstance(body, dict):
        return
    opens, closes = body.get("opens_at_ms"), body.get("closes_at_ms")
    numbers = (int, float)
    if type(closes) in numbers and closes != 0:
        if closes <= (opens if type(opens) in numbers else 0):
            body["closes_at_ms"] = 0


def prebooking_needs_an_opening(case):
    """Reservations are taken until the sale opens, so `prebooking` needs
    an `opens_at_ms`: a cross-field rule again. A generated body with
    pre-booking and no opening is given no pre-booking; the refusal is
    tested in tests/api/prebooking.rs."""
    body = case.body
    if not isinstance(body, dict) or body.get("prebooking") is not True:
        return
    opens = body.get("opens_at_ms")
    if type(opens) not in (int, float) or opens == 0:
        body["prebooking"] = False


def a_recipe_is_zookeepers(case):
    """`recipe` is the `zookeeper` strategy's setting; any other strategy
    refuses all but the default (tests/api/locks.rs). A generated body
    pairing another strategy with a recipe is given the default one."""
    body = case.body
    if not isinstance(body, dict) or body.get("strategy") == "zookeeper":
        return
    if body.get("recipe", "mutex") != "mutex":
        body["recipe"] = "mutex"


def a_store_the_strategy_takes(case):
    """Each strategy sells from the stores its catalogue entry lists
    (`stores`, passed by tests/labs/openapi.rs as SECKILL_STORES); any other is
    refused with a 400 (tests/api/mysql.rs). A generated body naming
    another store for its strategy is given the strategy's own."""
    body = case.body
    stores = json.loads(os.environ.get("SECKILL_STORES", "{}"))
    if not isinstance(body, dict):
        return
    strategy = body.get("strategy")
    if not isinstance(strategy, str) or strategy not in stores:
        return
    takes = stores[strategy]
    if body.get("store") is not None and body["store"] not in takes:
        body["store"] = takes[0]


def no_buyer_means_no_buyer(case):
    """The buyer is `X-User-Id` or `?user=`. OpenAPI cannot say "one of
    the two", so the document requires the header and describes `?user=`
    as its stand-in. A buy generated without the header is meant to have
    no buyer: without this, its `?user=` would buy, and the checks would
    call that accepting an invalid request."""
    buyer_routes = (
        "/stock/{id}/buy",
        "/stock/{id}/buy/{path}",
        "/stock/{id}/path",
        "/stock/{id}/reserve",
        "/orders/{id}",
        "/orders/{id}/pay",
        "/orders/{id}/cancel",
    )
    if case.operation.path not in buyer_routes:
        return
    headers = {name.lower() for name in (case.headers or {})}
    if "x-user-id" not in headers and case.query:
        case.query.pop("user", None)
