//! [`SymMatrix`]: a scan's symmetrised SC held once, as its upper triangle in f32.
//!
//! The loader's `A_raw = (A + Aᵀ)/2` with a zero diagonal is exactly symmetric (float addition
//! commutes), so the strict upper triangle holds every value: half the memory of the dense
//! matrix (0.32 MB instead of 0.64 MB at N = 400; 0.70 GB instead of 1.4 GB for 1,000 subjects'
//! 2,196 scans). The dense matrix is rebuilt bit for bit where a reader needs it.

use ndarray::Array2;

/// A symmetric N×N f32 matrix with a zero diagonal, stored as its strict upper triangle
/// (row-major, `i < j`: entry `(0,1), (0,2) … (0,N−1), (1,2) …`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SymMatrix {
    n: usize,
    upper: Vec<f32>,
}

impl SymMatrix {
    /// The strict upper triangle of `a` (its lower triangle and diagonal are not read: the
    /// caller's matrix is symmetric with a zero diagonal).
    pub(crate) fn from_dense(a: &Array2<f32>) -> Self {
        let n = a.nrows();
        let mut upper = Vec::with_capacity(n * n.saturating_sub(1) / 2);
        for (i, row) in a.outer_iter().enumerate() {
            upper.extend(row.iter().skip(i + 1));
        }
        Self { n, upper }
    }

    /// The matrix of strict upper triangle `upper` (row-major, N·(N−1)/2 values).
    #[cfg(test)]
    pub(crate) fn from_upper(n: usize, upper: Vec<f32>) -> Self {
        assert_eq!(upper.len(), n * n.saturating_sub(1) / 2, "N·(N−1)/2 values");
        Self { n, upper }
    }

    /// N.
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// The strict upper triangle, row-major.
    pub(crate) fn upper(&self) -> &[f32] {
        &self.upper
    }

    /// Entry `(i, j)` (0 on the diagonal).
    #[cfg(test)]
    pub(crate) fn get(&self, i: usize, j: usize) -> f32 {
        let (i, j) = if i <= j { (i, j) } else { (j, i) };
        if i == j {
            return 0.0;
        }
        self.upper[i * self.n - i * (i + 1) / 2 + (j - i - 1)]
    }

    /// The dense N×N matrix.
    pub(crate) fn dense(&self) -> Array2<f32> {
        let mut out = Vec::with_capacity(self.n * self.n);
        self.dense_into(&mut out);
        Array2::from_shape_vec((self.n, self.n), out).expect("N×N values")
    }

    /// Appends the dense matrix, row-major, to `out`.
    pub(crate) fn dense_into(&self, out: &mut Vec<f32>) {
        self.map_into(out, |v| v);
    }

    /// Appends `log1p` of the dense matrix, row-major, to `out` (the diagonal's `log1p(0) = 0`).
    pub(crate) fn log_into(&self, out: &mut Vec<f32>) {
        self.map_into(out, f32::ln_1p);
    }

    /// Appends `f` of every dense entry, row-major: row `i` is `f` of column `i` of the upper
    /// triangle above the diagonal, `f(0)` on it and `f` of row `i` of the triangle after it,
    /// each triangle value mapped once.
    fn map_into(&self, out: &mut Vec<f32>, f: impl Fn(f32) -> f32) {
        let n = self.n;
        let start = out.len();
        out.resize(start + n * n, 0.0);
        let dense = &mut out[start..];
        let zero = f(0.0);
        let mut k = 0;
        for i in 0..n {
            dense[i * n + i] = zero;
            for j in i + 1..n {
                let v = f(self.upper[k]);
                dense[i * n + j] = v;
                dense[j * n + i] = v;
                k += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_symmetric_matrix_bit_for_bit() {
        let n = 7;
        let mut a = Array2::<f32>::zeros((n, n));
        for i in 0..n {
            for j in i + 1..n {
                let v = ((i * 31 + j * 17) as f32).sin() * 0.9 + 0.05;
                a[(i, j)] = v;
                a[(j, i)] = v;
            }
        }
        let s = SymMatrix::from_dense(&a);
        assert_eq!(s.n(), n);
        assert_eq!(s.upper().len(), n * (n - 1) / 2);
        assert_eq!(s.dense(), a);
        for i in 0..n {
            for j in 0..n {
                assert_eq!(s.get(i, j).to_bits(), a[(i, j)].to_bits(), "({i}, {j})");
            }
        }
        let mut log = vec![9.0];
        s.log_into(&mut log);
        assert_eq!(log[0], 9.0, "appends");
        let expect: Vec<f32> = a.iter().map(|v| v.ln_1p()).collect();
        assert_eq!(&log[1..], &expect[..]);
    }

    #[test]
    fn empty_and_single_node_matrices() {
        for n in [0, 1] {
            let s = SymMatrix::from_dense(&Array2::zeros((n, n)));
            assert_eq!(s.dense(), Array2::<f32>::zeros((n, n)));
        }
    }
}
