//! TRIM TO TOKENS: keep the most recent (or the first) messages that fit a token budget, with
//! LangChain's `trim_messages` semantics where they overlap, except that an assistant message
//! that calls tools and the results that answer it form one *unit*, kept or dropped whole.
//!
//! A trim is planned on a view ([`select`]), may cut one message to fit ([`partial`]), and is
//! applied (`Store::apply_trim`, in `core/store/trim.rs`). The counts come from a closure, so the same plan serves the
//! cached encodings and a Python counter. See `docs/tokens.md`.

use std::convert::Infallible;
use std::ops::Range;

use crate::core::arena::{Arena, NodeId};
use crate::core::config::{Budget, Roles, Strategy};
use crate::core::cow_vec::CowVec;
use crate::core::pairs;
use crate::core::roles::Role;
use crate::core::value::{Encoder, Value, ValueRef};

/// The plan of a trim over the visible list it was made on (positions into it).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The leading system/developer messages kept: positions `0..system`.
    pub system: usize,
    /// The units kept, in the order they were taken (newest first for `Last`).
    pub kept: Vec<Range<usize>>,
    /// The single message that did not fit and may be cut to fit: its position and the tokens
    /// left for it.
    pub candidate: Option<(usize, u64)>,
    /// The budget decided the plan: a run the role rules would keep did not fit (without this,
    /// the plan keeps what a plan with no limit would).
    pub over: bool,
}

/// A piece of the result: a run of kept positions, or the cut message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    Keep(Range<usize>),
    Cut,
}

/// The part a message plays in a tool unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Plain,
    /// An assistant message that calls tools (OpenAI `tool_calls`, or `tool_use` blocks).
    Calls,
    /// A `tool` message.
    ToolResult,
    /// A user message carrying `tool_result` blocks (Anthropic).
    Results,
    /// A Responses API call item (`function_call`, ...).
    ItemCall,
    /// A Responses API output item (`function_call_output`, ...).
    ItemOutput,
    /// A Responses API `reasoning` item: one unit with the item it comes before.
    Reasoning,
}

fn has_block(message: ValueRef<'_>, kind: &str) -> bool {
    message
        .field("content")
        .and_then(ValueRef::as_list)
        .is_some_and(|blocks| {
            blocks
                .values()
                .any(|b| b.field("type").and_then(ValueRef::as_str) == Some(kind))
        })
}

fn part(arena: &Arena, id: NodeId) -> Part {
    let message = arena.message(id);
    if let Some(item_type) = message.field("type").and_then(ValueRef::as_str)
        && item_type != "message"
    {
        let has_call_id = message.field("call_id").is_some_and(|v| !v.is_null());
        return match pairs::item_kind(item_type, has_call_id) {
            pairs::Kind::ItemCall => Part::ItemCall,
            pairs::Kind::ItemOutput => Part::ItemOutput,
            pairs::Kind::Reasoning => Part::Reasoning,
            _ => Part::Plain,
        };
    }
    match arena.role(id) {
        Role::Tool => Part::ToolResult,
        Role::Assistant => {
            let m = arena.message(id);
            let calls = m
                .field("tool_calls")
                .and_then(ValueRef::as_list)
                .is_some_and(|c| c.count > 0);
            if calls || has_block(m, "tool_use") {
                Part::Calls
            } else {
                Part::Plain
            }
        }
        Role::User if has_block(arena.message(id), "tool_result") => Part::Results,
        _ => Part::Plain,
    }
}

/// The visible list a trim reads: ids, roles and kinds by position.
struct Messages<'a> {
    visible: &'a CowVec<NodeId>,
    arena: &'a Arena,
}

