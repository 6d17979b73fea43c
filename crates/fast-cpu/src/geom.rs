//! The shapes of one 2-D convolution ([`Geom`]), shared by the three ways the fast kernels run
//! it: im2col and GEMM (`conv.rs`), direct register tiles (`direct/`) and Winograd
//! (`winograd.rs`).

use burn_backend::ops::ConvOptions;

/// Shapes of one convolution: input `[n, c, h, w]`, weight `[o, c, kh, kw]`, output
/// `[n, o, oh, ow]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dil: [usize; 2],
    pub oh: usize,
    pub ow: usize,
}

impl Geom {
    /// The geometry of `conv2d(x, weight, options)`, or `None` when the fast path does not
    /// handle it (grouped convolution, mismatched channels, an empty output).
    pub fn new(x: &[usize], weight: &[usize], options: &ConvOptions<2>) -> Option<Self> {
        let (&[n, c, h, w], &[o, wc, kh, kw]) = (x, weight) else {
            return None;
        };
        if options.groups != 1 || wc != c {
            return None;
        }
        let out = |size: usize, k: usize, i: usize| {
            let span = options.dilation[i] * (k.max(1) - 1) + 1;
            (size + 2 * options.padding[i])
                .checked_sub(span)
                .map(|d| d / options.stride[i] + 1)
        };
        let (oh, ow) = (out(h, kh, 0)?, out(w, kw, 1)?);
        Some(Self {
            n,
            c,
            h,
            w,
            o,
            kh,
            kw,
            stride: options.stride,
            pad: options.padding,
            dil: options.dilation,
            oh,
            ow,
        })
    }

    /// Rows of the im2col matrix: `c · kh · kw`.
    pub fn k(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// Columns of the im2col matrix: `oh · ow`.
    pub fn l(&self) -> usize {
        self.oh * self.ow
    }

    pub fn image(&self) -> usize {
        self.c * self.h * self.w
    }

    /// A 1×1 convolution with stride 1 and no padding: the image is its own im2col matrix.
    pub fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.pad == [0, 0]
    }
}
