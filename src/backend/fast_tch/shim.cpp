// The LibTorch kernels tch 0.22 does not bind: the fused Adam (`at::_fused_adam_`, what
// `torch.optim.Adam(fused=True)` runs; called by adam.rs) and the convolution's weight gradient
// alone (`at::convolution_backward`; called by grads.rs). Compiled by build.rs against the
// headers of the LibTorch that torch-sys links (feature `tch`). The tensors are tch's handles
// (torch-sys's C API passes `at::Tensor *`); a result is returned as a new handle the caller owns.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>

extern "C" {

// One Adam step of one parameter, in place on `param`, `exp_avg` and `exp_avg_sq`, with
// LibTorch's fused kernel (one launch on a GPU). `step` holds the step count the kernel's bias
// corrections use. Returns 0, or 1 with the exception's text in `err` (at most `err_len` bytes).
int trainer_fused_adam(at::Tensor *param, at::Tensor *grad, at::Tensor *exp_avg,
                       at::Tensor *exp_avg_sq, at::Tensor *step, double lr, double beta1,
                       double beta2, double eps, char *err, size_t err_len) {
  try {
    at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {*step}, lr, beta1,
                     beta2, /*weight_decay=*/0.0, eps, /*amsgrad=*/false,
                     /*maximize=*/false);
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, err_len, "%s", e.what());
    return 1;
  }
}

// The gradient of `conv2d(x, weight)` (no transposition) with respect to `weight` for the output
// gradient `dy`, and nothing else (`output_mask` {false, true, false}): on an NVIDIA GPU cuDNN's
// weight-gradient kernel, as PyTorch's backward runs it. Writes a new tensor handle to `*out`.
// Returns 0, or 1 with the exception's text in `err`.
int trainer_conv2d_weight_backward(at::Tensor *dy, at::Tensor *x, at::Tensor *weight,
                                   const int64_t *stride, const int64_t *padding,
                                   const int64_t *dilation, int64_t groups, at::Tensor **out,
                                   char *err, size_t err_len) {
  try {
    auto grads = at::convolution_backward(
        *dy, *x, *weight, /*bias_sizes=*/::std::nullopt, at::IntArrayRef(stride, 2),
        at::IntArrayRef(padding, 2), at::IntArrayRef(dilation, 2), /*transposed=*/false,
        /*output_padding=*/at::IntArrayRef({0, 0}), groups, {false, true, false});
    *out = new at::Tensor(std::get<1>(grads));
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, err_len, "%s", e.what());
    return 1;
  }
}
}
