//! Fit step 9 of docs/eb-drift.md: co-deviations of edges that share a node. A subject whose
//! edge (i, l) deviates from the population tends to deviate alike on (i, j) when nodes j and l
//! deviate alike across the training scans; the forecast adds `γ·p_ij`, the start scan's
//! deviations pooled through that node similarity.

use ndarray::Array2;

use super::EbParams;
use super::pooling::TINY;
use super::visits::{Visit, for_all, for_pairs};

/// The symmetric N×N matrix of upper-triangle values `v` (row-major), zero diagonal.
pub(super) fn square(n: usize, v: &[f64]) -> Array2<f64> {
    let mut m = Array2::zeros((n, n));
    let mut e = 0;
    for i in 0..n {
        for j in i + 1..n {
            m[(i, j)] = v[e];
            m[(j, i)] = v[e];
            e += 1;
        }
    }
    m
}

/// Sums of the node similarity over training scans: `C = Σ UᵀU` of the scans' deviation
/// matrices and `K = Σ ZᵀZ` of their presence matrices.
pub(super) struct SimilaritySums {
    c: Array2<f64>,
    k: Array2<f64>,
}

impl SimilaritySums {
    pub(super) fn new(n: usize) -> Self {
        Self {
            c: Array2::zeros((n, n)),
            k: Array2::zeros((n, n)),
        }
    }

    /// One scan: `u` its deviations (0 where not used), `z` 1 where used.
    pub(super) fn add(&mut self, n: usize, u: &[f64], z: &[f64]) {
        let (u, z) = (square(n, u), square(n, z));
        self.c += &u.t().dot(&u);
        self.k += &z.t().dot(&z);
    }

    /// `S_jl = C_jl / max(K_jl, 1)` off the diagonal, 0 on it, each row divided by the sum of
    /// its absolute values (a row without any stays 0).
    pub(super) fn similarity(&self) -> Array2<f64> {
        let n = self.c.nrows();
        let mut s = Array2::zeros((n, n));
        for j in 0..n {
            for l in 0..n {
                if j != l {
                    s[(j, l)] = self.c[(j, l)] / self.k[(j, l)].max(1.0);
                }
            }
            let norm: f64 = s.row(j).iter().map(|x: &f64| x.abs()).sum();
            if norm > TINY {
                s.row_mut(j).mapv_inplace(|x| x / norm);
            }
        }
        s
    }
}

/// The pooled deviations `P = U·Sᵀ + S·U` of deviations `u` (upper triangle), as an upper
/// triangle: `p_ij = Σ_l S_jl u_il + Σ_l S_il u_lj`.
pub(super) fn pooled(n: usize, s: &Array2<f64>, u: &[f64]) -> Vec<f64> {
    let u = square(n, u);
    let p = u.dot(&s.t()) + s.dot(&u);
    let mut out = Vec::with_capacity(u.len());
    for i in 0..n {
        for j in i + 1..n {
            out.push(p[(i, j)]);
        }
    }
    out
}

impl EbParams {
    /// Step 9 on the training subjects' scans (visit order): the node similarity over every
    /// scan, then `γ` over the pairs' edges present (and seen) at both visits.
    pub(super) fn with_co_deviations(self, scans: &[Vec<Visit>]) -> Self {
        let n = self.n;
        let mut sums = SimilaritySums::new(n);
        // The similarity's sums over every scan's deviations, then the pairs they make (each
        // pair's deviations computed again, the same values: nothing per scan is kept).
        for_all(scans, |v, s| {
            let (u, used) = self.deviations(v.age, &s.y, &s.z);
            sums.add(n, &u, &used);
        });
        let sim = sums.similarity();
        let (mut pu, mut pp) = (0.0, 0.0);
        for_pairs(scans, |v0, s0, v1, s1, _| {
            let (u0, _) = self.deviations(v0.age, &s0.y, &s0.z);
            let (u1, _) = self.deviations(v1.age, &s1.y, &s1.z);
            let p = pooled(n, &sim, &u0);
            for e in 0..u0.len() {
                if s0.z[e] && s1.z[e] && self.seen[e] {
                    pu += p[e] * (u1[e] - self.k_edge[e] * u0[e]);
                    pp += p[e] * p[e];
                }
            }
        });
        Self {
            node_sim: sim.iter().copied().collect(),
            codev: if pp > TINY { pu / pp } else { 0.0 },
            ..self
        }
    }

    /// A scan's edge deviations `u = y − μ_e(a) − g` on its present, seen edges (0 elsewhere),
    /// and 1 where used.
    pub(super) fn deviations(&self, age: f64, y: &[f64], z: &[bool]) -> (Vec<f64>, Vec<f64>) {
        let g = self.offset(age, y, z);
        (0..y.len())
            .map(|e| {
                if z[e] && self.seen[e] {
                    (y[e] - self.mu(e, age) - g, 1.0)
                } else {
                    (0.0, 0.0)
                }
            })
            .unzip()
    }

    /// The start scan's deviations pooled through the node similarity, times `γ` (zeros
    /// without a similarity or with `γ = 0`).
    pub(super) fn co_deviation(&self, age0: f64, y0: &[f64], z0: &[bool]) -> Vec<f64> {
        if self.codev == 0.0 || self.node_sim.len() != self.n * self.n {
            return vec![0.0; y0.len()];
        }
        let s = Array2::from_shape_vec((self.n, self.n), self.node_sim.clone())
            .expect("node_sim holds n·n values");
        let (u0, _) = self.deviations(age0, y0, z0);
        let p = pooled(self.n, &s, &u0);
        p.iter().map(|x| self.codev * x).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_is_the_sum_over_the_shared_nodes() {
        // 3 nodes, edges (0,1), (0,2), (1,2): a scan whose edges (0,1) and (0,2) deviate alike
        // makes nodes 1 and 2 similar (C_12 = u_01·u_02), nothing else (rows normalised).
        let mut sums = SimilaritySums::new(3);
        sums.add(3, &[1.0, 1.0, 0.0], &[1.0, 1.0, 1.0]);
        let s = sums.similarity();
        assert_eq!(s.row(0).to_vec(), vec![0.0, 0.0, 0.0]);
        assert_eq!((s[(1, 2)], s[(2, 1)]), (1.0, 1.0));
        // p_01 = Σ_l S_1l u_0l + Σ_l S_0l u_l1 = S_12 u_02 = 0.5.
        let p = pooled(3, &s, &[0.25, 0.5, -1.0]);
        assert_eq!(p, vec![0.5, 0.25, 0.0]);
    }
}
