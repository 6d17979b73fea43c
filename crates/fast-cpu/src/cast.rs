//! A tensor of a generic backend `B` as the concrete primitive a backend's own kernel works on,
//! and back: the fused kernels (Adam on `flex` and `tch`, LibTorch's cross-entropy and dropout)
//! are reached from generic code after a `TypeId` test of `B`, and these checked casts are the
//! one place that moves their tensors across. A wrong type is a defect of that test, not input:
//! it panics naming `what`.

use std::any::Any;

use burn::prelude::*;
use burn::tensor::TensorPrimitive;

/// The float primitive of `t`, which must be a `P`.
pub fn float_primitive<P: 'static, B: Backend, const D: usize>(t: Tensor<B, D>, what: &str) -> P {
    let prim: Box<dyn Any> = Box::new(t.into_primitive().tensor());
    match prim.downcast::<P>() {
        Ok(p) => *p,
        Err(_) => panic!("{what}: not this backend's tensor (its TypeId test let it through)"),
    }
}

/// The integer primitive of `t`, which must be a `P`.
pub fn int_primitive<P: 'static, B: Backend, const D: usize>(
    t: Tensor<B, D, Int>,
    what: &str,
) -> P {
    let prim: Box<dyn Any> = Box::new(t.into_primitive());
    match prim.downcast::<P>() {
        Ok(p) => *p,
        Err(_) => panic!("{what}: not this backend's integer tensor"),
    }
}

/// `p` as a float tensor of `B`, whose float primitive must be a `P`.
pub fn float_tensor<B: Backend, P: 'static, const D: usize>(p: P, what: &str) -> Tensor<B, D> {
    let prim: Box<dyn Any> = Box::new(p);
    match prim.downcast::<B::FloatTensorPrimitive>() {
        Ok(p) => Tensor::from_primitive(TensorPrimitive::Float(*p)),
        Err(_) => panic!("{what}: the result is not this backend's tensor"),
    }
}
