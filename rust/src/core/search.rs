//! Ranked full-text search over pages: an inverted index scored with BM25, and snippets.
//!
//! Each page is one document (its text, tokenized by [`crate::core::search_terms`], words stemmed
//! by [`crate::core::stem`]). A query's distinct terms (its stop words left out when it holds any
//! other word) are scored with Okapi BM25 (k1 = 1.2, b = 0.75) and Lucene's non-negative idf:
//!
//! ```text
//! idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
//! score(d, q) = sum over distinct t in q, in query order, of
//!               idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * len(d) / avglen))
//! ```
//!
//! where `N` is the number of pages, `len(d)` the number of tokens of `d` (CJK unigrams and bigrams
//! included) and `avglen` their mean. Pages matching no query term are not hits. Ties go to the
//! lower page index.
//!
//! Neighbour context (a weight `w`, 0 to below 1; 0, none, by default): pages that follow one
//! another in a conversation share a topic, so a page scores at least `w` times the better of its
//! neighbours' (page index - 1 and + 1) own scores:
//!
//! ```text
//! score'(d, q) = max(score(d, q), w * score(d - 1, q), w * score(d + 1, q))
//! ```
//!
//! A neighbour of a hit becomes a hit itself (a page that matched no term), and no page passes a
//! page whose own score is higher than its own best: the best page stays first.
//!
//! Adding a page that is already there replaces it: the old document is marked dead (its terms'
//! document frequencies are taken back at once) and its postings are dropped by the next
//! compaction, which runs when dead documents outnumber live ones.

use std::borrow::Cow;
use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use rayon::prelude::*;

use crate::core::search_terms::{is_cjk, is_stop_word, stemmed, tokenize};

type FxMap<K, V> = HashMap<K, V, FxBuildHasher>;
/// The query's distinct known terms: their order in the query and their idf.
type Weights<'q> = HashMap<Cow<'q, str>, (usize, f64)>;

pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;
/// Compaction waits for at least this many dead documents (and more dead than live).
const COMPACT_MIN_DEAD: usize = 64;

/// One result: the page, its score (BM25, with neighbour context when the index has it) and a
/// snippet around its best match.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub page: u64,
    pub score: f64,
    pub snippet: String,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    slot: u32,
    tf: u32,
}

#[derive(Debug)]
struct Doc {
    page: u64,
    text: Box<str>,
    len: u32,
    live: bool,
}

/// A CJK token (one or two characters) as an integer: hashed and compared without touching bytes.
/// CJK tokens are most of the tokens of CJK text (two per character), so this matters.
fn cjk_key(term: &str) -> Option<u64> {
    let mut chars = term.chars();
    let first = chars.next().filter(|&c| is_cjk(c))?;
    let second = chars.next().map_or(0, u64::from);
    Some(u64::from(first) << 32 | second)
}

/// A term of an analyzed page: a CJK token, a span of its text (most words: no allocation), or a
/// lowercased word that differs from the text.
#[derive(Debug)]
enum Term {
    Cjk(u64),
    Span(u32, u32),
    Owned(Box<str>),
}

/// A page's text with its term counts, computed apart from the index (so that many pages can be
/// tokenized in parallel before they are inserted).
#[derive(Debug)]
pub struct Analyzed {
    page: u64,
    text: Box<str>,
    counts: Vec<(Term, u32)>,
    len: u32,
}

/// A word's count in a text, and the byte span of its first occurrence.
type FirstSeen = (u32, u32, u32);

/// The distinct terms of a text with their counts: words, stemmed (borrowed where they are spans of
/// the text, with the span of their first occurrence), and CJK tokens by [`cjk_key`].
#[derive(Default)]
struct TermCounts<'t> {
    words: FxMap<Cow<'t, str>, FirstSeen>,
    cjk: FxMap<u64, u32>,
    len: u32,
}

