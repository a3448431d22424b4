//! The paged window of the context system (docs/design.md), PyO3-free.
//!
//! Every message is a node of one [`Arena`]; the window is one shared [`Chain`] through those
//! nodes: first the *system chapter* (the system prompt and the recall-tool description), then
//! the *active chapter*, whose pages each own a contiguous run of the chain (a user message and
//! the assistant and tool messages it caused). A [`Page`] is only a view: its index and the
//! `head..=tail` run it covers. Opening a page or joining the open one links nodes at the tail
//! in O(1); detaching a page unlinks its whole run in O(1), which is how a page leaves the window
//! when it is archived (the archive itself, its contents page and its policies live in Python).
//!
//! Beside the nodes, the window keeps each message's token count per encoding, counted once when
//! first needed (a stored message never changes): the tokens of the window with any number of its
//! oldest pages left out are then sums over held counts ([`Window::tokens_without_oldest`]), which
//! is how the context system plans what to archive under a token budget.
//!
//! The arena never frees a node, so detached runs become garbage; when garbage outweighs what
//! the window still holds, the next page opened compacts the arena (copies the live nodes into a
//! fresh one, O(live)), keeping memory bounded by the window, not by the conversation.

use std::collections::VecDeque;

use crate::core::arena::{Arena, Chain, NIL, NodeId};
use crate::core::error::{Error, Result};
use crate::core::store::{Incoming, now};
use crate::core::token_counts::TokenCounts;
use crate::core::tokens::Encoding;
use crate::core::turns::{Thinking, opens_turn};

/// Page indices start at 1 and rise by one per page; they are never reused.
pub type PageIndex = u64;

/// A contiguous run `head..=tail` of `len` nodes in the shared chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub head: NodeId,
    pub tail: NodeId,
    pub len: usize,
}

/// One user interaction: a view over the run of its entries (one entry per node), and what its
/// entries cost per encoding once tallied (forgotten when an entry joins it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub index: PageIndex,
    pub run: Run,
    tallies: Tallies,
}

/// Pages over the shared chain, oldest first, in ascending index order.
#[derive(Debug, Clone, Default)]
pub struct Chapter {
    pages: VecDeque<Page>,
}

impl Chapter {
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Page> {
        self.pages.iter()
    }

    /// The newest page: the open one, which assistant and tool messages join.
    pub fn last(&self) -> Option<&Page> {
        self.pages.back()
    }

    fn position(&self, index: PageIndex) -> Option<usize> {
        self.pages.binary_search_by_key(&index, |p| p.index).ok()
    }

    pub fn get(&self, index: PageIndex) -> Option<&Page> {
        self.position(index).map(|i| &self.pages[i])
    }
}

/// The system chapter and the active chapter over one chain of arena nodes.
#[derive(Debug, Clone)]
pub struct Window {
    arena: Arena,
    chain: Chain,
    system: Option<Run>,
    active: Chapter,
    next_index: PageIndex,
    /// Token counts of the nodes, by node id (carried over when the arena is compacted).
    counts: TokenCounts,
    /// What the system chapter costs per encoding, once tallied.
    system_tallies: Tallies,
}

impl Default for Window {
    fn default() -> Self {
        Self {
            arena: Arena::default(),
            chain: Chain::default(),
            system: None,
            active: Chapter::default(),
            next_index: 1,
            counts: TokenCounts::default(),
            system_tallies: Tallies::default(),
        }
    }
}

/// Garbage below this many nodes is never worth a compaction.
const COMPACT_MIN_GARBAGE: usize = 1024;

impl Window {
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    pub fn active(&self) -> &Chapter {
        &self.active
    }

    /// The index the next page will get.
    pub fn next_index(&self) -> PageIndex {
        self.next_index
    }

    /// Nodes in the window (system chapter and active pages).
    pub fn len(&self) -> usize {
        self.chain.len
    }

    pub fn is_empty(&self) -> bool {
        self.chain.len == 0
    }

