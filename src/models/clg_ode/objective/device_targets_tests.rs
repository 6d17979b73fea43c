//! The device's keep masks, edge indicators and log targets equal the host's bit for bit
//! (`loss::topk_upper_mask` symmetrised, as `forward::keep_masks`; the host loops of
//! `forward::pred_tensors`), on inputs made of ties: repeated values, NaN, ±∞, +0.0 beside
//! −0.0 at the threshold, k of 0 and of the whole triangle.

use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::TensorData;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::device_targets::{edge_counts, edge_targets, keep_masks, triangle};
use crate::models::clg_ode::loss::topk_upper_mask;
use fast_cpu::FastCpu;

/// The host's symmetric keep mask of one prediction.
fn host_mask(a: &[f32], n: usize, k: usize) -> Vec<f32> {
    let mut m = topk_upper_mask(a, n, k);
    for i in 0..n {
        for j in i + 1..n {
            m[j * n + i] = m[i * n + j];
        }
    }
    m
}

/// Values drawn from a few, so that most of them tie: quarters, ±0.0, NaN, ±∞, negatives.
fn tied_values(len: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..len)
        .map(|_| match rng.random_range(0..11) {
            0 => 0.0,
            1 => -0.0,
            2 => f32::NAN,
            3 => f32::NEG_INFINITY,
            4 => f32::INFINITY,
            5 => -1.5,
            // The least negative subnormal: its reciprocal overflows to −∞ as −0.0's does.
            6 => -f32::from_bits(1),
            _ => rng.random_range(0..4) as f32 * 0.25,
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn masks_equal_host<B: Backend>(device: &B::Device) {
    let mut rng = ChaCha8Rng::seed_from_u64(74);
    let n = 9;
    let (nn, tri) = (n * n, n * (n - 1) / 2);
    let mut cases = 0;
    for round in 0..60 {
        let p = 1 + round % 4;
        let a: Vec<f32> = match round % 3 {
            // Only zeros of both signs and a few positives: the threshold lands on ±0.0.
            0 => (0..p * nn)
                .map(|_| match rng.random_range(0..6) {
                    0 => 0.5,
                    1..3 => 0.0,
                    _ => -0.0,
                })
                .collect(),
            _ => tied_values(p * nn, &mut rng),
        };
        let k: Vec<usize> = (0..p)
            .map(|q| match (round + q) % 7 {
                0 => 0,
                1 | 2 => tri,
                _ => rng.random_range(1..tri),
            })
            .collect();
        let want: Vec<f32> = (0..p)
            .flat_map(|q| host_mask(&a[q * nn..(q + 1) * nn], n, k[q]))
            .collect();
        let t = Tensor::<B, 3>::from_data(TensorData::new(a.clone(), [p, n, n]), device);
        let k_t: Vec<i64> = k.iter().map(|&k| k as i64).collect();
        let k_t = Tensor::<B, 2, Int>::from_data(TensorData::new(k_t, [p, 1]), device);
        let got: Vec<f32> = keep_masks(t, k_t, &triangle::<B>(n, device))
            .into_data()
            .to_vec()
            .unwrap();
        assert_eq!(
            bits(&got),
            bits(&want),
            "round {round}, k {k:?}, values {a:?}"
        );
        cases += p;
    }
    assert_eq!(cases, 150);
}

fn targets_equal_host<B: Backend>(device: &B::Device) {
    let mut rng = ChaCha8Rng::seed_from_u64(75);
    let (p, n) = (3, 8);
    let nn = n * n;
    // As the loader gives them: finite, ≥ 0, −0.0 among the zeros.
    let raw: Vec<f32> = (0..p * nn)
        .map(|_| match rng.random_range(0..5) {
            0 => 0.0,
            1 => -0.0,
            _ => rng.random_range(0..40) as f32 * 0.37,
        })
        .collect();
    let upper: Vec<f32> = (0..nn)
        .map(|ij| f32::from(u8::from(ij / n < ij % n)))
        .collect();
    let want_y: Vec<f32> = (0..p * nn)
        .map(|k| f32::from(u8::from(raw[k] > 0.0 && upper[k % nn] > 0.0)))
        .collect();
    let want_log: Vec<f32> = raw.iter().map(|&r| r.max(0.0).ln_1p()).collect();
    let upper = Tensor::<B, 2>::from_data(TensorData::new(upper, [1, nn]), device);
    let t = Tensor::<B, 3>::from_data(TensorData::new(raw, [p, n, n]), device);
    let (y, log) = edge_targets(t, &upper);
    let counts: Vec<i64> = edge_counts(&y)
        .into_data()
        .convert::<i64>()
        .to_vec()
        .unwrap();
    let want_counts: Vec<i64> = want_y
        .chunks(nn)
        .map(|c| c.iter().sum::<f32>() as i64)
        .collect();
    assert_eq!(counts, want_counts);
    assert_eq!(bits(&y.into_data().to_vec().unwrap()), bits(&want_y));
    assert_eq!(bits(&log.into_data().to_vec().unwrap()), bits(&want_log));
}

/// On Burn's Flex and on `flex` (`FastCpu`).
#[test]
fn device_keep_masks_are_the_host_selection_bit_for_bit() {
    masks_equal_host::<Flex>(&Default::default());
    masks_equal_host::<FastCpu>(&Default::default());
}

#[test]
fn device_edge_indicators_and_log_targets_are_the_host_values_bit_for_bit() {
    targets_equal_host::<Flex>(&Default::default());
    targets_equal_host::<FastCpu>(&Default::default());
}
