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
//! The arena never frees a node, so detached runs become garbage; when garbage outweighs what
//! the window still holds, the next page opened compacts the arena (copies the live nodes into a
//! fresh one, O(live)), keeping memory bounded by the window, not by the conversation.

use std::collections::VecDeque;

use crate::core::arena::{Arena, Chain, NIL, NodeId};
use crate::core::error::{Error, Result};
use crate::core::store::{Incoming, now};

/// Page indices start at 1 and rise by one per page; they are never reused.
pub type PageIndex = u64;

/// A contiguous run `head..=tail` of `len` nodes in the shared chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub head: NodeId,
    pub tail: NodeId,
    pub len: usize,
}

/// One user interaction: a view over the run of its entries (one entry per node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub index: PageIndex,
    pub run: Run,
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
}

impl Default for Window {
    fn default() -> Self {
        Self {
            arena: Arena::default(),
            chain: Chain::default(),
            system: None,
            active: Chapter::default(),
            next_index: 1,
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
        self.active.pages.push_back(Page { index, run });
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
        let copy = |run: Run, arena: &mut Arena, chain: &mut Chain| -> Run {
            let mut new = Run {
                head: NIL,
                tail: NIL,
                len: run.len,
            };
            for id in self.run_ids(run) {
                let node = self.arena.node(id);
                let copied = arena.push(self.arena.message(id).bytes(), node.role, node.timestamp);
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
                index: p.index,
                run: copy(p.run, &mut arena, &mut chain),
            })
            .collect();
        self.arena = arena;
        self.chain = chain;
        self.system = system;
        self.active.pages = pages;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::incoming_of;
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

    #[test]
    fn compaction_keeps_memory_bounded_by_the_window() {
        let mut w = window_of(0);
        for i in 1..=5000u64 {
            let q = format!("q{i}");
            w.open_page(&incoming(&[("user", &q), ("assistant", "a")])).unwrap();
            if w.active().len() > 3 {
                let oldest = w.active().iter().next().unwrap().index;
                w.detach(oldest).unwrap();
            }
        }
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
    }
}