    pub fn system_len(&self) -> usize {
        self.system.map_or(0, |r| r.len)
    }

    /// Store `incoming` as unlinked nodes linked among themselves; their run.
    fn store_run(&mut self, incoming: &Incoming) -> Option<Run> {
        let t = now();
        let mut run: Option<Run> = None;
        let mut scratch = Chain::default();
        for (bytes, facts) in incoming.messages() {
            let id = self.arena.push(bytes, facts.role, facts.timestamp.unwrap_or(t));
            scratch.push_back(&mut self.arena, id);
            run = Some(match run {
                None => Run {
                    head: id,
                    tail: id,
                    len: 1,
                },
                Some(r) => Run {
                    tail: id,
                    len: r.len + 1,
                    ..r
                },
            });
        }
        run
    }

    /// Replace the system chapter with `incoming` (may be empty), at the front of the chain.
    pub fn set_system(&mut self, incoming: &Incoming) {
        self.system_tallies = Tallies::default();
        if let Some(old) = self.system.take() {
            self.chain.unlink_run(&mut self.arena, old.head, old.tail, old.len);
        }
        if let Some(run) = self.store_run(incoming) {
            self.chain
                .link_run_after(&mut self.arena, NIL, run.head, run.tail, run.len);
            self.system = Some(run);
        }
    }

    /// Open a new page holding `incoming` (its first message opens it, the rest join it) at the
    /// end of the window; returns its index. O(k), plus an occasional compaction.
    pub fn open_page(&mut self, incoming: &Incoming) -> Result<PageIndex> {
        let index = self.next_index;
        self.open_page_at(index, incoming)?;
        Ok(index)
    }

    /// Open a page with a given index (restoring a saved state): it must not be below the next
    /// index, and the next index becomes `index + 1`.
    pub fn open_page_at(&mut self, index: PageIndex, incoming: &Incoming) -> Result<()> {
        if index < self.next_index {
            return Err(Error::InvalidOperation(format!(
                "page {index} cannot be opened: page indices are never reused and the next one is {}",
                self.next_index
            )));
        }
        if incoming.is_empty() {
            return Err(Error::InvalidOperation("a page opens with at least one message".into()));
        }
        self.maybe_compact();
        let Some(run) = self.store_run(incoming) else {
            return Err(Error::InvalidOperation("a page opens with at least one message".into()));
        };
        self.chain
            .link_run_after(&mut self.arena, self.chain.tail, run.head, run.tail, run.len);
        self.active.pages.push_back(Page {
            index,
            run,
            tallies: Tallies::default(),
        });
        self.next_index = index + 1;
        Ok(())
    }

    /// Append `incoming` to the open page (the newest); returns its index. O(k).
    pub fn join(&mut self, incoming: &Incoming) -> Result<PageIndex> {
        let Some(open) = self.active.pages.back().copied() else {
            return Err(Error::InvalidOperation(
                "no page is open: a page opens with a message before others can join it".into(),
            ));
        };
        let Some(run) = self.store_run(incoming) else {
            return Ok(open.index);
        };
        // The open page's tail is the chain's tail: the new run goes right after it.
        self.chain
            .link_run_after(&mut self.arena, open.run.tail, run.head, run.tail, run.len);
        let page = self.active.pages.back_mut().expect("checked above");
        page.run.tail = run.tail;
        page.run.len += run.len;
        page.tallies = Tallies::default();
        Ok(open.index)
    }

    /// Unlink page `index` from the window in O(1) (its run stays linked among itself). Read
    /// its messages first ([`Window::page_ids`]) if they are needed.
    pub fn detach(&mut self, index: PageIndex) -> Result<()> {
        let Some(at) = self.active.position(index) else {
            return Err(Error::InvalidOperation(format!("page {index} is not in the window")));
        };
        let page = self.active.pages.remove(at).expect("position is in range");
        self.chain
            .unlink_run(&mut self.arena, page.run.head, page.run.tail, page.run.len);
        Ok(())
    }

