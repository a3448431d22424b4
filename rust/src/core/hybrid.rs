//! Hybrid ranking: page vectors scored by cosine similarity, fused with BM25.
//!
//! [`VectorIndex`] keeps one unit-length `f32` vector per page in one flat matrix, so scoring a
//! query is one pass of dot products over contiguous memory. [`fuse`] merges two ranked lists
//! (BM25's and cosine's) by one of two rules:
//!
//! - reciprocal-rank fusion: `score(d) = w / (c + rank_dense(d)) + (1 - w) / (c + rank_bm25(d))`
//!   with ranks from 1 and `c` = [`RRF_C`], a list that lacks `d` adding nothing;
//! - a convex combination of normalised scores: `score(d) = w * dense(d) + (1 - w) * bm25(d)`, each
//!   list's scores min-max normalised to `[0, 1]` over the list (a list that lacks `d`: 0; a list
//!   whose scores are all equal: 1 for each of its pages).
//!
//! `w` is the weight of the dense side. Ties go to the lower page index.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

type FxMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// The constant of reciprocal-rank fusion (Cormack et al., 2009).
pub const RRF_C: f64 = 60.0;

/// How two ranked lists are fused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal-rank fusion, `w` the dense side's weight.
    Rrf(f64),
    /// A convex combination of min-max normalised scores, `w` the dense side's weight.
    Convex(f64),
}

/// Why a vector was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorError {
    /// The vector's length is not the index's dimension.
    Dimension { expected: usize, got: usize },
    /// A component is NaN or infinite (its position).
    NotFinite(usize),
    /// A vector of length 0.
    Empty,
}

impl std::fmt::Display for VectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dimension { expected, got } => write!(f, "has {got} dimensions, expected {expected}"),
            Self::NotFinite(i) => write!(f, "has a NaN or infinite value at [{i}]"),
            Self::Empty => write!(f, "is empty"),
        }
    }
}

/// Unit-length page vectors of one dimension, by page. Not synchronised: the binding locks it.
#[derive(Debug, Default)]
pub struct VectorIndex {
    dim: usize,
    /// Row `r` is `matrix[r * dim..(r + 1) * dim]`.
    matrix: Vec<f32>,
    pages: Vec<u64>,
    rows: FxMap<u64, usize>,
}

impl VectorIndex {
    /// The number of pages with a vector.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The dimension (0 until the first vector fixes it).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether `page` has a vector.
    pub fn contains(&self, page: u64) -> bool {
        self.rows.contains_key(&page)
    }

    /// Check `vector` against the index's dimension (any, while it has none). O(dim).
    pub fn check(&self, vector: &[f32]) -> Result<(), VectorError> {
        if vector.is_empty() {
            return Err(VectorError::Empty);
        }
        if self.dim != 0 && vector.len() != self.dim {
            return Err(VectorError::Dimension {
                expected: self.dim,
                got: vector.len(),
            });
        }
        match vector.iter().position(|x| !x.is_finite()) {
            Some(i) => Err(VectorError::NotFinite(i)),
            None => Ok(()),
        }
    }

    /// Add `items` (page, vector), replacing a page's earlier vector; all or nothing: every
    /// vector is checked first (all of one dimension). Vectors are stored normalised (a zero
    /// vector stays zero: similar to nothing). O(total size).
    pub fn add_many(&mut self, items: Vec<(u64, Vec<f32>)>) -> Result<(), (usize, VectorError)> {
        let mut probe = Self {
            dim: self.dim,
            ..Self::default()
        };
        for (i, (_, vector)) in items.iter().enumerate() {
            probe.check(vector).map_err(|e| (i, e))?;
            probe.dim = vector.len();
        }
        self.dim = probe.dim;
        for (page, mut vector) in items {
            let norm = vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
            if norm > 0.0 {
                #[allow(clippy::cast_possible_truncation)] // a norm of finite f32s is a finite f32
                let scale = (1.0 / norm) as f32;
                for x in &mut vector {
                    *x *= scale;
                }
            }
            if let Some(&row) = self.rows.get(&page) {
                self.matrix[row * self.dim..(row + 1) * self.dim].copy_from_slice(&vector);
            } else {
                self.rows.insert(page, self.pages.len());
                self.pages.push(page);
                self.matrix.extend_from_slice(&vector);
            }
        }
        Ok(())
    }