impl Messages<'_> {
    fn role(&self, pos: usize) -> Role {
        self.arena.role(self.visible[pos])
    }

    fn part(&self, pos: usize) -> Part {
        part(self.arena, self.visible[pos])
    }

    /// The unit that ends at `last`, not reaching below `floor`.
    fn unit_ending_at(&self, last: usize, floor: usize) -> Range<usize> {
        let mut first = last;
        match self.part(last) {
            Part::ToolResult => {
                while first > floor && self.part(first - 1) == Part::ToolResult {
                    first -= 1;
                }
                if first > floor && self.part(first - 1) == Part::Calls {
                    first -= 1;
                }
            }
            Part::Results if last > floor && self.part(last - 1) == Part::Calls => first -= 1,
            Part::ItemOutput => {
                while first > floor && self.part(first - 1) == Part::ItemOutput {
                    first -= 1;
                }
                if first > floor && self.part(first - 1) == Part::ItemCall {
                    first = self.calls_run_start(first - 1, floor);
                }
            }
            Part::ItemCall | Part::Reasoning => first = self.calls_run_start(last, floor),
            _ => {}
        }
        // Reasoning items stay with the item right after them.
        while first > floor && self.part(first - 1) == Part::Reasoning {
            first -= 1;
        }
        first..last + 1
    }

    /// The start of the run of call and reasoning items that holds `at`, not below `floor`.
    fn calls_run_start(&self, mut at: usize, floor: usize) -> usize {
        while at > floor && matches!(self.part(at - 1), Part::ItemCall | Part::Reasoning) {
            at -= 1;
        }
        at
    }

    /// The unit that starts at `first`, not reaching `ceiling`.
    fn unit_starting_at(&self, first: usize, ceiling: usize) -> Range<usize> {
        let mut end = first;
        while end < ceiling && self.part(end) == Part::Reasoning {
            end += 1;
        }
        if end == ceiling {
            return first..end;
        }
        let kind = self.part(end);
        end += 1;
        match kind {
            Part::Calls => {
                let after_call = end;
                while end < ceiling && self.part(end) == Part::ToolResult {
                    end += 1;
                }
                if end == after_call && end < ceiling && self.part(end) == Part::Results {
                    end += 1;
                }
            }
            Part::ItemCall => {
                while end < ceiling && matches!(self.part(end), Part::ItemCall | Part::Reasoning) {
                    end += 1;
                }
                while end < ceiling && self.part(end) == Part::ItemOutput {
                    end += 1;
                }
            }
            _ => {}
        }
        first..end
    }
}

/// Where the kept messages of a trim of `visible` end at the latest: the end of the history, or
/// with `Last` and an `end_on` rule, the end of its last unit that ends on one of those roles.
pub fn kept_end(visible: &CowVec<NodeId>, arena: &Arena, budget: &Budget) -> usize {
    let m = Messages { visible, arena };
    let mut end = visible.len();
    if budget.strategy == Strategy::Last && !budget.end_on.is_empty() {
        while end > 0 && !budget.end_on.has(m.role(end - 1)) {
            end = m.unit_ending_at(end - 1, 0).start;
        }
    }
    end
}

/// A run's lower bounds are read only when it holds more than this many bytes a token of room.
const BOUND_FROM: u64 = 2;

