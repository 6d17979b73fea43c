//! The heat-kernel Taylor series of CLG-ODE's topology loss, one graph at a time: y = Σ_s term_s
//! with term_0 = x0 and term_s = a_s·(term_{s−1} − d ⊙ (W·(d ⊙ term_{s−1}))), for every graph
//! `W` `[N, N]` of a batch, and on request the adjoint series that gives the gradient of
//! Σ x0 ⊙ y with respect to `W` and `d` (see the trainer's `topology::taylor_beta0`).
//!
//! As tensor operations the series reads every graph's N×N matrix once per step, forty times
//! with its adjoint: at N = 400 and eight thresholds, 5 MB a read, from memory. Here each graph's
//! matrix is read by one task through all the steps, while it sits in the core's cache.
//!
//! The forward series makes the operations `FastCpu` ran for it, in the same order, with the
//! same products ([`dots`], the thin matrix product's): `y` is theirs bit for bit. The adjoint
//! series is ordinary arithmetic (its result is a gradient, compared within rounding).

use rayon::prelude::*;
use std::mem::MaybeUninit;

use super::{THIN, dots};

/// `y` `[G, N, V]`, and the adjoint series' factors when asked for.
pub struct Series {
    pub y: Vec<f32>,
    pub adjoint: Option<Adjoint>,
}

/// The gradient of Σ x0 ⊙ y / V: ∂/∂W = −left·rightᵀ per graph (`left`, `right` `[G, N, S·V]`,
/// step s in columns s·V..(s + 1)·V), ∂/∂d = `g_d` `[G, N]`.
pub struct Adjoint {
    pub left: Vec<f32>,
    pub right: Vec<f32>,
    pub g_d: Vec<f32>,
}

/// Whether [`heat_series`] computes what `FastCpu`'s operations compute, bit for bit: its fast
/// kernels are on and V is a thin width.
pub fn matches_ops(v: usize) -> bool {
    super::super::fast() && (1..=THIN).contains(&v)
}

/// One graph's results.
struct One {
    y: Vec<f32>,
    adjoint: Option<Adjoint>,
}

/// The series of every graph: `w` `[G, N, N]` (rows contiguous), `d` `[G, N]`, `x0` `[G, N, V]`,
/// `coefs[s − 1]` = a_s (as `f32`, as a scalar product rounds it), the adjoint when `adjoint`.
pub fn heat_series(
    w: &[f32],
    d: &[f32],
    x0: &[f32],
    (n, v): (usize, usize),
    coefs: &[f32],
    adjoint: bool,
) -> Series {
    let g = d.len() / n.max(1);
    assert!(matches_ops(v), "heat_series: V = {v} is not a thin width");
    assert_eq!(w.len(), g * n * n, "heat_series: W");
    assert_eq!(x0.len(), g * n * v, "heat_series: x0");
    let ones: Vec<One> = (0..g)
        .into_par_iter()
        .map(|b| {
            let graph = Graph {
                w: &w[b * n * n..][..n * n],
                d: &d[b * n..][..n],
                n,
                v,
            };
            graph.series(&x0[b * n * v..][..n * v], coefs, adjoint)
        })
        .collect();
    let mut y = Vec::with_capacity(g * n * v);
    let (mut left, mut right, mut g_d) = (Vec::new(), Vec::new(), Vec::new());
    for one in ones {
        y.extend(one.y);
        if let Some(a) = one.adjoint {
            left.extend(a.left);
            right.extend(a.right);
            g_d.extend(a.g_d);
        }
    }
    Series {
        y,
        adjoint: adjoint.then_some(Adjoint { left, right, g_d }),
    }
}

/// One graph: W `[N, N]`, d `[N]`, V probes.
struct Graph<'a> {
    w: &'a [f32],
    d: &'a [f32],
    n: usize,
    v: usize,
}