    /// The `k` pages most similar to `query` by cosine similarity, best first (ties: lower page).
    /// O(pages * dim + k log k).
    pub fn nearest(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f64)>, VectorError> {
        self.check(query)?;
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        let mut scored: Vec<(u64, f64)> = self
            .matrix
            .chunks_exact(self.dim)
            .zip(&self.pages)
            .map(|(row, &page)| (page, f64::from(dot(row, query) * scale)))
            .collect();
        Ok(top(scored.as_mut_slice(), k).to_vec())
    }
}

/// The dot product, in eight lanes so the compiler vectorises it (a plain fold is a serial chain
/// of dependent adds: about 4x slower at 384 dimensions).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Best first, ties to the lower page.
fn order(a: &(u64, f64), b: &(u64, f64)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The `k` best of `scored`, sorted best first. O(n + k log k).
fn top(scored: &mut [(u64, f64)], k: usize) -> &[(u64, f64)] {
    let k = k.min(scored.len());
    if k == 0 {
        return &[];
    }
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, order);
    }
    let best = &mut scored[..k];
    best.sort_unstable_by(order);
    best
}

/// Min-max normalised scores of a ranked list (all 1 when they are all equal).
fn normalised(list: &[(u64, f64)]) -> impl Iterator<Item = (u64, f64)> + '_ {
    let (lo, hi) = list
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, s)| {
            (lo.min(s), hi.max(s))
        });
    let span = hi - lo;
    list.iter()
        .map(move |&(page, s)| (page, if span > 0.0 { (s - lo) / span } else { 1.0 }))
}