    /// Take back the page just opened (when what had to follow its opening failed): it leaves
    /// the window and its index will be given again. Only the newest page, and only while no
    /// later index has been given.
    pub fn undo_open(&mut self, index: PageIndex) -> Result<()> {
        match self.active.last() {
            Some(p) if p.index == index && index + 1 == self.next_index => {
                self.detach(index)?;
                self.next_index = index;
                Ok(())
            }
            _ => Err(Error::InvalidOperation(format!(
                "page {index} is not the page just opened"
            ))),
        }
    }

    fn run_ids(&self, run: Run) -> Vec<NodeId> {
        let mut ids = Vec::with_capacity(run.len);
        let mut at = run.head;
        for _ in 0..run.len {
            ids.push(at);
            at = self.arena.node(at).next;
        }
        ids
    }

    /// The node ids of active page `index`, in order.
    pub fn page_ids(&self, index: PageIndex) -> Option<Vec<NodeId>> {
        self.active.get(index).map(|p| self.run_ids(p.run))
    }

    /// Every node of the window, in order: the system chapter, then the active pages.
    pub fn ids(&self) -> Vec<NodeId> {
        let mut ids = Vec::with_capacity(self.chain.len);
        ids.extend(self.chain.iter(&self.arena));
        ids
    }

    /// For each `k` in `0..=pages`, the tokens of the window with its `k` oldest active pages left
    /// out, sent as one request: each message's count, less the thinking of earlier turns with
    /// [`Thinking::DropEarlier`] (before the last message of that list that opens a user turn),
    /// plus the reply priming when the list is not empty. Exactly what counting those messages
    /// afresh gives. Pages not tallied yet (new ones, and the open page after a join) are tallied
    /// now, their messages counted once (on all cores when there are many); then O(pages)
    /// additions, no tokenizing.
    pub fn tokens_without_oldest(&mut self, encoding: Encoding, thinking: Thinking) -> Vec<u64> {
        self.tally_all(encoding);
        let e = encoding.index();
        let system = self.system_tallies[e].unwrap_or_default();
        let pages: Vec<Tally> = self.active.iter().map(|p| p.tallies[e].unwrap_or_default()).collect();
        // Suffix sums of the pages' messages and counts, prefix sums of their thinking.
        let mut after = vec![(0usize, 0u64); pages.len() + 1];
        for (j, page) in pages.iter().enumerate().rev() {
            after[j] = (after[j + 1].0 + page.len, after[j + 1].1 + page.count);
        }
        let mut before = vec![0u64; pages.len() + 1];
        for (j, page) in pages.iter().enumerate() {
            before[j + 1] = before[j] + page.thinking;
        }
        // The last page holding a message that opens a user turn: while it is kept, that message
        // starts the current turn; once it is left out, no kept page opens one.
        let turn_page = pages.iter().rposition(|p| p.before_turn.is_some());
        (0..=pages.len())
            .map(|k| {
                let dropped = match (thinking, turn_page) {
                    (Thinking::Count, _) => 0,
                    (Thinking::DropEarlier, Some(j)) if k <= j => {
                        system.thinking + before[j] - before[k] + pages[j].before_turn.unwrap_or(0)
                    }
                    (Thinking::DropEarlier, _) => system.before_turn.unwrap_or(0),
                };
                let (messages, count) = after[k];
                let priming = if system.len + messages == 0 {
                    0
                } else {
                    encoding.priming()
                };
                system.count + count - dropped + priming
            })
            .collect()
    }

    /// Tally the system chapter and every page not tallied yet in `encoding`.
    fn tally_all(&mut self, encoding: Encoding) {
        let e = encoding.index();
        let mut missing = Vec::new();
        if let Some(run) = self.system.filter(|_| self.system_tallies[e].is_none()) {
            missing.extend(self.run_ids(run));
        }
        for page in self.active.iter().filter(|p| p.tallies[e].is_none()) {
            missing.extend(self.run_ids(page.run));
        }
        if missing.is_empty() {
            return;
        }
        self.counts.fill(&self.arena, encoding, missing.into_iter());
        if self.system_tallies[e].is_none() {
            self.system_tallies[e] = Some(self.system.map_or_else(Tally::default, |run| self.tally(run, encoding)));
        }
        for at in 0..self.active.pages.len() {
            if self.active.pages[at].tallies[e].is_none() {
                let tally = self.tally(self.active.pages[at].run, encoding);
                self.active.pages[at].tallies[e] = Some(tally);
            }
        }
    }