fn term_counts(text: &str) -> TermCounts<'_> {
    let mut counts = TermCounts::default();
    counts.words.reserve(text.len() / 32);
    tokenize(text, |term, s, e| {
        counts.len = counts.len.saturating_add(1);
        if let Some(key) = cjk_key(&term) {
            *counts.cjk.entry(key).or_insert(0) += 1;
        } else if let Some(c) = counts.words.get_mut(term.as_ref()) {
            c.0 += 1;
        } else {
            counts.words.insert(term, (1, s as u32, e as u32));
        }
    });
    counts.words = by_stem(counts.words);
    counts
}

/// Word counts merged by stem: each distinct word is stemmed once (a stem differing from the word
/// is owned), and the forms of one stem add up.
fn by_stem(words: FxMap<Cow<'_, str>, FirstSeen>) -> FxMap<Cow<'_, str>, FirstSeen> {
    let mut out: FxMap<Cow<'_, str>, FirstSeen> = FxMap::with_capacity_and_hasher(words.len(), FxBuildHasher);
    for (word, (tf, s, e)) in words {
        out.entry(stemmed(word)).and_modify(|c| c.0 += tf).or_insert((tf, s, e));
    }
    out
}

pub fn analyze(page: u64, text: String) -> Analyzed {
    let TermCounts { words, cjk, len } = term_counts(&text);
    let mut counts: Vec<(Term, u32)> = Vec::with_capacity(words.len() + cjk.len());
    counts.extend(words.into_iter().map(|(term, (tf, s, e))| match term {
        Cow::Borrowed(_) => (Term::Span(s, e), tf),
        Cow::Owned(t) => (Term::Owned(t.into_boxed_str()), tf),
    }));
    counts.extend(cjk.into_iter().map(|(key, tf)| (Term::Cjk(key), tf)));
    Analyzed {
        page,
        text: text.into_boxed_str(),
        counts,
        len,
    }
}

/// Term ids by term: words by their text, CJK tokens by [`cjk_key`].
#[derive(Debug, Default)]
struct Vocabulary {
    words: FxMap<Box<str>, u32>,
    cjk: FxMap<u64, u32>,
}

impl Vocabulary {
    fn get(&self, term: &str) -> Option<u32> {
        match cjk_key(term) {
            Some(key) => self.cjk.get(&key).copied(),
            None => self.words.get(term).copied(),
        }
    }

    /// The id of `term` of `a`, made `next` if it is new (then `true`).
    fn intern(&mut self, a: &Analyzed, term: &Term, next: u32) -> (u32, bool) {
        let slot = match term {
            Term::Cjk(key) => self.cjk.entry(*key).or_insert(next),
            Term::Span(s, e) => self.word(&a.text[*s as usize..*e as usize], next),
            Term::Owned(t) => self.word(t, next),
        };
        (*slot, *slot == next)
    }

    fn word(&mut self, word: &str, next: u32) -> &mut u32 {
        if !self.words.contains_key(word) {
            self.words.insert(word.into(), next);
        }
        self.words.get_mut(word).expect("just inserted")
    }

    /// Keep the terms `keep` says yes to, renumbered by `renumber` (old id to new id).
    fn retain_renumbered(&mut self, mut keep: impl FnMut(u32) -> bool, mut renumber: impl FnMut(u32) -> u32) {
        self.words.retain(|_, id| keep(*id));
        self.cjk.retain(|_, id| keep(*id));
        for id in self.words.values_mut().chain(self.cjk.values_mut()) {
            *id = renumber(*id);
        }
    }
}

/// The inverted index. Not synchronised: the binding puts it behind a lock.
#[derive(Debug, Default)]
pub struct SearchIndex {
    terms: Vocabulary,
    postings: Vec<Vec<Posting>>,
    /// Live documents holding each term.
    df: Vec<u32>,
    docs: Vec<Doc>,
    /// Page index to the slot of its live document.
    slots: FxMap<u64, u32>,
    total_len: u64,
    dead: usize,
    /// The neighbour context's weight, in [0, 1).
    neighbour_weight: f64,
}

impl SearchIndex {
    /// An empty index whose pages score at least `neighbour_weight` times their better neighbour's
    /// own score (0: plain BM25). `neighbour_weight` is in [0, 1); anything else is a bug.
    pub fn with_neighbour_weight(neighbour_weight: f64) -> Self {
        assert!(
            (0.0..1.0).contains(&neighbour_weight),
            "neighbour weight {neighbour_weight} is not in [0, 1)"
        );
        Self {
            neighbour_weight,
            ..Self::default()
        }
    }

    /// The neighbour context's weight (0: none).
    pub fn neighbour_weight(&self) -> f64 {
        self.neighbour_weight
    }

    /// The number of pages indexed.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Index `text` as page `page`, replacing what that page held. O(tokens of the text).
    pub fn add(&mut self, page: u64, text: String) {
        self.insert(analyze(page, text));
        self.compact_if_worth_it();
    }

    /// Index many pages (later ones replace earlier ones with the same index); tokenizes in
    /// parallel, then inserts in order.
    pub fn add_many(&mut self, items: Vec<(u64, String)>) {
        let analyzed: Vec<Analyzed> = items.into_par_iter().map(|(p, t)| analyze(p, t)).collect();
        for a in analyzed {
            self.insert(a);
        }
        self.compact_if_worth_it();
    }

    fn insert(&mut self, a: Analyzed) {
        if let Some(&old) = self.slots.get(&a.page) {
            self.retire(old);
        }
        let slot = u32::try_from(self.docs.len()).expect("fewer than 2^32 documents");
        for (term, tf) in &a.counts {
            let next = u32::try_from(self.postings.len()).expect("fewer than 2^32 terms");
            let (id, new) = self.terms.intern(&a, term, next);
            if new {
                self.postings.push(Vec::new());
                self.df.push(0);
            }
            let tf = *tf;
            self.postings[id as usize].push(Posting { slot, tf });
            self.df[id as usize] += 1;
        }
        self.total_len += u64::from(a.len);
        self.docs.push(Doc {
            page: a.page,
            text: a.text,
            len: a.len,
            live: true,
        });
        self.slots.insert(a.page, slot);
    }

    /// Mark a document dead: its terms no longer count, its postings are skipped until compaction.
    fn retire(&mut self, slot: u32) {
        let doc = &mut self.docs[slot as usize];
        doc.live = false;
        self.total_len -= u64::from(doc.len);
        let text = std::mem::take(&mut doc.text);
        let counts = term_counts(&text);
        let ids = counts.words.keys().filter_map(|w| self.terms.get(w));
        let ids: Vec<u32> = ids
            .chain(counts.cjk.keys().filter_map(|k| self.terms.cjk.get(k).copied()))
            .collect();
        for id in ids {
            self.df[id as usize] -= 1;
        }
        self.dead += 1;
    }

    fn compact_if_worth_it(&mut self) {
        if self.dead >= COMPACT_MIN_DEAD && self.dead > self.slots.len() {
            self.compact();
        }
    }

    /// Drop dead documents and the terms only they held, renumbering slots and term ids.
    fn compact(&mut self) {
        let mut new_slot = vec![u32::MAX; self.docs.len()];
        let mut docs = Vec::with_capacity(self.slots.len());
        for (old, doc) in std::mem::take(&mut self.docs).into_iter().enumerate() {
            if doc.live {
                let slot = docs.len() as u32;
                new_slot[old] = slot;
                self.slots.insert(doc.page, slot);
                docs.push(doc);
            }
        }
        self.docs = docs;
        let mut old_postings = std::mem::take(&mut self.postings);
        let old_df = std::mem::take(&mut self.df);
        let (postings, df) = (&mut self.postings, &mut self.df);
        self.terms.retain_renumbered(
            |id| old_df[id as usize] > 0,
            |id| {
                let mut list = std::mem::take(&mut old_postings[id as usize]);
                list.retain_mut(|p| {
                    p.slot = new_slot[p.slot as usize];
                    p.slot != u32::MAX
                });
                debug_assert_eq!(list.len(), old_df[id as usize] as usize);
                df.push(old_df[id as usize]);
                postings.push(list);
                (postings.len() - 1) as u32
            },
        );
        self.dead = 0;
    }

    /// The `k` best pages for `query`, best first, each with a snippet of at most about
    /// `snippet_chars` characters. O(postings of the query's terms + k log k).
    pub fn search(&self, query: &str, k: usize, snippet_chars: usize) -> Vec<Hit> {
        let weights = self.query_weights(query);
        self.rank(&weights, k)
            .into_iter()
            .map(|(score, page, slot)| Hit {
                page,
                score,
                snippet: snippet(&self.docs[slot as usize].text, &weights, snippet_chars),
            })
            .collect()
    }

    /// The `k` best pages for `query` and their BM25 scores, best first, without snippets (what
    /// hybrid ranking fuses). O(postings of the query's terms + k log k).
    pub fn scores(&self, query: &str, k: usize) -> Vec<(u64, f64)> {
        let weights = self.query_weights(query);
        self.rank(&weights, k)
            .into_iter()
            .map(|(score, page, _)| (page, score))
            .collect()
    }

    /// The snippet [`search`](Self::search) would show for `page` and `query` (the start of the
    /// page when no query term is in it), or None if `page` is not indexed.
    pub fn snippet_of(&self, page: u64, query: &str, snippet_chars: usize) -> Option<String> {
        let slot = *self.slots.get(&page)?;
        Some(snippet(
            &self.docs[slot as usize].text,
            &self.query_weights(query),
            snippet_chars,
        ))
    }

    /// The query's distinct known terms, in query order, with their idf.
    fn query_weights<'q>(&self, query: &'q str) -> Weights<'q> {
        let mut weights: Weights<'q> = HashMap::new();
        let n = self.slots.len() as f64;
        let mut tokens = Vec::new();
        tokenize(query, |term, _, _| tokens.push(term));
        // A query's stop words are left out when it has other words.
        let content = tokens.iter().any(|t| !is_stop_word(t));
        for term in tokens {
            if content && is_stop_word(&term) {
                continue;
            }
            let term = stemmed(term);
            if weights.contains_key(term.as_ref()) {
                continue;
            }
            if let Some(id) = self.terms.get(&term) {
                let df = f64::from(self.df[id as usize]);
                if df > 0.0 {
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    weights.insert(term, (weights.len(), idf));
                }
            }
        }
        weights
    }

    /// The `k` best (score, page, slot) for the query terms `weights`, best first.
    fn rank(&self, weights: &Weights<'_>, k: usize) -> Vec<(f64, u64, u32)> {
        let live = self.slots.len();
        if k == 0 || live == 0 {
            return Vec::new();
        }
        let avglen = self.total_len as f64 / live as f64;
        let mut ids: Vec<(usize, u32, f64)> = weights
            .iter()
            .filter_map(|(term, &(order, idf))| self.terms.get(term).map(|id| (order, id, idf)))
            .collect();
        // Query order: the sum is then the same floating-point sum whatever the map's order.
        ids.sort_unstable_by_key(|&(order, _, _)| order);
        let mut scores = vec![0.0f64; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for &(_, id, idf) in &ids {
            for p in &self.postings[id as usize] {
                let doc = &self.docs[p.slot as usize];
                if !doc.live {
                    continue;
                }
                let tf = f64::from(p.tf);
                let norm = K1 * (1.0 - B + B * f64::from(doc.len) / avglen);
                let score = &mut scores[p.slot as usize];
                if *score == 0.0 {
                    touched.push(p.slot);
                }
                *score += idf * (tf * (K1 + 1.0)) / (tf + norm);
            }
        }
        if self.neighbour_weight > 0.0 {
            self.add_neighbour_context(&mut scores, &mut touched, k);
        }
        let mut ranked: Vec<(f64, u64, u32)> = touched
            .into_iter()
            .map(|s| (scores[s as usize], self.docs[s as usize].page, s))
            .collect();
        let order = |a: &(f64, u64, u32), b: &(f64, u64, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, order);
            ranked.truncate(k);
        }
        ranked.sort_unstable_by(order);
        ranked
    }

    /// Raise each page next to a page in `touched` (by page index) to `neighbour_weight` times that
    /// page's own score where that is more, adding it to `touched` if it was not there, as far as
    /// the top `k` (k >= 1) can tell. Every raise reads the own scores, taken first, so context
    /// never chains. O(touched).
    fn add_neighbour_context(&self, scores: &mut [f64], touched: &mut Vec<u32>, k: usize) {
        let weight = self.neighbour_weight;
        // k pages score at least the k-th best own score whatever context adds, so a page raised
        // to less cannot be in the top k: only the hits that lend at least that much need lending.
        let floor = if touched.len() > k {
            let mut own: Vec<f64> = touched.iter().map(|&slot| scores[slot as usize]).collect();
            *own.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
        } else {
            0.0
        };
        let lenders: Vec<(u32, f64)> = touched
            .iter()
            .map(|&slot| (slot, weight * scores[slot as usize]))
            .filter(|&(_, inherited)| inherited >= floor)
            .collect();
        for (slot, inherited) in lenders {
            let page = self.docs[slot as usize].page;
            let neighbours = [
                page.checked_sub(1).and_then(|p| self.slot_near(p, slot.checked_sub(1))),
                page.checked_add(1).and_then(|p| self.slot_near(p, slot.checked_add(1))),
            ];
            for neighbour in neighbours.into_iter().flatten() {
                let current = &mut scores[neighbour as usize];
                if *current == 0.0 {
                    touched.push(neighbour);
                }
                if inherited > *current {
                    *current = inherited;
                }
            }
        }
    }

    /// The slot of live page `page`, looked for first in slot `near`: pages indexed in order
    /// (a conversation's archive) sit in consecutive slots, so most lookups need no hashing.
    fn slot_near(&self, page: u64, near: Option<u32>) -> Option<u32> {
        match near.and_then(|s| self.docs.get(s as usize).map(|doc| (s, doc))) {
            Some((s, doc)) if doc.live && doc.page == page => Some(s),
            _ => self.slots.get(&page).copied(),
        }
    }
}

