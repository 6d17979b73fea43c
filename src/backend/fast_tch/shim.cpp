// The LibTorch kernels tch 0.22 does not bind: the fused Adam (`at::_fused_adam_`, what
// `torch.optim.Adam(fused=True)` runs; called by adam.rs), the convolution's weight gradient
// alone (`at::convolution_backward`; called by grads.rs) and cross-entropy's forward and backward
// kernels (`nll_loss_forward`/`nll_loss_backward`, which carry a total weight; called by
// xent.rs). Compiled by build.rs against the
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

// PyTorch's `F.cross_entropy(logits, target)` (mean over the rows) as its two forward kernels:
// `_log_softmax` over dim 1 and `nll_loss_forward`. Writes the loss (shape [1]), the log-softmax
// and the total weight (both kept for the backward) as new handles. Returns 0, or 1 with the
// exception's text in `err`.
int trainer_cross_entropy(at::Tensor *logits, at::Tensor *target, at::Tensor **loss,
                          at::Tensor **log_softmax, at::Tensor **total_weight, char *err,
                          size_t err_len) {
  try {
    auto out = at::_log_softmax(*logits, 1, false);
    auto r = at::nll_loss_forward(out, *target, ::std::nullopt, at::Reduction::Mean, -100);
    *loss = new at::Tensor(std::get<0>(r).reshape({1}));
    *log_softmax = new at::Tensor(out);
    *total_weight = new at::Tensor(std::get<1>(r));
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, err_len, "%s", e.what());
    return 1;
  }
}

// The gradient of `trainer_cross_entropy`'s loss with respect to the logits for the loss's
// gradient `grad` (shape [1]), as PyTorch's autograd computes it: `nll_loss_backward`, then
// `_log_softmax_backward_data`. Writes a new handle to `*out`. Returns 0, or 1 with the
// exception's text in `err`.
int trainer_cross_entropy_backward(at::Tensor *grad, at::Tensor *log_softmax, at::Tensor *target,
                                   at::Tensor *total_weight, at::Tensor **out, char *err,
                                   size_t err_len) {
  try {
    auto g = at::nll_loss_backward(grad->reshape({}), *log_softmax, *target, ::std::nullopt,
                                   at::Reduction::Mean, -100, *total_weight);
    *out = new at::Tensor(
        at::_log_softmax_backward_data(g, *log_softmax, 1, log_softmax->scalar_type()));
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, err_len, "%s", e.what());
    return 1;
  }
}
}