    /// The counts of a run's nodes (every one counted).
    fn tally(&self, run: Run, encoding: Encoding) -> Tally {
        let mut tally = Tally {
            len: run.len,
            ..Tally::default()
        };
        let mut thinking = 0;
        for id in self.run_ids(run) {
            if opens_turn(self.arena.message(id)) {
                tally.before_turn = Some(thinking);
            }
            tally.count += self.counts.get(encoding, id).unwrap_or(0);
            thinking += self.counts.thinking(encoding, id);
        }
        tally.thinking = thinking;
        tally
    }

    /// Copy the live nodes into a fresh arena when the garbage left by detached runs outweighs
    /// them. O(live), so amortised O(1) per detached node.
    fn maybe_compact(&mut self) {
        let live = self.chain.len;
        let garbage = self.arena.len() - live;
        if garbage < COMPACT_MIN_GARBAGE || garbage < live {
            return;
        }
        self.compact();
    }

    /// Rebuild the arena with only the nodes in the window; runs keep their shape.
    pub fn compact(&mut self) {
        let mut arena = Arena::default();
        let mut chain = Chain::default();
        let mut counts = TokenCounts::default();
        let mut copy = |run: Run, arena: &mut Arena, chain: &mut Chain| -> Run {
            let mut new = Run {
                head: NIL,
                tail: NIL,
                len: run.len,
            };
            for id in self.run_ids(run) {
                let node = self.arena.node(id);
                let copied = arena.push(self.arena.message(id).bytes(), node.role, node.timestamp);
                self.counts.carry(id, &mut counts, copied);
                chain.push_back(arena, copied);
                if new.head == NIL {
                    new.head = copied;
                }
                new.tail = copied;
            }
            new
        };
        let system = self.system.map(|run| copy(run, &mut arena, &mut chain));
        let pages: VecDeque<Page> = self
            .active
            .pages
            .iter()
            .map(|p| Page {
                run: copy(p.run, &mut arena, &mut chain),
                ..*p
            })
            .collect();
        self.arena = arena;
        self.chain = chain;
        self.system = system;
        self.active.pages = pages;
        self.counts = counts;
    }
}

/// A run's [`Tally`] per encoding, by [`Encoding::index`], once taken.
type Tallies = [Option<Tally>; Encoding::ALL.len()];