/// Plan a trim of `visible`. `count(pos)` is the token count of the message at `pos`, and
/// `at_least(pos)` a lower bound on it that costs less to find (`|_| 0` when there is none): a
/// run of messages whose bounds alone pass the room left is dropped without counting it, and a
/// run is counted only until its counts and the bounds of the rest pass the room. O(k) counts for
/// k kept, plus those of the dropped end that the bounds do not settle.
///
/// With `Last` and a `start_on` rule (and no message to cut), the result starts on a unit the rule
/// starts on ([`finish`] drops those before it), so the plan takes units in *runs*, back to the
/// next such unit, each kept whole or not at all: the units of a run that does not fit are never
/// kept, and need not be counted. Otherwise every unit is a run of its own.
pub fn select(
    visible: &CowVec<NodeId>,
    arena: &Arena,
    budget: &Budget,
    priming: u64,
    count: &mut dyn FnMut(usize) -> u64,
    at_least: &mut dyn FnMut(usize) -> u64,
) -> Selection {
    let m = Messages { visible, arena };
    let end = kept_end(visible, arena, budget);
    let system = if budget.keep_system {
        (0..end).take_while(|&p| m.role(p).is_instruction()).count()
    } else {
        0
    };
    let system_cost: u64 = (0..system).map(&mut *count).sum();
    let mut room = budget.max_tokens.saturating_sub(system_cost).saturating_sub(priming);
    let mut selection = Selection {
        system,
        ..Selection::default()
    };
    let by_runs = budget.strategy == Strategy::Last && !budget.start_on.is_empty() && !budget.allow_partial;
    let mut at = match budget.strategy {
        Strategy::Last => end,
        Strategy::First => system,
    };
    let mut run: Vec<Range<usize>> = Vec::new();
    let mut bounds: Vec<u64> = Vec::new();
    loop {
        run.clear();
        match budget.strategy {
            Strategy::Last => {
                let mut from = at;
                while from > system {
                    let unit = m.unit_ending_at(from - 1, system);
                    from = unit.start;
                    let starts_on_rule = budget.start_on.has(m.role(unit.start));
                    run.push(unit);
                    if !by_runs || starts_on_rule {
                        break;
                    }
                }
                // The units back to the system messages, none of them one the rule starts on.
                if by_runs && run.last().is_some_and(|u| !budget.start_on.has(m.role(u.start))) {
                    break;
                }
            }
            Strategy::First if at < end => run.push(m.unit_starting_at(at, end)),
            Strategy::First => {}
        }
        let Some(last) = run.last().cloned() else {
            break;
        };
        let Some(cost) = cost_within(&m, &run, room, count, at_least, &mut bounds) else {
            selection.over = true;
            if budget.allow_partial && last.len() == 1 && m.part(last.start) == Part::Plain {
                selection.candidate = Some((last.start, room));
            }
            break;
        };
        room -= cost;
        at = match budget.strategy {
            Strategy::Last => last.start,
            Strategy::First => last.end,
        };
        selection.kept.append(&mut run);
    }
    selection
}

/// Plan a trim of `visible` ([`select`]) with the budget's hysteresis: with a `low_water` mark
/// (and `Last`), a history that passes `max_tokens` is cut back to what fits the low-water mark,
/// in one step; one that does not pass it keeps what the role rules keep, so between cuts the
/// result is the last one with the new messages after it. A cut keeps at least what fits
/// `max_tokens` when nothing but the system messages fits the low-water mark. The counts are
/// those of [`select`]; a cut plans twice (the second time over messages already counted).
pub fn plan(
    visible: &CowVec<NodeId>,
    arena: &Arena,
    budget: &Budget,
    priming: u64,
    count: &mut dyn FnMut(usize) -> u64,
    at_least: &mut dyn FnMut(usize) -> u64,
) -> Selection {
    let high = select(visible, arena, budget, priming, count, at_least);
    let Some(low_water) = budget
        .low_water
        .filter(|_| high.over && budget.strategy == Strategy::Last)
    else {
        return high;
    };
    let low_budget = Budget {
        max_tokens: low_water.min(budget.max_tokens),
        ..*budget
    };
    let low = select(visible, arena, &low_budget, priming, count, at_least);
    let system_slot = usize::from(low.system > 0);
    if finish(&low, false, visible, arena, budget).len() > system_slot {
        low
    } else {
        high
    }
}

