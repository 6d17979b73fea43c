//! `ModuleOps`: the fast convolution and max-pool kernels where they apply (`f32`,
//! `groups == 1`, no ceil mode, [`Kernels::Fast`](super::Kernels)); Flex's own operations and
//! Burn's default backward passes otherwise, exactly as for `Autodiff<Flex>`.

use burn_backend::ops::{
    AttentionModuleOptions, ConvOptions, ConvTransposeOptions, DeformConv2dBackward,
    DeformConvOptions, IntTensorOps, InterpolateOptions, MaxPool2dBackward, MaxPool2dWithIndices,
    ModuleOps,
};
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor};
use burn_backend::{DType, IntDType};
use burn_flex::{Flex, FlexTensor};

use super::kernels::{dims, f32_tensor, i32_tensor, is_f32};
use super::{FAST_CALLS, FastCpu, batch_sums, bias_grad, conv, delegate, fast, geom, pool};
use crate::profile::timed;

/// The convolution geometry when the fast kernels handle it.
fn conv_geom(x: &FlexTensor, weight: &FlexTensor, options: &ConvOptions<2>) -> Option<geom::Geom> {
    if !fast() || !is_f32(x) || !is_f32(weight) {
        return None;
    }
    let g = geom::Geom::new(&dims(x), &dims(weight), options);
    g.inspect(|_| FAST_CALLS.count())
}

