//! `BoolTensorOps`, `QTensorOps` and `ActivationOps`: every operation is Flex's, but relu, its
//! backward pass and sigmoid on large tensors, split over threads on the fast path
//! ([`elementwise`]).
//!
//! [`elementwise`]: super::elementwise

use burn_backend::ops::{ActivationOps, BoolTensorOps, QTensorOps};
use burn_backend::quantization::{QuantScheme, QuantizationParametersPrimitive};
use burn_backend::tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    BoolDType, ExecutionError, FloatDType, IntDType, Scalar, Shape, Slice, TensorData,
};
use burn_flex::Flex;

use super::elementwise::{binary, unary, unary_chunks};
use super::vector_math;
use super::{FastCpu, delegate};
use crate::profile::timed;

impl BoolTensorOps<Self> for FastCpu {
    async fn bool_into_data(tensor: BoolTensor<Self>) -> Result<TensorData, ExecutionError> {
        Flex::bool_into_data(tensor).await
    }

    async fn bool_argwhere(tensor: BoolTensor<Self>, out_dtype: IntDType) -> IntTensor<Self> {
        Flex::bool_argwhere(tensor, out_dtype).await
    }

    delegate!(BoolTensorOps {
        fn bool_from_data(data: TensorData, device: &Device<Self>) -> BoolTensor<Self>;
        fn bool_device(tensor: &BoolTensor<Self>) -> Device<Self>;
        fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self>;
        fn bool_cat(tensors: Vec<BoolTensor<Self>>, dim: usize) -> BoolTensor<Self>;
        fn bool_reshape(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self>;
        fn bool_slice(tensor: BoolTensor<Self>, slices: &[Slice]) -> BoolTensor<Self>;
        fn bool_empty(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self>;
        fn bool_slice_assign(
            tensor: BoolTensor<Self>,
            slices: &[Slice],
            value: BoolTensor<Self>,
        ) -> BoolTensor<Self>;
        fn bool_into_int(tensor: BoolTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
        fn bool_into_float(tensor: BoolTensor<Self>, out_dtype: FloatDType) -> FloatTensor<Self>;
        fn bool_swap_dims(tensor: BoolTensor<Self>, dim1: usize, dim2: usize) -> BoolTensor<Self>;
        fn bool_permute(tensor: BoolTensor<Self>, axes: &[usize]) -> BoolTensor<Self>;
        fn bool_flip(tensor: BoolTensor<Self>, axes: &[usize]) -> BoolTensor<Self>;
        fn bool_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_not(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_and(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_or(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_xor(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_expand(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self>;
        fn bool_zeros(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self>;
        fn bool_ones(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self>;
        fn bool_mask_where(
            tensor: BoolTensor<Self>,
            mask: BoolTensor<Self>,
            value: BoolTensor<Self>,
        ) -> BoolTensor<Self>;
        fn bool_mask_fill(
            tensor: BoolTensor<Self>,
            mask: BoolTensor<Self>,
            value: Scalar,
        ) -> BoolTensor<Self>;
        fn bool_gather(
            dim: usize,
            tensor: BoolTensor<Self>,
            indices: IntTensor<Self>,
        ) -> BoolTensor<Self>;
        fn bool_scatter_or(
            dim: usize,
            tensor: BoolTensor<Self>,
            indices: IntTensor<Self>,
            value: BoolTensor<Self>,
        ) -> BoolTensor<Self>;
        fn bool_equal_elem(lhs: BoolTensor<Self>, rhs: Scalar) -> BoolTensor<Self>;
        fn bool_unfold(
            tensor: BoolTensor<Self>,
            dim: usize,
            size: usize,
            step: usize,
        ) -> BoolTensor<Self>;
        fn bool_not_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_not_equal_elem(lhs: BoolTensor<Self>, rhs: Scalar) -> BoolTensor<Self>;
        fn bool_any(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_any_dim(tensor: BoolTensor<Self>, dim: usize) -> BoolTensor<Self>;
        fn bool_all(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_all_dim(tensor: BoolTensor<Self>, dim: usize) -> BoolTensor<Self>;
        fn bool_select(
            tensor: BoolTensor<Self>,
            dim: usize,
            indices: IntTensor<Self>,
        ) -> BoolTensor<Self>;
        fn bool_select_or(
            tensor: BoolTensor<Self>,
            dim: usize,
            indices: IntTensor<Self>,
            value: BoolTensor<Self>,
        ) -> BoolTensor<Self>;
        fn bool_transpose(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
        fn bool_repeat_dim(tensor: BoolTensor<Self>, dim: usize, times: usize) -> BoolTensor<Self>;
    });
}

impl QTensorOps<Self> for FastCpu {
    async fn q_into_data(tensor: QuantizedTensor<Self>) -> Result<TensorData, ExecutionError> {
        Flex::q_into_data(tensor).await
    }

    fn quantize(
        tensor: FloatTensor<Self>,
        scheme: &QuantScheme,
        qparams: QuantizationParametersPrimitive<Self>,
    ) -> QuantizedTensor<Self> {
        let qparams = QuantizationParametersPrimitive {
            scales: qparams.scales,
        };
        Flex::quantize(tensor, scheme, qparams)
    }

    delegate!(QTensorOps {
        fn q_from_data(data: TensorData, device: &Device<Self>) -> QuantizedTensor<Self>;
        fn quantize_dynamic(
            tensor: FloatTensor<Self>,
            scheme: &QuantScheme,
        ) -> QuantizedTensor<Self>;
        fn dequantize(tensor: QuantizedTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
        fn q_device(tensor: &QuantizedTensor<Self>) -> Device<Self>;
        fn q_to_device(
            tensor: QuantizedTensor<Self>,
            device: &Device<Self>,
        ) -> QuantizedTensor<Self>;
        fn q_reshape(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self>;
        fn q_swap_dims(
            tensor: QuantizedTensor<Self>,
            dim1: usize,
            dim2: usize,
        ) -> QuantizedTensor<Self>;
        fn q_permute(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self>;
        fn q_flip(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self>;
        fn q_expand(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self>;
        fn q_select(
            tensor: QuantizedTensor<Self>,
            dim: usize,
            indices: IntTensor<Self>,
        ) -> QuantizedTensor<Self>;
        fn q_slice(tensor: QuantizedTensor<Self>, slices: &[Slice]) -> QuantizedTensor<Self>;
        fn q_argmax(
            tensor: QuantizedTensor<Self>,
            dim: usize,
            out_dtype: IntDType,
        ) -> IntTensor<Self>;
        fn q_argmin(
            tensor: QuantizedTensor<Self>,
            dim: usize,
            out_dtype: IntDType,
        ) -> IntTensor<Self>;
        fn q_gather(
            dim: usize,
            tensor: QuantizedTensor<Self>,
            indices: IntTensor<Self>,
        ) -> QuantizedTensor<Self>;
    });
}

impl ActivationOps<Self> for FastCpu {
    fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        timed("relu", || unary(tensor, |x| x.max(0.0), Flex::relu))
    }

    fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        timed("sigmoid", || {
            unary_chunks(tensor, vector_math::sigmoid_in_place, Flex::sigmoid)
        })
    }

    fn relu_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        timed("relu_backward", || {
            binary(
                output,
                grad,
                |out, g| if out > 0.0 { g } else { 0.0 },
                Flex::relu_backward,
            )
        })
    }

    delegate!(ActivationOps {
        fn leaky_relu(tensor: FloatTensor<Self>, negative_slope: Scalar) -> FloatTensor<Self>;
        fn prelu(tensor: FloatTensor<Self>, alpha: FloatTensor<Self>) -> FloatTensor<Self>;
        fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn sigmoid_backward(
            output: FloatTensor<Self>,
            grad: FloatTensor<Self>,
        ) -> FloatTensor<Self>;
        fn hard_sigmoid(
            tensor: FloatTensor<Self>,
            alpha: Scalar,
            beta: Scalar,
        ) -> FloatTensor<Self>;
        fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
        fn log_sigmoid_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    });
}