/// The tokens of the messages of `units` if they fit in `room`, counted in order until they do
/// not; `None` as soon as the counts so far and the lower bounds of the rest pass `room`. The
/// bounds are read only for a run of more than [`BOUND_FROM`] bytes a token of room: a shorter
/// run's words cannot pass the room (a word after the first takes two bytes with its space), so
/// only its fixed costs could, and reading them would mostly be work for nothing.
fn cost_within(
    m: &Messages<'_>,
    units: &[Range<usize>],
    room: u64,
    count: &mut dyn FnMut(usize) -> u64,
    at_least: &mut dyn FnMut(usize) -> u64,
    bounds: &mut Vec<u64>,
) -> Option<u64> {
    let positions = || units.iter().flat_map(Range::clone);
    bounds.clear();
    let bytes: usize = positions().map(|pos| m.arena.bytes(m.visible[pos]).len()).sum();
    if bytes as u64 > room.saturating_mul(BOUND_FROM) {
        bounds.extend(positions().map(&mut *at_least));
    }
    let mut rest: u64 = bounds.iter().sum();
    let mut cost = 0;
    for (i, pos) in positions().enumerate() {
        if cost + rest > room {
            return None;
        }
        rest -= bounds.get(i).copied().unwrap_or(0);
        cost += count(pos);
    }
    (cost <= room).then_some(cost)
}

/// The result of a plan, in order, after the role rules: `Last` drops whole units from the old
/// end of the tail until it starts on `start_on`; `First` drops them from the end of the head
/// until it ends on `end_on`. `cut` says the candidate was cut to fit and is part of the result.
pub fn finish(selection: &Selection, cut: bool, visible: &CowVec<NodeId>, arena: &Arena, budget: &Budget) -> Vec<Slot> {
    let m = Messages { visible, arena };
    let mut taken: Vec<Slot> = selection.kept.iter().cloned().map(Slot::Keep).collect();
    if cut {
        taken.push(Slot::Cut);
    }
    let candidate = selection.candidate.map_or(0, |(pos, _)| pos);
    let (rule, edge): (Roles, fn(&Range<usize>) -> usize) = match budget.strategy {
        Strategy::Last => (budget.start_on, |r| r.start),
        Strategy::First => (budget.end_on, |r| r.end - 1),
    };
    if !rule.is_empty() {
        while let Some(slot) = taken.last() {
            let pos = match slot {
                Slot::Keep(range) => edge(range),
                Slot::Cut => candidate,
            };
            if rule.has(m.role(pos)) {
                break;
            }
            taken.pop();
        }
    }
    if budget.strategy == Strategy::Last {
        taken.reverse();
    }
    let mut out = Vec::with_capacity(taken.len() + 1);
    if selection.system > 0 {
        out.push(Slot::Keep(0..selection.system));
    }
    out.extend(taken);
    out
}

/// Python's `text.split("\n")` with the newline kept on every piece but the last (LangChain's
/// default text splitter).
fn lines(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = text.split_inclusive('\n').collect();
    if text.is_empty() || text.ends_with('\n') {
        out.push("");
    }
    out
}

/// `message` with its content replaced by what `write` encodes (every other key as it was).
fn with_content(message: ValueRef<'_>, write: &dyn Fn(&mut Encoder<'_>)) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    if let Some(fields) = message.as_dict() {
        let d = e.open_dict(fields.count);
        for (key, value) in fields.entries() {
            e.key(key);
            if key == "content" {
                write(&mut e);
            } else {
                e.raw(value);
            }
        }
        e.close(d);
    }
    buf
}

fn blocks_message(message: ValueRef<'_>, blocks: &[ValueRef<'_>]) -> Vec<u8> {
    with_content(message, &|e| {
        let l = e.open_list(blocks.len());
        for b in blocks {
            e.raw(*b);
        }
        e.close(l);
    })
}

fn text_message(message: ValueRef<'_>, text: &str) -> Vec<u8> {
    with_content(message, &|e| e.str(text))
}