/// The geometry of the convolution whose output gradient is `dy`, when the fast kernels handle
/// it and `dy` has the output's shape.
fn backward_geom(
    x: &FlexTensor,
    weight: &FlexTensor,
    dy: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<geom::Geom> {
    let g = conv_geom(x, weight, options).filter(|_| is_f32(dy))?;
    (dims(dy) == [g.n, g.o, g.oh, g.ow]).then_some(g)
}

/// The max-pool geometry when the fast kernels handle it.
fn pool_geom(
    x: &FlexTensor,
    k: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
    ceil_mode: bool,
) -> Option<pool::PoolGeom> {
    if !fast() || !is_f32(x) {
        return None;
    }
    let g = pool::PoolGeom::new(&dims(x), k, stride, pad, dil, ceil_mode);
    g.inspect(|_| FAST_CALLS.count())
}

impl ModuleOps<Self> for FastCpu {
    fn conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        timed("conv2d", || {
            let geom = conv_geom(&x, &weight, &options);
            match geom.filter(|_| bias.as_ref().is_none_or(is_f32)) {
                Some(g) => {
                    let (x, w) = (x.to_contiguous(), weight.to_contiguous());
                    let b = bias.map(|b| b.to_contiguous());
                    let y = conv::forward(
                        x.storage(),
                        w.storage(),
                        b.as_ref().map(|b| b.storage()),
                        &g,
                    );
                    f32_tensor(y, &[g.n, g.o, g.oh, g.ow])
                }
                None => Flex::conv2d(x, weight, bias, options),
            }
        })
    }

    fn conv2d_x_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        timed("conv2d_x_backward", || {
            match backward_geom(&x, &weight, &output_grad, &options) {
                Some(g) => {
                    let (w, dy) = (weight.to_contiguous(), output_grad.to_contiguous());
                    let dx = conv::x_backward(dy.storage(), w.storage(), &g);
                    f32_tensor(dx, &[g.n, g.c, g.h, g.w])
                }
                None => Flex::conv2d_x_backward(x, weight, output_grad, options),
            }
        })
    }

    fn conv2d_weight_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        timed("conv2d_weight_backward", || {
            match backward_geom(&x, &weight, &output_grad, &options) {
                Some(g) => {
                    let (x, dy) = (x.to_contiguous(), output_grad.to_contiguous());
                    let (dw, bias) = conv::weight_backward(x.storage(), dy.storage(), &g);
                    bias_grad::hand(&output_grad, bias);
                    f32_tensor(dw, &[g.o, g.c, g.kh, g.kw])
                }
                None => Flex::conv2d_weight_backward(x, weight, output_grad, options),
            }
        })
    }

    fn conv2d_bias_backward(
        x: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        timed("conv2d_bias_backward", || match &dims(&output_grad)[..] {
            &[n, o, oh, ow] if fast() && is_f32(&output_grad) && dims(&bias) == [o] => {
                FAST_CALLS.count();
                let bias = bias_grad::take(&output_grad).unwrap_or_else(|| {
                    let dy = output_grad.to_contiguous();
                    batch_sums::bias_backward(dy.storage(), n, o, oh * ow)
                });
                f32_tensor(bias, &[o])
            }
            _ => Flex::conv2d_bias_backward(x, bias, output_grad),
        })
    }

    fn max_pool2d(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        timed("max_pool2d", || {
            match pool_geom(&x, kernel_size, stride, padding, dilation, ceil_mode) {
                Some(g) => {
                    let shape = [dims(&x)[0], dims(&x)[1], g.oh, g.ow];
                    let x = x.to_contiguous();
                    f32_tensor(pool::forward(x.storage(), &g, false).0, &shape)
                }
                None => Flex::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode),
            }
        })
    }

    fn max_pool2d_with_indices(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> MaxPool2dWithIndices<Self> {
        timed("max_pool2d_with_indices", || {
            match pool_geom(&x, kernel_size, stride, padding, dilation, ceil_mode) {
                Some(g) => {
                    let shape = [dims(&x)[0], dims(&x)[1], g.oh, g.ow];
                    let x = x.to_contiguous();
                    let (out, idx) = pool::forward(x.storage(), &g, true);
                    MaxPool2dWithIndices::new(f32_tensor(out, &shape), i32_tensor(idx, &shape))
                }
                None => {
                    let r = Flex::max_pool2d_with_indices(
                        x,
                        kernel_size,
                        stride,
                        padding,
                        dilation,
                        ceil_mode,
                    );
                    MaxPool2dWithIndices::new(r.output, r.indices)
                }
            }
        })
    }

    fn max_pool2d_with_indices_backward(
        x: FloatTensor<Self>,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> MaxPool2dBackward<Self> {
        timed("max_pool2d_backward", || {
            let geom =
                pool_geom(&x, kernel_size, stride, padding, dilation, ceil_mode).filter(|g| {
                    let out = [dims(&x)[0], dims(&x)[1], g.oh, g.ow];
                    is_f32(&output_grad)
                        && matches!(indices.dtype(), DType::I32 | DType::I64)
                        && dims(&output_grad) == out
                        && dims(&indices) == out
                });
            match geom {
                Some(g) => {
                    let (dy, idx) = (output_grad.to_contiguous(), indices.to_contiguous());
                    // `i32` from this backend's forward pass, `i64` from Flex's.
                    let dx = match idx.dtype() {
                        DType::I32 => pool::backward(dy.storage(), idx.storage::<i32>(), &g),
                        _ => pool::backward(dy.storage(), idx.storage::<i64>(), &g),
                    };
                    MaxPool2dBackward::new(f32_tensor(dx, &dims(&x)))
                }
                None => {
                    // Flex reads its indices as `i64`.
                    let indices = match indices.dtype() {
                        DType::I32 => {
                            <Flex as IntTensorOps<Flex>>::int_cast(indices, IntDType::I64)
                        }
                        _ => indices,
                    };
                    let r = Flex::max_pool2d_with_indices_backward(
                        x,
                        kernel_size,
                        stride,
                        padding,
                        dilation,
                        ceil_mode,
                        output_grad,
                        indices,
                    );
                    MaxPool2dBackward::new(r.x_grad)
                }
            }
        })
    }

    fn deform_conv2d_backward(
        x: FloatTensor<Self>,
        offset: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        mask: Option<FloatTensor<Self>>,
        bias: Option<FloatTensor<Self>>,
        output_grad: FloatTensor<Self>,
        options: DeformConvOptions<2>,
    ) -> DeformConv2dBackward<Self> {
        let r = timed("deform_conv2d_backward", || {
            Flex::deform_conv2d_backward(x, offset, weight, mask, bias, output_grad, options)
        });
        DeformConv2dBackward::new(
            r.x_grad,
            r.offset_grad,
            r.weight_grad,
            r.mask_grad,
            r.bias_grad,
        )
    }

    delegate!(ModuleOps {
        fn conv1d(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: ConvOptions<1>,
        ) -> FloatTensor<Self>;
        fn deform_conv2d(
            x: FloatTensor<Self>,
            offset: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            mask: Option<FloatTensor<Self>>,
            bias: Option<FloatTensor<Self>>,
            options: DeformConvOptions<2>,
        ) -> FloatTensor<Self>;
        fn conv3d(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: ConvOptions<3>,
        ) -> FloatTensor<Self>;
        fn conv_transpose1d(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: ConvTransposeOptions<1>,
        ) -> FloatTensor<Self>;
        fn conv_transpose2d(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: ConvTransposeOptions<2>,
        ) -> FloatTensor<Self>;
        fn conv_transpose3d(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            options: ConvTransposeOptions<3>,
        ) -> FloatTensor<Self>;
        fn avg_pool2d(
            x: FloatTensor<Self>,
            kernel_size: [usize; 2],
            stride: [usize; 2],
            padding: [usize; 2],
            count_include_pad: bool,
            ceil_mode: bool,
        ) -> FloatTensor<Self>;
        fn avg_pool2d_backward(
            x: FloatTensor<Self>,
            grad: FloatTensor<Self>,
            kernel_size: [usize; 2],
            stride: [usize; 2],
            padding: [usize; 2],
            count_include_pad: bool,
            divisor_override: bool,
        ) -> FloatTensor<Self>;
        fn adaptive_avg_pool2d(x: FloatTensor<Self>, output_size: [usize; 2]) -> FloatTensor<Self>;
        fn adaptive_avg_pool2d_backward(
            x: FloatTensor<Self>,
            grad: FloatTensor<Self>,
        ) -> FloatTensor<Self>;
        fn interpolate(
            x: FloatTensor<Self>,
            output_size: [usize; 2],
            options: InterpolateOptions,
        ) -> FloatTensor<Self>;
        fn interpolate_backward(
            x: FloatTensor<Self>,
            grad: FloatTensor<Self>,
            output_size: [usize; 2],
            options: InterpolateOptions,
        ) -> FloatTensor<Self>;
        fn attention(
            query: FloatTensor<Self>,
            key: FloatTensor<Self>,
            value: FloatTensor<Self>,
            mask: Option<BoolTensor<Self>>,
            attn_bias: Option<FloatTensor<Self>>,
            options: AttentionModuleOptions,
        ) -> FloatTensor<Self>;
        fn rfft(
            signal: FloatTensor<Self>,
            dim: usize,
            n: Option<usize>,
        ) -> (FloatTensor<Self>, FloatTensor<Self>);
        fn irfft(
            spectrum_re: FloatTensor<Self>,
            spectrum_im: FloatTensor<Self>,
            dim: usize,
            n: Option<usize>,
        ) -> FloatTensor<Self>;
        fn embedding(weights: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
        fn layer_norm(
            tensor: FloatTensor<Self>,
            gamma: FloatTensor<Self>,
            beta: Option<FloatTensor<Self>>,
            epsilon: f64,
        ) -> FloatTensor<Self>;
        fn embedding_backward(
            weights: FloatTensor<Self>,
            output_grad: FloatTensor<Self>,
            indices: IntTensor<Self>,
        ) -> FloatTensor<Self>;
    });
}