/// The `k` best pages of `lexical` (BM25, best first) and `dense` (cosine, best first) fused by
/// `fusion`, best first, ties to the lower page. O((|lexical| + |dense|) + k log k).
pub fn fuse(lexical: &[(u64, f64)], dense: &[(u64, f64)], fusion: Fusion, k: usize) -> Vec<(u64, f64)> {
    let mut fused: FxMap<u64, f64> = HashMap::with_capacity_and_hasher(lexical.len() + dense.len(), FxBuildHasher);
    let mut add = |page: u64, score: f64| *fused.entry(page).or_insert(0.0) += score;
    match fusion {
        Fusion::Rrf(w) => {
            // Ranks are small integers: exact as f64.
            #[allow(clippy::cast_precision_loss)]
            let rrf = |rank: usize| 1.0 / (RRF_C + (rank + 1) as f64);
            for (rank, &(page, _)) in dense.iter().enumerate() {
                add(page, w * rrf(rank));
            }
            for (rank, &(page, _)) in lexical.iter().enumerate() {
                add(page, (1.0 - w) * rrf(rank));
            }
        }
        Fusion::Convex(w) => {
            for (page, s) in normalised(dense) {
                add(page, w * s);
            }
            for (page, s) in normalised(lexical) {
                add(page, (1.0 - w) * s);
            }
        }
    }
    let mut scored: Vec<(u64, f64)> = fused.into_iter().collect();
    top(&mut scored, k).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(items: &[(u64, &[f32])]) -> VectorIndex {
        let mut ix = VectorIndex::default();
        ix.add_many(items.iter().map(|(p, v)| (*p, v.to_vec())).collect())
            .unwrap();
        ix
    }

    #[test]
    fn nearest_ranks_by_cosine() {
        let ix = index(&[(1, &[1.0, 0.0]), (2, &[1.0, 1.0]), (3, &[0.0, 5.0]), (4, &[0.0, 0.0])]);
        let hits = ix.nearest(&[2.0, 0.0], 10).unwrap();
        let pages: Vec<u64> = hits.iter().map(|h| h.0).collect();
        assert_eq!(pages, [1, 2, 3, 4]);
        assert!((hits[0].1 - 1.0).abs() < 1e-6);
        assert!((hits[1].1 - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(ix.nearest(&[0.0, 1.0], 1).unwrap()[0].0, 3);
        assert!(ix.nearest(&[1.0, 0.0], 0).unwrap().is_empty());
    }

    #[test]
    fn vectors_of_another_dimension_or_not_finite_are_refused_whole() {
        let mut ix = index(&[(1, &[1.0, 0.0])]);
        let err = ix.add_many(vec![(2, vec![0.0, 1.0]), (3, vec![1.0, 2.0, 3.0])]);
        assert_eq!(err, Err((1, VectorError::Dimension { expected: 2, got: 3 })));
        assert_eq!(ix.len(), 1);
        assert_eq!(
            ix.add_many(vec![(2, vec![0.0, f32::NAN])]),
            Err((0, VectorError::NotFinite(1)))
        );
        assert_eq!(ix.add_many(vec![(2, vec![])]), Err((0, VectorError::Empty)));
        assert_eq!(
            ix.nearest(&[1.0], 3),
            Err(VectorError::Dimension { expected: 2, got: 1 })
        );
        let mut fresh = VectorIndex::default();
        let mixed = fresh.add_many(vec![(1, vec![1.0]), (2, vec![1.0, 2.0])]);
        assert_eq!(mixed, Err((1, VectorError::Dimension { expected: 1, got: 2 })));
        assert_eq!(fresh.dim(), 0);
    }

    #[test]
    fn re_adding_a_page_replaces_its_vector() {
        let mut ix = index(&[(1, &[1.0, 0.0]), (2, &[0.0, 1.0])]);
        ix.add_many(vec![(1, vec![0.0, 3.0])]).unwrap();
        assert_eq!(ix.len(), 2);
        let hits = ix.nearest(&[0.0, 1.0], 2).unwrap();
        assert_eq!(hits[0], (1, 1.0));
        assert_eq!(hits[1], (2, 1.0));
    }

    #[test]
    fn rrf_sums_weighted_reciprocal_ranks() {
        let lexical = [(1, 9.0), (2, 5.0)];
        let dense = [(2, 0.9), (3, 0.5)];
        let fused = fuse(&lexical, &dense, Fusion::Rrf(0.5), 10);
        let r = |rank: f64| 1.0 / (RRF_C + rank);
        assert_eq!(fused[0], (2, 0.5 * r(1.0) + 0.5 * r(2.0)));
        assert_eq!(fused[1], (1, 0.5 * r(1.0)));
        assert_eq!(fused[2], (3, 0.5 * r(2.0)));
        assert_eq!(fuse(&lexical, &dense, Fusion::Rrf(0.0), 10)[0].0, 1);
        assert_eq!(fuse(&lexical, &dense, Fusion::Rrf(1.0), 1), [(2, r(1.0))]);
    }

    #[test]
    fn convex_combines_min_max_normalised_scores() {
        let lexical = [(1, 9.0), (2, 5.0), (4, 1.0)];
        let dense = [(2, 0.9), (3, 0.5)];
        let fused = fuse(&lexical, &dense, Fusion::Convex(0.25), 10);
        assert_eq!(fused[0], (1, 0.75));
        assert_eq!(fused[1], (2, 0.25 + 0.75 * 0.5));
        assert_eq!(fused[2], (3, 0.0));
        assert_eq!(fused[3], (4, 0.0));
        assert_eq!(fuse(&[(5, 2.0)], &[], Fusion::Convex(0.5), 3), [(5, 0.5)]);
        assert!(fuse(&[], &[], Fusion::Convex(0.5), 3).is_empty());
    }
}