/// What a run of nodes costs: its messages, their tokens, the tokens of their thinking, and, when
/// one of them opens a user turn, the thinking of the nodes before the last that does.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    len: usize,
    count: u64,
    thinking: u64,
    before_turn: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::{incoming_of, json_incoming_of};
    use crate::core::value::ValueRef;

    fn incoming(messages: &[(&str, &str)]) -> Incoming {
        incoming_of(messages)
    }

    fn text(window: &Window, ids: &[NodeId]) -> Vec<String> {
        ids.iter()
            .map(|&id| {
                let m: ValueRef<'_> = window.arena().message(id);
                m.field("content").and_then(ValueRef::as_str).unwrap().to_owned()
            })
            .collect()
    }

    fn window_text(window: &Window) -> Vec<String> {
        text(window, &window.ids())
    }

    /// A window with a system prompt and `pages` pages of a user question and an answer.
    fn window_of(pages: usize) -> Window {
        let mut w = Window::default();
        w.set_system(&incoming(&[("system", "sys")]));
        for i in 1..=pages {
            let q = format!("q{i}");
            let a = format!("a{i}");
            w.open_page(&incoming(&[("user", &q)])).unwrap();
            w.join(&incoming(&[("assistant", &a)])).unwrap();
        }
        w
    }

    #[test]
    fn pages_are_numbered_from_one_and_hold_their_whole_interaction() {
        let mut w = window_of(2);
        assert_eq!(w.open_page(&incoming(&[("user", "q3")])).unwrap(), 3);
        w.join(&incoming(&[("assistant", "call"), ("assistant", "r")])).unwrap();
        assert_eq!(w.join(&incoming(&[("assistant", "a3")])).unwrap(), 3);
        let indices: Vec<PageIndex> = w.active().iter().map(|p| p.index).collect();
        assert_eq!(indices, [1, 2, 3]);
        let ids = w.page_ids(3).unwrap();
        assert_eq!(text(&w, &ids), ["q3", "call", "r", "a3"]);
        assert_eq!(w.system_len(), 1);
        assert_eq!(
            window_text(&w),
            ["sys", "q1", "a1", "q2", "a2", "q3", "call", "r", "a3"]
        );
    }

    #[test]
    fn detaching_a_page_removes_its_whole_run_and_nothing_else() {
        let mut w = window_of(3);
        let ids = w.page_ids(2).unwrap();
        w.detach(2).unwrap();
        assert_eq!(text(&w, &ids), ["q2", "a2"]);
        assert_eq!(window_text(&w), ["sys", "q1", "a1", "q3", "a3"]);
        assert_eq!(w.len(), 5);
        assert!(w.page_ids(2).is_none());
        assert!(w.detach(2).is_err());
        w.detach(1).unwrap();
        w.detach(3).unwrap();
        assert_eq!(window_text(&w), ["sys"]);
        // Indices are never reused.
        assert_eq!(w.open_page(&incoming(&[("user", "q4")])).unwrap(), 4);
        assert_eq!(window_text(&w), ["sys", "q4"]);
    }

    #[test]
    fn undoing_an_open_gives_its_index_again() {
        let mut w = window_of(2);
        assert!(w.undo_open(1).is_err());
        w.open_page(&incoming(&[("user", "q3")])).unwrap();
        w.undo_open(3).unwrap();
        assert_eq!(window_text(&w), ["sys", "q1", "a1", "q2", "a2"]);
        assert_eq!(w.open_page(&incoming(&[("user", "again")])).unwrap(), 3);
        w.detach(3).unwrap();
        assert!(w.undo_open(3).is_err(), "a detached page is not the newest");
    }

    #[test]
    fn joining_needs_an_open_page_and_restored_indices_only_rise() {
        let mut w = Window::default();
        assert!(w.join(&incoming(&[("assistant", "hi")])).is_err());
        w.open_page_at(7, &incoming(&[("user", "q7")])).unwrap();
        assert_eq!(w.next_index(), 8);
        assert!(w.open_page_at(7, &incoming(&[("user", "again")])).is_err());
        assert!(w.open_page(&Incoming::default()).is_err());
        assert_eq!(window_text(&w), ["q7"]);
    }

    #[test]
    fn replacing_the_system_chapter_keeps_the_pages() {
        let mut w = window_of(1);
        w.set_system(&incoming(&[("system", "new"), ("system", "tools")]));
        assert_eq!(window_text(&w), ["new", "tools", "q1", "a1"]);
        assert_eq!(w.system_len(), 2);
        w.set_system(&Incoming::default());
        assert_eq!(window_text(&w), ["q1", "a1"]);
    }

    /// The tokens of the window without its `k` oldest pages, counted afresh.
    fn recount(w: &Window, k: usize, encoding: Encoding, thinking: Thinking) -> u64 {
        let mut ids = w.system.map(|run| w.run_ids(run)).unwrap_or_default();
        for page in w.active().iter().skip(k) {
            ids.extend(w.run_ids(page.run));
        }
        let messages: Vec<_> = ids.iter().map(|&id| w.arena().message(id)).collect();
        let counts = encoding.count_message_list(&messages, thinking);
        counts.iter().sum::<u64>() + if counts.is_empty() { 0 } else { encoding.priming() }
    }

    fn assert_counts_hold(w: &mut Window) {
        for encoding in Encoding::ALL {
            for thinking in [Thinking::DropEarlier, Thinking::Count] {
                let held = w.tokens_without_oldest(encoding, thinking);
                let fresh: Vec<u64> = (0..=w.active().len())
                    .map(|k| recount(w, k, encoding, thinking))
                    .collect();
                assert_eq!(held, fresh, "{encoding:?} {thinking:?}");
            }
        }
    }

    #[test]
    fn held_counts_are_what_a_recount_gives_with_any_oldest_pages_left_out() {
        let think = |text: &str| serde_json::json!({"role": "assistant", "content": [{"type": "thinking", "thinking": text}, {"type": "text", "text": "ok"}]});
        let result = serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "42"}]});
        let mut w = Window::default();
        assert_eq!(w.tokens_without_oldest(Encoding::O200kBase, Thinking::DropEarlier), [0]);
        // A first page that opens no user turn, then pages whose thinking is earlier or current.
        w.open_page(&json_incoming_of(&[think("before any user")])).unwrap();
        assert_counts_hold(&mut w);
        w.set_system(&incoming(&[("system", "be brief")]));
        w.open_page(&json_incoming_of(&[
            serde_json::json!({"role": "user", "content": "plan a trip"}),
            think(&"Paris or Rome? ".repeat(20)),
        ]))
        .unwrap();
        w.open_page(&json_incoming_of(&[
            serde_json::json!({"role": "user", "content": "and then?"}),
            think("Rome."),
        ]))
        .unwrap();
        // Tool results in a user message continue the turn: the thinking before them is current.
        w.join(&json_incoming_of(&[result.clone(), think("done")])).unwrap();
        assert_counts_hold(&mut w);
        let all = w.tokens_without_oldest(Encoding::O200kBase, Thinking::Count);
        let dropped = w.tokens_without_oldest(Encoding::O200kBase, Thinking::DropEarlier);
        assert!(dropped[0] < all[0], "earlier thinking is left out");
        // The open page carries only tool results: once the pages that open turns are left out,
        // no turn opens and all thinking counts.
        w.open_page(&json_incoming_of(&[result])).unwrap();
        assert_counts_hold(&mut w);
        w.detach(2).unwrap();
        assert_counts_hold(&mut w);
        w.compact();
        assert_counts_hold(&mut w);
        w.set_system(&Incoming::default());
        assert_counts_hold(&mut w);
    }

    #[test]
    fn compaction_keeps_memory_bounded_by_the_window() {
        let mut w = window_of(0);
        let mut compactions = 0;
        for i in 1..=5000u64 {
            let q = format!("q{i}");
            let before = w.arena().len();
            let index = w.open_page(&incoming(&[("user", &q), ("assistant", "a")])).unwrap();
            if w.arena().len() < before {
                compactions += 1;
                let new = w.page_ids(index).unwrap();
                assert!(
                    w.ids()
                        .iter()
                        .all(|id| new.contains(id) || w.counts.get(Encoding::O200kBase, *id).is_some()),
                    "compaction carries the counts over"
                );
            }
            if w.active().len() > 3 {
                let oldest = w.active().iter().next().unwrap().index;
                w.detach(oldest).unwrap();
            }
            w.tokens_without_oldest(Encoding::O200kBase, Thinking::DropEarlier);
        }
        assert!(compactions > 0);
        assert!(
            w.arena().len() < 2 * COMPACT_MIN_GARBAGE + 16,
            "arena {}",
            w.arena().len()
        );
        assert_eq!(window_text(&w), ["sys", "q4998", "a", "q4999", "a", "q5000", "a"]);
        let ids = w.page_ids(4999).unwrap();
        assert_eq!(text(&w, &ids), ["q4999", "a"]);
        w.join(&incoming(&[("assistant", "late")])).unwrap();
        assert_eq!(text(&w, &w.page_ids(5000).unwrap()), ["q5000", "a", "late"]);
        assert_counts_hold(&mut w);
    }
}
