//! Subject-level splits (docs/clg-ode-model.md §3.1): scikit-learn's `GroupShuffleSplit(test_size=0.2,
//! random_state=42)` for the outer test split, emulated exactly (MT19937 + numpy's legacy
//! shuffle), and `GroupKFold(5)` for the inner folds.
//!
//! Subjects are identified by their index in sorted-id order (the order of
//! [`super::Cohort::subjects`]).

use serde::{Deserialize, Serialize};

use super::{ConnectomeError, Result};

/// The MT19937 generator exactly as numpy's legacy `RandomState` seeds and draws it.
#[derive(Clone)]
pub(crate) struct Mt19937 {
    state: [u32; 624],
    pos: usize,
}

impl Mt19937 {
    /// `init_genrand(seed)`, which is what `RandomState(seed)` does for an integer seed.
    pub(crate) fn new(seed: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Self { state, pos: 624 }
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        if self.pos >= 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[i] = self.state[(i + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.pos = 0;
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// numpy's `random_sample()` (53-bit double).
    #[cfg(test)]
    pub(crate) fn next_f64(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// numpy's `random_interval(max)`: uniform in `[0, max]` by masked rejection.
    pub(crate) fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        loop {
            let v = if max <= u64::from(u32::MAX) {
                u64::from(self.next_u32()) & mask
            } else {
                ((u64::from(self.next_u32()) << 32) | u64::from(self.next_u32())) & mask
            };
            if v <= max {
                return v;
            }
        }
    }
}

/// `numpy.random.RandomState(seed).permutation(n)`.
pub(crate) fn numpy_permutation(n: usize, seed: u32) -> Vec<usize> {
    let mut rng = Mt19937::new(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.interval(i as u64) as usize;
        v.swap(i, j);
    }
    v
}

/// The outer split, as sorted subject indices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TestSplit {
    pub trainval: Vec<usize>,
    pub test: Vec<usize>,
}

/// `GroupShuffleSplit(n_splits=1, test_size, random_state=seed)` over `n_subjects` groups:
/// `n_test = ceil(test_size · n)` (computed in f64, like scikit-learn), and the test subjects are the first `n_test` entries of
/// `RandomState(seed).permutation(n)`. Error when either side would be empty.
pub(crate) fn test_split(n_subjects: usize, test_size: f64, seed: u32) -> Result<TestSplit> {
    if !(test_size > 0.0 && test_size < 1.0) {
        return Err(ConnectomeError::Split(format!(
            "test_size must be in (0, 1), got {test_size}"
        )));
    }
    let n_test = (test_size * n_subjects as f64).ceil() as usize;
    if n_test == 0 || n_test >= n_subjects {
        return Err(ConnectomeError::Split(format!(
            "{n_subjects} subjects with test_size {test_size} leave an empty train or test set"
        )));
    }
    let perm = numpy_permutation(n_subjects, seed);
    let mut test = perm[..n_test].to_vec();
    let mut trainval = perm[n_test..].to_vec();
    test.sort_unstable();
    trainval.sort_unstable();
    Ok(TestSplit { trainval, test })
}

/// Validation fold of the r-th (0-based) of `n_trainval` trainval subjects under
/// `GroupKFold(k)` with one group per subject: `(n_trainval − 1 − r) mod k` (needs
/// `r < n_trainval`).
pub(crate) fn group_kfold_fold(n_trainval: usize, r: usize, k: usize) -> usize {
    (n_trainval - 1 - r) % k
}

/// One CV fold, as subject indices (into the cohort, sorted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FoldSplit {
    pub fold: usize,
    pub train: Vec<usize>,
    pub val: Vec<usize>,
}

/// Fold `fold` of `GroupKFold(k)` over `trainval` (sorted subject indices). Error if `fold ≥ k`
/// or there are fewer trainval subjects than folds (scikit-learn refuses that too).
pub(crate) fn cv_fold(trainval: &[usize], fold: usize, k: usize) -> Result<FoldSplit> {
    if k < 2 || fold >= k {
        return Err(ConnectomeError::Split(format!(
            "fold {fold} of {k} folds (need k ≥ 2 and fold < k)"
        )));
    }
    if trainval.len() < k {
        return Err(ConnectomeError::Split(format!(
            "{} trainval subjects cannot make {k} folds",
            trainval.len()
        )));
    }
    let n = trainval.len();
    let (mut train, mut val) = (Vec::new(), Vec::new());
    for (r, &s) in trainval.iter().enumerate() {
        if group_kfold_fold(n, r, k) == fold {
            val.push(s);
        } else {
            train.push(s);
        }
    }
    Ok(FoldSplit { fold, train, val })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_numpy() {
        // numpy.random.RandomState(42).rand() and the reference MT19937 vector (seed 5489).
        assert_eq!(Mt19937::new(42).next_f64(), 0.3745401188473625);
        assert_eq!(Mt19937::new(5489).next_u32(), 3_499_211_612);
        // numpy 2.4: RandomState(42).permutation(n)
        assert_eq!(numpy_permutation(10, 42), [8, 1, 5, 0, 7, 2, 9, 4, 3, 6]);
        assert_eq!(numpy_permutation(7, 42), [0, 1, 5, 2, 4, 3, 6]);
        assert_eq!(numpy_permutation(2, 42), [1, 0]);
        assert_eq!(numpy_permutation(1, 42), [0]);
        assert_eq!(
            numpy_permutation(60, 42),
            [
                0, 5, 36, 45, 13, 54, 33, 48, 12, 57, 46, 50, 31, 3, 52, 17, 8, 6, 40, 4, 43, 19,
                34, 58, 25, 56, 15, 27, 9, 30, 26, 16, 24, 55, 11, 32, 53, 41, 37, 29, 44, 1, 21,
                2, 47, 39, 35, 23, 49, 10, 22, 18, 59, 20, 7, 42, 14, 28, 51, 38
            ]
        );
    }

    #[test]
    fn test_split_is_disjoint_and_sized() {
        let s = test_split(10, 0.2, 42).unwrap();
        assert_eq!(s.test, [1, 8]);
        assert_eq!(s.trainval, [0, 2, 3, 4, 5, 6, 7, 9]);
        for n in [2usize, 5, 35, 60, 401] {
            let s = test_split(n, 0.2, 42).unwrap();
            let want_test = (0.2 * n as f64).ceil() as usize;
            assert_eq!(s.test.len(), want_test);
            assert_eq!(s.test.len() + s.trainval.len(), n);
            assert!(s.test.iter().all(|t| s.trainval.binary_search(t).is_err()));
        }
        assert_eq!(test_split(35, 0.2, 42).unwrap().test.len(), 7);
        assert!(test_split(1, 0.2, 42).is_err());
        assert!(test_split(10, 1.0, 42).is_err());
    }

    #[test]
    fn group_kfold_assignment() {
        // 12 trainval subjects: r → (11 − r) mod 5.
        let tv: Vec<usize> = (100..112).collect();
        let folds: Vec<usize> = (0..12).map(|r| group_kfold_fold(12, r, 5)).collect();
        assert_eq!(folds, [1, 0, 4, 3, 2, 1, 0, 4, 3, 2, 1, 0]);
        let f0 = cv_fold(&tv, 0, 5).unwrap();
        assert_eq!(f0.val, [101, 106, 111]);
        assert_eq!(f0.train.len(), 9);
        let mut all: Vec<usize> = (0..5)
            .flat_map(|f| cv_fold(&tv, f, 5).unwrap().val)
            .collect();
        all.sort_unstable();
        assert_eq!(all, tv);
        assert!(cv_fold(&tv[..4], 0, 5).is_err());
        assert!(cv_fold(&tv, 5, 5).is_err());
    }
}