/// The largest `k` in `0..=n` with `fits(k)`, by LangChain's binary search (which assumes `fits`
/// holds for a prefix of the `k`s).
fn largest<E>(n: usize, fits: &mut dyn FnMut(usize) -> Result<bool, E>) -> Result<usize, E> {
    let (mut lo, mut hi) = (0, n);
    for _ in 0..(usize::BITS - n.leading_zeros()) {
        if lo >= hi {
            break;
        }
        let mid = (lo + hi).div_ceil(2);
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(lo)
}

/// Cut `message` to fit `room` tokens, as LangChain's `allow_partial` does: a list of blocks
/// loses blocks from the far end (the start for `Last`) while that is enough; otherwise the text
/// (the string content, or the one block left) is cut into pieces by `split` (the pieces must
/// join back to the text; [`lines`] by default) and keeps as many whole pieces from the near end
/// as fit, joined. Returns the new message, or `None` when nothing fits. Unlike LangChain, which
/// counts the kept pieces in reverse order while searching for `Last`, the text counted is the
/// text kept.
pub fn partial<E>(
    message: ValueRef<'_>,
    room: u64,
    strategy: Strategy,
    count: &mut dyn FnMut(ValueRef<'_>) -> Result<u64, E>,
    split: &mut dyn FnMut(&str) -> Result<Vec<String>, E>,
) -> Result<Option<Vec<u8>>, E> {
    let last = strategy == Strategy::Last;
    let mut fits = |bytes: &[u8]| -> Result<bool, E> { Ok(count(ValueRef::new(bytes))? <= room) };
    let text = match message.field("content").map(ValueRef::get) {
        Some(Value::Str(s)) => Some(s),
        Some(Value::List(items)) => {
            let mut blocks: Vec<ValueRef<'_>> = items.values().collect();
            if last {
                blocks.reverse();
            }
            for keep in (1..blocks.len()).rev() {
                let mut kept = blocks[..keep].to_vec();
                if last {
                    kept.reverse();
                }
                let candidate = blocks_message(message, &kept);
                if fits(&candidate)? {
                    return Ok(Some(candidate));
                }
            }
            blocks.first().and_then(|b| match b.get() {
                Value::Str(s) => Some(s),
                Value::Dict(d) if d.field("type").and_then(ValueRef::as_str) == Some("text") => {
                    d.field("text").and_then(ValueRef::as_str)
                }
                _ => None,
            })
        }
        _ => None,
    };
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let mut pieces = split(text)?;
    if last {
        pieces.reverse();
    }
    let joined = |k: usize| -> String {
        if last {
            pieces[..k].iter().rev().map(String::as_str).collect()
        } else {
            pieces[..k].concat()
        }
    };
    let k = largest(pieces.len(), &mut |k| fits(&text_message(message, &joined(k))))?;
    Ok((k > 0).then(|| text_message(message, &joined(k))))
}

/// [`lines`] as `partial`'s default splitter.
pub fn by_lines<E>(text: &str) -> Result<Vec<String>, E> {
    Ok(lines(text).into_iter().map(str::to_owned).collect())
}

/// The candidate of `selection` (planned on `visible`) cut to fit, counted exactly in the budget's
/// encoding; `None` when there is no candidate or nothing of it fits.
pub fn exact_cut(arena: &Arena, visible: &CowVec<NodeId>, selection: &Selection, budget: &Budget) -> Option<Vec<u8>> {
    let (pos, room) = selection.candidate?;
    let encoding = budget.encoding;
    let exact = &mut |m: ValueRef<'_>| Ok::<u64, Infallible>(encoding.count_message(m));
    match partial(arena.message(visible[pos]), room, budget.strategy, exact, &mut by_lines) {
        Ok(cut) => cut,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::{Incoming, Store};
    use crate::core::test_random::Lcg;
    use crate::core::tokens::Encoding;

    /// (role, content, calls): calls > 0 makes an assistant message with that many tool calls.
    fn store(messages: &[(&str, &str)]) -> Store {
        let mut incoming = Incoming::default();
        for (role, content) in messages {
            let (start, mut e) = incoming.encoder();
            let calls = *role == "assistant" && content.starts_with("call");
            let d = e.open_dict(2 + usize::from(calls) + usize::from(*role == "tool"));
            e.key("role");
            e.str(role);
            e.key("content");
            e.str(content);
            if calls {
                e.key("tool_calls");
                let l = e.open_list(1);
                e.tool_call("c");
                e.close(l);
            }
            if *role == "tool" {
                e.key("tool_call_id");
                e.str("c");
            }
            e.close(d);
            incoming.finish(start, || "m".into()).unwrap();
        }
        let mut store = Store::default();
        store.append(&incoming);
        store
    }

    fn budget(max_tokens: u64, strategy: Strategy) -> Budget {
        Budget {
            max_tokens,
            strategy,
            keep_system: true,
            start_on: Roles::default(),
            end_on: Roles::default(),
            allow_partial: false,
            encoding: Encoding::Approximate,
            low_water: None,
            thinking: crate::core::config::Thinking::DropEarlier,
        }
    }

    /// Every message costs 1: the budget is a message count.
    fn trim(store: &mut Store, budget: &Budget) -> Vec<String> {
        let visible = store.visible().clone();
        let selection = select(&visible, store.arena(), budget, 0, &mut |_| 1, &mut |_| 0);
        assert!(store.apply_trim(&visible, &selection, None, budget, "t".into()));
        store
            .visible()
            .iter()
            .map(|&id| {
                let m = store.arena().message(id);
                m.field("content").and_then(ValueRef::as_str).unwrap_or("").to_owned()
            })
            .collect()
    }

    const HISTORY: [(&str, &str); 7] = [
        ("system", "s"),
        ("user", "u1"),
        ("assistant", "call1"),
        ("tool", "r1"),
        ("tool", "r2"),
        ("assistant", "a1"),
        ("user", "u2"),
    ];

    #[test]
    fn a_tool_call_and_its_results_are_kept_or_dropped_together() {
        // Room for 3 after the system message: u2, a1 fit; the call unit (3 messages) does not.
        assert_eq!(
            trim(&mut store(&HISTORY), &budget(4, Strategy::Last)),
            ["s", "a1", "u2"]
        );
        assert_eq!(
            trim(&mut store(&HISTORY), &budget(6, Strategy::Last)),
            ["s", "call1", "r1", "r2", "a1", "u2"]
        );
        // From the front: s, u1, then the unit of three needs room for 3.
        assert_eq!(trim(&mut store(&HISTORY), &budget(4, Strategy::First)), ["s", "u1"]);
        assert_eq!(
            trim(&mut store(&HISTORY), &budget(5, Strategy::First)),
            ["s", "u1", "call1", "r1", "r2"]
        );
    }

    #[test]
    fn start_on_and_end_on_drop_whole_units() {
        let mut b = budget(100, Strategy::Last);
        b.start_on = Roles::of(&[Role::User]);
        b.end_on = Roles::of(&[Role::Assistant]);
        // end_on drops u2; start_on then needs a user message first: u1.
        assert_eq!(trim(&mut store(&HISTORY), &b), ["s", "u1", "call1", "r1", "r2", "a1"]);
        b.max_tokens = 5;
        // The tail a1 + the call unit fits (4) but starts on an assistant message: both go.
        assert_eq!(trim(&mut store(&HISTORY), &b), ["s"]);
        let mut f = budget(6, Strategy::First);
        f.end_on = Roles::of(&[Role::Assistant]);
        // s u1 [call1 r1 r2] a1: the head ends on a1.
        assert_eq!(trim(&mut store(&HISTORY), &f), ["s", "u1", "call1", "r1", "r2", "a1"]);
        f.max_tokens = 5;
        // s u1 [call1 r1 r2]: the unit ends on a tool result, so it goes, then u1.
        assert_eq!(trim(&mut store(&HISTORY), &f), ["s"]);
    }

    /// The slots of a plan of `store` where message `pos` costs `costs[pos]`, with `bounds` as the
    /// lower bounds, and the positions it counted.
    fn plan(store: &Store, b: &Budget, costs: &[u64], bounds: &[u64]) -> (Vec<Slot>, Vec<usize>) {
        let visible = store.visible().clone();
        let mut counted = Vec::new();
        let selection = select(
            &visible,
            store.arena(),
            b,
            0,
            &mut |pos| {
                counted.push(pos);
                costs[pos]
            },
            &mut |pos| bounds[pos],
        );
        (finish(&selection, false, &visible, store.arena(), b), counted)
    }

    #[test]
    fn a_run_the_bounds_show_cannot_fit_is_not_counted() {
        let s = store(&HISTORY);
        let mut b = budget(4, Strategy::Last);
        b.start_on = Roles::of(&[Role::User]);
        let ones = [1; HISTORY.len()];
        // After s and u2, room for 2; the run back to u1 (a1, the call unit, u1) costs 5.
        let (unbounded, counted) = plan(&s, &b, &ones, &[0; HISTORY.len()]);
        assert_eq!(unbounded, [Slot::Keep(0..1), Slot::Keep(6..7)]);
        assert_eq!(counted, [0, 6, 5, 2, 3], "counted until the run passed the room");
        let (bounded, counted) = plan(&s, &b, &ones, &ones);
        assert_eq!(bounded, unbounded);
        assert_eq!(counted, [0, 6], "the bounds alone settle the run");
        // Without the rule every unit is its own run: a1 fits, the call unit is not counted.
        b.start_on = Roles::default();
        let (slots, counted) = plan(&s, &b, &ones, &ones);
        assert_eq!(slots, [Slot::Keep(0..1), Slot::Keep(5..6), Slot::Keep(6..7)]);
        assert_eq!(counted, [0, 6, 5]);
    }

    #[test]
    fn bounds_change_what_is_counted_never_the_plan() {
        const ROLES: [(&str, &str); 6] = [
            ("user", "u"),
            ("assistant", "a"),
            ("assistant", "call"),
            ("tool", "r"),
            ("system", "s"),
            ("user", "v"),
        ];
        let mut random = Lcg::new(5);
        let mut next = |n: u64| random.below(n);
        for _ in 0..3_000 {
            let history: Vec<(&str, &str)> = (0..next(12)).map(|_| ROLES[next(6) as usize]).collect();
            let s = store(&history);
            let costs: Vec<u64> = history.iter().map(|_| next(9)).collect();
            let bounds: Vec<u64> = costs.iter().map(|&c| next(c + 1)).collect();
            let mut b = budget(next(30), if next(2) == 0 { Strategy::Last } else { Strategy::First });
            b.keep_system = next(2) == 0;
            b.start_on = [
                Roles::default(),
                Roles::of(&[Role::User]),
                Roles::of(&[Role::Assistant]),
            ][next(3) as usize];
            b.end_on = [Roles::default(), Roles::of(&[Role::Tool])][next(2) as usize];
            let unbounded = plan(&s, &b, &costs, &vec![0; costs.len()]).0;
            let (bounded, counted) = plan(&s, &b, &costs, &bounds);
            assert_eq!(
                bounded, unbounded,
                "{history:?} costs {costs:?} bounds {bounds:?} {b:?}"
            );
            let kept: Vec<usize> = bounded
                .iter()
                .flat_map(|slot| match slot {
                    Slot::Keep(r) => r.clone(),
                    Slot::Cut => 0..0,
                })
                .collect();
            assert!(
                kept.iter().all(|p| counted.contains(p)),
                "every kept message is counted"
            );
        }
    }

    /// The contents kept by a plan with hysteresis (every message costs 1).
    fn kept_with_low_water(history: &[(&str, &str)], max_tokens: u64, low_water: u64) -> Vec<String> {
        let s = store(history);
        let mut b = budget(max_tokens, Strategy::Last);
        b.start_on = Roles::of(&[Role::User]);
        b.low_water = Some(low_water);
        let visible = s.visible().clone();
        let selection = super::plan(&visible, s.arena(), &b, 0, &mut |_| 1, &mut |_| 0);
        finish(&selection, false, &visible, s.arena(), &b)
            .into_iter()
            .flat_map(|slot| match slot {
                Slot::Keep(r) => r,
                Slot::Cut => 0..0,
            })
            .map(|pos| history[pos].1.to_owned())
            .collect()
    }

    #[test]
    fn hysteresis_cuts_to_the_low_water_mark_only_past_the_high_one() {
        let turns = [
            ("system", "s"),
            ("user", "u1"),
            ("assistant", "a1"),
            ("user", "u2"),
            ("assistant", "a2"),
            ("user", "u3"),
            ("assistant", "a3"),
        ];
        // Everything fits 7: nothing is cut, whatever the low-water mark.
        assert_eq!(kept_with_low_water(&turns, 7, 3).len(), 7);
        // Past 6: cut back to what fits 3 (the system message and one turn).
        assert_eq!(kept_with_low_water(&turns, 6, 3), ["s", "u3", "a3"]);
        // Nothing but the system message fits 1: the cut keeps what fits the high-water mark.
        assert_eq!(kept_with_low_water(&turns, 6, 1), ["s", "u2", "a2", "u3", "a3"]);
        // Leading messages the role rule drops are not a cut.
        assert_eq!(kept_with_low_water(&turns[2..], 5, 1), ["u2", "a2", "u3", "a3"]);
    }

    #[test]
    fn the_system_messages_stay_even_over_budget() {
        assert_eq!(trim(&mut store(&HISTORY), &budget(0, Strategy::Last)), ["s"]);
        let mut b = budget(0, Strategy::Last);
        b.keep_system = false;
        assert!(trim(&mut store(&HISTORY), &b).is_empty());
    }

    #[test]
    fn a_changed_view_is_not_trimmed() {
        let mut s = store(&HISTORY);
        let visible = s.visible().clone();
        let b = budget(2, Strategy::Last);
        let selection = select(&visible, s.arena(), &b, 0, &mut |_| 1, &mut |_| 0);
        s.checkpoint("cp".into());
        s.truncate(
            &crate::core::config::Cuts {
                keep_last: Some(3),
                ..Default::default()
            },
            "t".into(),
        )
        .unwrap();
        assert!(!s.apply_trim(&visible, &selection, None, &b, "trim".into()));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn partial_keeps_whole_lines_from_the_near_end() {
        let s = store(&[("user", "one\ntwo\nthree")]);
        let m = s.arena().message(0);
        let content = |bytes: Option<Vec<u8>>| {
            bytes.map(|b| {
                ValueRef::new(&b)
                    .field("content")
                    .and_then(ValueRef::as_str)
                    .unwrap()
                    .to_owned()
            })
        };
        // Count = characters of the content.
        let mut chars = |v: ValueRef<'_>| -> Result<u64, ()> {
            Ok(v.field("content").and_then(ValueRef::as_str).map_or(0, str::len) as u64)
        };
        assert_eq!(
            content(partial(m, 9, Strategy::Last, &mut chars, &mut by_lines).unwrap()).as_deref(),
            Some("two\nthree")
        );
        assert_eq!(
            content(partial(m, 8, Strategy::First, &mut chars, &mut by_lines).unwrap()).as_deref(),
            Some("one\ntwo\n")
        );
        assert_eq!(partial(m, 2, Strategy::First, &mut chars, &mut by_lines).unwrap(), None);
        let mut by_chars = |t: &str| -> Result<Vec<String>, ()> { Ok(t.chars().map(String::from).collect()) };
        assert_eq!(
            content(partial(m, 5, Strategy::Last, &mut chars, &mut by_chars).unwrap()).as_deref(),
            Some("three")
        );
        assert_eq!(
            content(partial(m, 5, Strategy::First, &mut chars, &mut by_chars).unwrap()).as_deref(),
            Some("one\nt")
        );
        assert_eq!(lines("a\n"), ["a\n", ""]);
        assert_eq!(lines(""), [""]);
    }
}