impl Graph<'_> {
    /// W·u for u `[N, V]` (rows of V): each row of W against u's columns, as the thin
    /// product's `row_dots` does.
    fn times(&self, u: &[f32]) -> Vec<f32> {
        let (n, v) = (self.n, self.v);
        let columns: Vec<f32> = (0..v)
            .flat_map(|c| (0..n).map(move |i| u[i * v + c]))
            .collect();
        let dots = match v {
            1 => dots::<1>,
            2 => dots::<2>,
            3 => dots::<3>,
            _ => dots::<4>,
        };
        let mut out: Vec<MaybeUninit<f32>> = Vec::with_capacity(n * v);
        // SAFETY: MaybeUninit needs no initialisation; `dots` writes each row's V values.
        unsafe { out.set_len(n * v) };
        for (i, row) in out.chunks_exact_mut(v).enumerate() {
            dots(&self.w[i * n..][..n], &columns, row);
        }
        // SAFETY: every value was written above.
        unsafe { std::mem::transmute::<Vec<MaybeUninit<f32>>, Vec<f32>>(out) }
    }

    /// Wᵀ·x for x `[N, V]`: rows of W scaled and added, i in order.
    fn times_transposed(&self, x: &[f32]) -> Vec<f32> {
        let (n, v) = (self.n, self.v);
        let mut columns = vec![0.0f32; v * n];
        for i in 0..n {
            let row = &self.w[i * n..][..n];
            for c in 0..v {
                let a = x[i * v + c];
                if a != 0.0 {
                    axpy(a, row, &mut columns[c * n..][..n]);
                }
            }
        }
        (0..n)
            .flat_map(|j| (0..v).map(move |c| (j, c)))
            .map(|(j, c)| columns[c * n + j])
            .collect()
    }

    fn series(&self, x0: &[f32], coefs: &[f32], adjoint: bool) -> One {
        let (n, v, d) = (self.n, self.v, self.d);
        let steps = coefs.len();
        let mut term = x0.to_vec();
        let mut y = x0.to_vec();
        // Per step: u_s = d ⊙ term_{s−1}, W·u_s, term_{s−1}.
        let mut kept = Vec::with_capacity(if adjoint { steps } else { 0 });
        for &a in coefs {
            let u: Vec<f32> = (0..n * v).map(|k| d[k / v] * term[k]).collect();
            let m = self.times(&u);
            let next: Vec<f32> = (0..n * v)
                .map(|k| (term[k] - d[k / v] * m[k]) * a)
                .collect();
            for (y, t) in y.iter_mut().zip(&next) {
                *y += t;
            }
            if adjoint {
                kept.push((u, m, std::mem::replace(&mut term, next)));
            } else {
                term = next;
            }
        }
        let adjoint = adjoint.then(|| self.adjoint(x0, coefs, kept));
        One { y, adjoint }
    }

    /// The adjoint series (the derivation is at `topology::taylor_beta0`).
    fn adjoint(&self, x0: &[f32], coefs: &[f32], kept: Vec<Kept>) -> Adjoint {
        let (n, v, d) = (self.n, self.v, self.d);
        let sv = coefs.len() * v;
        let y_bar: Vec<f32> = x0.iter().map(|&x| x / v as f32).collect();
        let mut g = y_bar.clone();
        let mut g_d = vec![0.0f32; n];
        let mut left = vec![0.0f32; n * sv];
        let mut right = vec![0.0f32; n * sv];
        for (s, (u, m, prev)) in kept.into_iter().enumerate().rev() {
            let h: Vec<f32> = g.iter().map(|&x| x * coefs[s]).collect();
            let dh: Vec<f32> = (0..n * v).map(|k| d[k / v] * h[k]).collect();
            let back = self.times_transposed(&dh);
            for i in 0..n {
                let mut sum = 0.0f32;
                for c in 0..v {
                    let k = i * v + c;
                    sum += h[k] * m[k] + back[k] * prev[k];
                    left[i * sv + s * v + c] = dh[k];
                    right[i * sv + s * v + c] = u[k];
                }
                g_d[i] -= sum;
            }
            g = (0..n * v)
                .map(|k| h[k] - d[k / v] * back[k] + y_bar[k])
                .collect();
        }
        Adjoint { left, right, g_d }
    }
}

/// u_s, W·u_s and term_{s−1} of one step.
type Kept = (Vec<f32>, Vec<f32>, Vec<f32>);

avx2_or_baseline! {
    /// `out += a · x`.
    fn axpy(a: f32, x: &[f32], out: &mut [f32]) {
        for (o, &x) in out.iter_mut().zip(x) {
            *o += a * x;
        }
    }
}
