//! A convolution's bias gradient, handed over from its weight gradient. Burn's autodiff asks for
//! a convolution's weight gradient and then for its bias gradient, one after the other, on one
//! thread, with the same output gradient `dy`. The direct weight kernels sum each image's planes
//! of `dy` while they are in cache for the weight tiles (`direct::weight`); the bias pass then
//! finds the result here instead of reading `dy` again (14 MiB, 0.4 ms of a CNN step).
//!
//! The hand-over is keyed on `dy` itself: the entry holds a clone of the tensor, which keeps its
//! buffer alive (no other tensor can take its address meanwhile, and nothing writes a shared
//! buffer in place), and is matched by buffer address and layout. The next bias pass on this
//! thread takes the entry, matching or not; one for another tensor computes its own sum. A
//! convolution without a bias gradient leaves its entry until the next one replaces it.

use std::cell::RefCell;

use burn_flex::FlexTensor;

thread_local! {
    static HANDED: RefCell<Option<(FlexTensor, Vec<f32>)>> = const { RefCell::new(None) };
}

/// Leaves `bias`, the bias gradient for output gradient `dy`, for the next bias pass.
pub(super) fn hand(dy: &FlexTensor, bias: Vec<f32>) {
    HANDED.with(|h| *h.borrow_mut() = Some((dy.clone(), bias)));
}

/// The bias gradient handed over for `dy`, if the last one was for this tensor.
pub(super) fn take(dy: &FlexTensor) -> Option<Vec<f32>> {
    let (held, bias) = HANDED.with(|h| h.borrow_mut().take())?;
    let same = held.dtype() == dy.dtype()
        && held.layout() == dy.layout()
        && std::ptr::eq(held.bytes().as_ptr(), dy.bytes().as_ptr());
    same.then_some(bias)
}

#[cfg(test)]
mod tests {
    use super::super::kernels::f32_tensor;
    use super::{hand, take};

    /// The entry goes to its own tensor (or a clone, the same buffer) once, never to a tensor
    /// with the same values in another buffer, and any bias pass clears it.
    #[test]
    fn the_handed_sum_goes_only_to_its_own_tensor() {
        let dy = f32_tensor(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
        let twin = f32_tensor(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
        hand(&dy, vec![10.0]);
        assert_eq!(take(&dy.clone()), Some(vec![10.0]));
        assert_eq!(take(&dy), None);
        hand(&dy, vec![10.0]);
        assert_eq!(take(&twin), None);
        assert_eq!(take(&dy), None);
    }
}
