//! A module's parameters as named host arrays (`conv1.weight`, …), in visiting order.
//! Names come from the module's field path, so they are stable across processes (unlike Burn's
//! random `ParamId`s) and readable from Python.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use burn::module::{ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn_flex::FlexDevice;

/// The backend [`init_seeded`] draws on: Burn's Flex, with autodiff (some models are only
/// defined for autodiff backends). The `flex` backend's fast kernels draw from Flex's generator
/// (only their dropout masks have a stream of their own), so a model drawn here is the one the
/// `flex` backend draws.
type Cpu = burn::backend::Autodiff<burn_flex::Flex>;

/// A float parameter copied to the host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

struct Collect {
    path: Vec<String>,
    out: Vec<(String, HostTensor)>,
}

impl<B: Backend> ModuleVisitor<B> for Collect {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let t = param.val();
        let shape = t.dims().to_vec();
        let data = crate::host_reads::data(t)
            .convert::<f32>()
            .to_vec::<f32>()
            .unwrap_or_default();
        self.out
            .push((self.path.join("."), HostTensor { shape, data }));
    }
}

/// Every float parameter of `module`, named by its field path, in visiting order.
pub fn collect<B: Backend, M: Module<B>>(module: &M) -> Vec<(String, HostTensor)> {
    let mut v = Collect {
        path: Vec::new(),
        out: Vec::new(),
    };
    module.visit(&mut v);
    v.out
}

struct Names {
    path: Vec<String>,
    out: Vec<String>,
}

impl<B: Backend> ModuleVisitor<B> for Names {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, _param: &Param<Tensor<B, D>>) {
        self.out.push(self.path.join("."));
    }
}

/// Parameter names in visiting order (cheap: no data is copied).
pub(crate) fn names<B: Backend, M: Module<B>>(module: &M) -> Vec<String> {
    let mut v = Names {
        path: Vec::new(),
        out: Vec::new(),
    };
    module.visit(&mut v);
    v.out
}

struct Load<'a, B: Backend> {
    path: Vec<String>,
    source: &'a BTreeMap<String, HostTensor>,
    device: B::Device,
    errors: Vec<String>,
    missing: Vec<String>,
    used: usize,
}

impl<B: Backend> ModuleMapper<B> for Load<'_, B> {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let name = self.path.join(".");
        let (id, tensor, mapper) = param.consume();
        let Some(src) = self.source.get(&name) else {
            self.missing.push(name);
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let dims = tensor.dims().to_vec();
        if src.shape != dims {
            self.errors.push(format!(
                "tensor `{name}` has shape {:?}, the model expects {dims:?}",
                src.shape
            ));
            return Param::from_mapped_value(id, tensor, mapper);
        }
        self.used += 1;
        let require_grad = tensor.is_require_grad();
        let mut t = Tensor::<B, D>::from_data(
            TensorData::new(src.data.clone(), src.shape.clone()),
            &self.device,
        );
        if require_grad {
            t = t.require_grad();
        }
        Param::from_mapped_value(id, t, mapper)
    }
}

/// Replaces every float parameter of `module` by the tensor of the same name in `source`.
/// Fails, naming the tensors, when one is missing or has the wrong shape.
pub fn load<B: Backend, M: Module<B>>(
    module: M,
    source: &BTreeMap<String, HostTensor>,
    device: &B::Device,
) -> Result<M> {
    let (module, missing, _) = load_partial(module, source, device)?;
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|m| format!("missing tensor `{m}`"))
            .collect();
        bail!("checkpoint does not fit the model: {}", list.join("; "));
    }
    Ok(module)
}

/// Like [`load`], but a parameter missing from `source` keeps its value and a tensor of
/// `source` that is no parameter is ignored (PyTorch's `strict=False`); a shape that differs is
/// still an error. Returns the module and the missing and unexpected names.
pub(crate) fn load_partial<B: Backend, M: Module<B>>(
    module: M,
    source: &BTreeMap<String, HostTensor>,
    device: &B::Device,
) -> Result<(M, Vec<String>, Vec<String>)> {
    let known = names::<B, M>(&module);
    let mut l = Load::<B> {
        path: Vec::new(),
        source,
        device: device.clone(),
        errors: Vec::new(),
        missing: Vec::new(),
        used: 0,
    };
    let module = module.map(&mut l);
    if !l.errors.is_empty() {
        bail!("checkpoint does not fit the model: {}", l.errors.join("; "));
    }
    let unexpected = source
        .keys()
        .filter(|k| !known.contains(k))
        .cloned()
        .collect();
    Ok((module, l.missing, unexpected))
}

struct Materialize;

impl<B: Backend> ModuleVisitor<B> for Materialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let _ = param.val();
    }
}

/// Forces Burn's lazy parameter initialisation now. Call it right after building a model from
/// a seed: otherwise the weights are drawn at first use, from whatever the backend generator
/// holds then (e.g. a per-step dropout seed), and processes that touch parameters in another
/// order (a data-parallel broadcast) get other weights.
pub fn materialize<B: Backend, M: Module<B>>(module: &M) {
    module.visit(&mut Materialize);
}

/// A freshly initialised model whose weights are those `on_cpu` draws on the CPU backend (flex)
/// from `seed`, whatever the backend `B`: one seed gives the same initial weights on flex, tch,
/// cuda and wgpu, so runs on two backends can be compared from their first step.
///
/// Order matters on flex, where `B` and the CPU backend share one generator: the model is
/// drawn on `B` first, then the generator is seeded again and the CPU draws replace those
/// weights, so the generator ends where one seeded initialisation leaves it (what the steps
/// after it, e.g. dropout, draw from) and flex runs keep their weights and their draws.
pub(crate) fn init_seeded<B: Backend, M: Module<B>, C: Module<Cpu>>(
    seed: u64,
    device: &B::Device,
    on_device: impl FnOnce() -> M,
    on_cpu: impl FnOnce(&FlexDevice) -> C,
) -> Result<M> {
    B::seed(device, seed);
    let model = on_device();
    materialize(&model);
    <Cpu as Backend>::seed(&FlexDevice, seed);
    let cpu = on_cpu(&FlexDevice);
    materialize(&cpu);
    let weights: BTreeMap<String, HostTensor> = collect(&cpu).into_iter().collect();
    load(model, &weights, device)
}

/// FNV-1a hash of every float parameter's bytes, in visiting order: equal digests mean
/// bit-identical weights.
pub(crate) fn digest<B: Backend, M: Module<B>>(module: &M) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (_, t) in collect(module) {
        for x in t.data {
            for b in x.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    h
}