/// About `width` characters of `text` around its best match: the window holding the greatest
/// total idf of distinct query terms (the earliest such window), with some context before it,
/// cut on character boundaries (never inside a word when a word boundary is near), whitespace
/// runs collapsed to one space, and "…" where text was cut off.
fn snippet(text: &str, weights: &Weights<'_>, width: usize) -> String {
    let width = width.max(1);
    let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let nchars = starts.len();
    let char_at = |byte: usize| starts.partition_point(|&b| b < byte);
    // Matches as (start char, end char, query term), sorted by start then end (ends then never
    // decrease: only a CJK unigram and the bigram starting with it share a start).
    let mut matches: Vec<(usize, usize, usize)> = Vec::new();
    // A stem keeps its word's first letter, so only words starting like a query term are stemmed,
    // not every word of the page.
    let mut starts_a_term = [false; 256];
    for term in weights.keys() {
        if let Some(&b) = term.as_bytes().first() {
            starts_a_term[usize::from(b)] = true;
        }
    }
    tokenize(text, |term, s, e| {
        let Some(&b) = term.as_bytes().first() else { return };
        if !starts_a_term[usize::from(b)] {
            return;
        }
        if let Some(&(t, _)) = weights.get(stemmed(term).as_ref()) {
            matches.push((char_at(s), char_at(e), t));
        }
    });
    matches.sort_unstable();
    let (first, last) = best_window(&matches, weights, width).unwrap_or((0, 0));
    let free = width.saturating_sub(last - first);
    let mut start = first - (free / 4).min(first);
    let end = (start + width).min(nchars);
    if end - start < width {
        start = end.saturating_sub(width);
    }
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_alphanumeric() && !is_cjk(c);
    let inside_word = |at: usize| at > 0 && at < nchars && word(chars[at - 1]) && word(chars[at]);
    let mut cut_start = start;
    while inside_word(cut_start) && cut_start < first {
        cut_start += 1;
    }
    let mut cut_end = end;
    while inside_word(cut_end) && cut_end > last.max(cut_start + 1) {
        cut_end -= 1;
    }
    let byte = |c: usize| if c < nchars { starts[c] } else { text.len() };
    let body = text[byte(cut_start)..byte(cut_end)]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::with_capacity(body.len() + 6);
    if cut_start > 0 {
        out.push('…');
    }
    out.push_str(&body);
    if cut_end < nchars {
        out.push('…');
    }
    out
}

/// The (first char, end char) of the run of matches of highest total idf (distinct terms) that
/// fits in `width` characters (a single longer match is a run by itself); the earliest on ties.
/// `matches` are sorted, so their ends never decrease and a run's end is its last match's end.
/// O(matches). None without matches.
fn best_window(matches: &[(usize, usize, usize)], weights: &Weights<'_>, width: usize) -> Option<(usize, usize)> {
    let mut idf = vec![0.0; weights.len()];
    for &(t, w) in weights.values() {
        idf[t] = w;
    }
    let mut counts = vec![0u32; weights.len()];
    let mut best: Option<(f64, usize, usize)> = None;
    let mut j = 0;
    for i in 0..matches.len() {
        let limit = matches[i].0 + width;
        while j < matches.len() && (j == i || matches[j].1 <= limit) {
            counts[matches[j].2] += 1;
            j += 1;
        }
        // Summed afresh (a handful of query terms) so equal windows score exactly equal.
        let score: f64 = counts.iter().zip(&idf).filter(|(c, _)| **c > 0).map(|(_, w)| w).sum();
        if best.is_none_or(|(b, _, _)| score > b) {
            best = Some((score, matches[i].0, matches[j - 1].1));
        }
        counts[matches[i].2] -= 1;
    }
    best.map(|(_, s, e)| (s, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(texts: &[(u64, &str)]) -> SearchIndex {
        let mut ix = SearchIndex::default();
        for &(page, text) in texts {
            ix.add(page, text.to_owned());
        }
        ix
    }

    fn pages(hits: &[Hit]) -> Vec<u64> {
        hits.iter().map(|h| h.page).collect()
    }

    #[test]
    fn scores_follow_the_bm25_formula() {
        let ix = index(&[(1, "apple banana"), (2, "apple apple cherry cherry"), (3, "banana")]);
        let hits = ix.search("apple", 10, 80);
        assert_eq!(pages(&hits), [2, 1]);
        let (n, df, avglen) = (3.0f64, 2.0f64, 7.0f64 / 3.0);
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let score = |tf: f64, len: f64| idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * len / avglen));
        assert_eq!(hits[0].score, score(2.0, 4.0));
        assert_eq!(hits[1].score, score(1.0, 2.0));
    }

    #[test]
    fn ties_go_to_the_lower_page_and_k_cuts() {
        let ix = index(&[(9, "same words"), (4, "same words"), (7, "same words"), (1, "other")]);
        assert_eq!(pages(&ix.search("same", 10, 80)), [4, 7, 9]);
        assert_eq!(pages(&ix.search("same", 2, 80)), [4, 7]);
        assert!(ix.search("same", 0, 80).is_empty());
        assert!(ix.search("absent", 5, 80).is_empty());
        assert!(ix.search("... ", 5, 80).is_empty());
        assert!(SearchIndex::default().search("same", 5, 80).is_empty());
    }

    fn with_context(weight: f64, texts: &[(u64, &str)]) -> SearchIndex {
        let mut ix = SearchIndex::with_neighbour_weight(weight);
        ix.add_many(texts.iter().map(|&(p, t)| (p, t.to_owned())).collect());
        ix
    }

    #[test]
    fn a_neighbour_of_a_hit_scores_the_weight_of_its_score() {
        let texts = [
            (1, "tea"),
            (2, "we planned the trip"),
            (3, "it was sunny"),
            (5, "coffee"),
        ];
        let plain = index(&texts).search("trip", 5, 80);
        let ix = with_context(0.7, &texts);
        let hits = ix.search("trip", 5, 80);
        assert_eq!(
            pages(&hits),
            [2, 1, 3],
            "both neighbours, ties to the lower page; 5 is no neighbour"
        );
        assert_eq!(hits[0].score, plain[0].score, "the hit keeps its own score");
        assert_eq!(hits[1].score, 0.7 * plain[0].score);
        assert_eq!(hits[2].score, 0.7 * plain[0].score);
        assert_eq!(hits[1].snippet, "tea", "a page matching no term shows its start");
    }

    #[test]
    fn a_page_keeps_its_own_score_when_it_is_higher_and_context_never_chains() {
        let texts = [(1, "rain rain rain rain"), (2, "rain"), (3, "sun"), (4, "cloud")];
        let plain = index(&texts).search("rain", 5, 80);
        let own = |page: u64| plain.iter().find(|h| h.page == page).map_or(0.0, |h| h.score);
        let hits = with_context(0.9, &texts).search("rain", 5, 80);
        let score = |page: u64| hits.iter().find(|h| h.page == page).map(|h| h.score);
        assert_eq!(score(1), Some(own(1)));
        assert_eq!(score(2), Some(own(2).max(0.9 * own(1))));
        assert_eq!(
            score(3),
            Some(0.9 * own(2)),
            "from page 2's own score, not its raised one"
        );
        assert_eq!(score(4), None, "two pages away from any hit");
    }

    #[test]
    fn with_context_the_best_page_stays_first_and_dead_pages_give_none() {
        let texts: Vec<(u64, String)> = (1..=60u64)
            .map(|p| (p, format!("word{} filler{}", p % 7, p % 3)))
            .collect();
        let borrowed: Vec<(u64, &str)> = texts.iter().map(|(p, t)| (*p, t.as_str())).collect();
        let plain = index(&borrowed);
        let mut ix = with_context(0.99, &borrowed);
        for query in ["word3", "word1 filler2", "filler0 word6 word5"] {
            assert_eq!(ix.search(query, 1, 80), plain.search(query, 1, 80), "{query}");
        }
        ix.add(20, "something else".to_owned());
        let found = pages(&ix.search("word6", 100, 80));
        assert!(found.contains(&5) && found.contains(&6) && found.contains(&7));
        for page in [19, 20, 21] {
            assert!(
                !found.contains(&page),
                "page 20's replaced text (word6) lends page {page} nothing"
            );
        }
    }

    #[test]
    #[should_panic(expected = "not in [0, 1)")]
    fn a_neighbour_weight_of_1_is_a_bug() {
        let _ = SearchIndex::with_neighbour_weight(1.0);
    }

    #[test]
    fn re_adding_a_page_replaces_it() {
        let mut ix = index(&[(1, "old text"), (2, "old text too")]);
        ix.add(1, "new words".to_owned());
        assert_eq!(ix.len(), 2);
        assert_eq!(pages(&ix.search("old", 5, 80)), [2]);
        assert_eq!(pages(&ix.search("new", 5, 80)), [1]);
        let fresh = index(&[(2, "old text too"), (1, "new words")]);
        assert_eq!(ix.search("old text new", 5, 80), fresh.search("old text new", 5, 80));
    }

    #[test]
    fn compaction_keeps_every_result() {
        let mut ix = SearchIndex::default();
        for round in 0..5u64 {
            for page in 1..=100u64 {
                ix.add(page, format!("page{page} round{round} common"));
            }
        }
        assert!(ix.dead < ix.slots.len(), "compacted");
        assert_eq!(ix.terms.words.len() + ix.terms.cjk.len(), ix.postings.len());
        assert_eq!(pages(&ix.search("round4 page7", 1, 80)), [7]);
        assert!(ix.search("round0", 5, 80).is_empty());
        assert_eq!(ix.search("common", 200, 80).len(), 100);
        let mut batch = SearchIndex::default();
        batch.add_many((1..=100u64).map(|p| (p, format!("page{p} round4 common"))).collect());
        assert_eq!(ix.search("common page3", 10, 80), batch.search("common page3", 10, 80));
    }

    #[test]
    fn word_forms_meet_at_their_stem_and_stop_words_are_left_out() {
        let ix = index(&[
            (1, "We baked sourdough bread"),
            (2, "the of what is"),
            (3, "Baking bakes"),
        ]);
        let mut found = pages(&ix.search("baking", 5, 80));
        found.sort_unstable();
        assert_eq!(found, [1, 3]);
        assert_eq!(
            pages(&ix.search("what is the bread", 5, 80)),
            [1],
            "stop words left out"
        );
        assert_eq!(
            pages(&ix.search("what is the", 5, 80)),
            [2],
            "a query of stop words alone keeps them"
        );
        let hit = &ix.search("bake", 1, 80)[0];
        assert_eq!(hit.page, 3, "two forms of the stem");
        assert!(hit.snippet.contains("Baking"), "{}", hit.snippet);
    }

    #[test]
    fn cjk_queries_match_bigrams() {
        let ix = index(&[(1, "我们讨论数据库索引"), (2, "数字和据点"), (3, "database index")]);
        let hits = ix.search("数据库", 5, 80);
        assert_eq!(pages(&hits), [1, 2]);
        assert!(hits[0].score > hits[1].score);
        assert_eq!(pages(&ix.search("DATABASE", 5, 80)), [3]);
    }

    #[test]
    fn snippets_center_on_the_best_match_and_cut_on_boundaries() {
        let filler = "lorem ipsum dolor sit amet ".repeat(20);
        let text = format!("{filler}the needle is here {filler}");
        let ix = index(&[(1, &text)]);
        let hit = &ix.search("needle", 1, 40)[0];
        assert!(
            hit.snippet.starts_with('…') && hit.snippet.ends_with('…'),
            "{}",
            hit.snippet
        );
        assert!(hit.snippet.contains("needle"));
        let body = hit.snippet.trim_matches('…');
        assert!(text.contains(body), "{body}");
        assert!(body.chars().count() <= 40);
        for word in body.split(' ') {
            assert!(
                ["lorem", "ipsum", "dolor", "sit", "amet", "the", "needle", "is", "here"].contains(&word),
                "{word}"
            );
        }
        let zh = format!("{}东京天气{}", "很长的文字".repeat(30), "后面".repeat(30));
        let ix = index(&[(1, &zh)]);
        let hit = &ix.search("东京", 1, 20)[0];
        assert!(hit.snippet.contains("东京"));
        assert!(zh.contains(hit.snippet.trim_matches('…')));
    }

    #[test]
    fn the_snippet_prefers_the_window_with_more_query_terms() {
        let text = format!("alpha {} alpha beta gamma {}", "x ".repeat(200), "y ".repeat(200));
        let ix = index(&[(1, &text)]);
        let hit = &ix.search("alpha beta gamma", 1, 30)[0];
        assert!(hit.snippet.contains("alpha beta gamma"), "{}", hit.snippet);
        let short = index(&[(1, "short   text\n with  spaces")]);
        assert_eq!(short.search("text", 1, 160)[0].snippet, "short text with spaces");
    }
}
