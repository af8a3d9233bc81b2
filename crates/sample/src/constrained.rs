//! The constrained scale, both ways. The draws: for a model whose `fn
//! model` declares its parameters, the generated `nuts_constrain` runs over
//! every draw of every chain (a batch per chain, each draw a member) and
//! gives each parameter's value, then those of the transformed parameters
//! and generated quantities, which the summary, the CSV and Python report
//! by name.
//! The initial values a user gives by name go the other way, through the
//! generated `nuts_unconstrain` (Stan's `*_free` transforms).

use autobatch::parameters::{CONSTRAIN_FUNCTION, UNCONSTRAIN_FUNCTION};
use autobatch::{Inputs, RunConfig, RunOptions, Strategy, Tensor, Value};
use autobatch_types::Data;

use crate::driver::{segment_seed, Variable};
use crate::model::{Model, Parameters, SampleError};

/// The constrained draws: each variable (the parameters, then the
/// transformed parameters and generated quantities) and, per chain, its
/// values row after row (every variable flattened, row-major).
pub(crate) struct ConstrainedDraws {
    pub variables: Vec<Variable>,
    pub values: Vec<Vec<f64>>,
}

/// Each chain's draws `samples[k]` (row after row of `dim` unconstrained
/// values; `chain_ids[k]` its number) mapped to the constrained
/// parameters, the transformed parameters and the generated quantities.
/// The draws of a chain are one batch, each draw a member; its random
/// stream depends on the run's seed, the chain's number and the draw's
/// position only.
pub(crate) fn constrain_draws(
    model: &Model,
    samples: &[Vec<f64>],
    chain_ids: &[usize],
    dim: usize,
    options: &RunOptions,
) -> Result<ConstrainedDraws, SampleError> {
    let names = model
        .parameters()
        .map(Parameters::names)
        .unwrap_or_default();
    let mut shapes: Option<Vec<Vec<usize>>> = None;
    let mut out = Vec::with_capacity(samples.len());
    for (chain, &number) in samples.iter().zip(chain_ids) {
        let points = chain
            .chunks(dim)
            .map(|x| Value::Tensor(Tensor::new(vec![dim], Data::F64(x.to_vec()))));
        let inputs = Inputs::new().batched("nuts_theta", points);
        let batch = model
            .bound
            .bind(CONSTRAIN_FUNCTION, &inputs)
            .map_err(|e| internal(e.message().to_string()))?;
        // `auto`: the executor its rule picks for the batch (native code
        // for the draws of a long chain); every executor gives the same bits.
        let mut config = RunConfig {
            strategy: Strategy::Auto,
            ..RunConfig::default()
        };
        config.options.threads = options.threads;
        config.options.seed =
            segment_seed(GENERATED_SEED.wrapping_add(options.seed), number as u64);
        let result = batch.run(&config).map_err(|e| internal(e.to_string()))?;
        let mut values = Vec::new();
        for (draw, member) in result.members.into_iter().enumerate() {
            let value = member.map_err(|e| {
                SampleError::Run(format!(
                    "chain {number}, draw {draw}: the transformed parameters or generated quantities could not be computed: {} at {}",
                    e.message,
                    model.describe_loc(e.loc.line, e.loc.column)
                ))
            })?;
            let tensors = value.flatten();
            let these: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape.clone()).collect();
            if shapes.get_or_insert_with(|| these.clone()) != &these {
                return Err(SampleError::Run(format!(
                    "chain {number}, draw {draw}: a transformed parameter or generated quantity has another shape than at the first draw"
                )));
            }
            for tensor in tensors {
                match tensor.data {
                    Data::F64(v) => values.extend(v),
                    Data::I64(v) => values.extend(v.into_iter().map(|n| n as f64)),
                    _ => return Err(internal("a reported value is not f64 or i64".into())),
                }
            }
        }
        out.push(values);
    }
    // Without draws, the parameters' shapes are known and nothing else is.
    let shapes = shapes.unwrap_or_else(|| {
        let shapes = model.parameters().map(|p| p.shapes.clone());
        let shapes = shapes.unwrap_or_default();
        shapes
            .into_iter()
            .map(|s| s.into_iter().map(|n| n as usize).collect())
            .collect()
    });
    let names = &names[..shapes.len().min(names.len())];
    if shapes.len() != names.len() {
        return Err(internal(
            "the reported values do not match their names".into(),
        ));
    }
    let variables = names
        .iter()
        .zip(shapes)
        .map(|(name, shape)| Variable {
            name: name.clone(),
            shape,
        })
        .collect();
    Ok(ConstrainedDraws {
        variables,
        values: out,
    })
}

/// Added to the run's seed for the streams of the generated quantities,
/// so that they are not those of the sampler's segments.
const GENERATED_SEED: u64 = 0x6765_6e65_7261_7465;

fn internal(what: String) -> SampleError {
    SampleError::Run(format!(
        "internal error: mapping the draws to the constrained scale: {what} (this is a bug in autobatch)"
    ))
}

/// The column names of the draws: `tau`, `theta_tilde.0`, `L.1.0` (Stan's
/// CSV names, indices from 0 as the language counts them).
pub(crate) fn column_names(variables: &[Variable]) -> Vec<String> {
    let mut names = Vec::new();
    for v in variables {
        let count: usize = v.shape.iter().product();
        for flat in 0..count {
            let mut name = v.name.clone();
            let mut rest = flat;
            let mut index = Vec::new();
            for len in v.shape.iter().rev() {
                index.push(rest % len);
                rest /= len;
            }
            for i in index.iter().rev() {
                name.push_str(&format!(".{i}"));
            }
            names.push(name);
        }
    }
    names
}

impl Model {
    /// The unconstrained point of the initial values `init`, the text of a
    /// JSON object giving every parameter of `fn model` by name on its
    /// constrained scale (`{"tau": 1.5, "theta_tilde": [0, ...]}`), or, for
    /// a model written as `log_density`, `{"theta": [...]}`. For
    /// [`SampleConfig::init`](crate::SampleConfig::init).
    pub fn initial_point(&self, init: &str) -> Result<Vec<f64>, SampleError> {
        let bad = |what: String| SampleError::Data(format!("the initial values {what}"));
        let value = autobatch::parse_strict_json(init)
            .map_err(|e| bad(format!("are not valid JSON: {e}")))?;
        let serde_json::Value::Object(object) = value else {
            return Err(bad(
                "must be a JSON object holding each parameter by name".into()
            ));
        };
        let names: Vec<String> = match &self.parameters {
            Some(p) => p.declared.iter().map(|d| d.name.clone()).collect(),
            None => vec!["theta".into()],
        };
        if let Some(key) = object.keys().find(|k| !names.contains(k)) {
            return Err(bad(format!(
                "give `{key}`, which is not a parameter of the model (its parameters: {})",
                names.join(", ")
            )));
        }
        let mut inputs = Inputs::new();
        for name in &names {
            let value = object
                .get(name)
                .ok_or_else(|| bad(format!("have no `{name}`")))?;
            inputs = inputs.shared(name, value.clone());
        }
        if self.parameters.is_none() {
            let theta = object["theta"]
                .as_array()
                .map(|a| a.iter().map(|x| x.as_f64()).collect::<Option<Vec<f64>>>());
            return match theta {
                Some(Some(theta)) => Ok(theta),
                _ => Err(bad("give `theta` as an array of numbers".into())),
            };
        }
        let zeros = Value::Tensor(Tensor::new(
            vec![self.dim()],
            Data::F64(vec![0.0; self.dim()]),
        ));
        let batch = self
            .bound
            .bind(UNCONSTRAIN_FUNCTION, &inputs.batched("nuts_theta", [zeros]))
            .map_err(|e| bad(format!("do not fit the parameters: {}", e.message())))?;
        let result = batch
            .run(&RunConfig::default())
            .map_err(|e| SampleError::Run(e.to_string()))?;
        let member = result.members.into_iter().next().expect("one member");
        match member {
            Ok(Value::Tensor(Tensor {
                data: Data::F64(point),
                ..
            })) => Ok(point),
            Ok(_) => Err(SampleError::Run(
                "internal error: the unconstrained point is not f64 (this is a bug in autobatch)"
                    .into(),
            )),
            Err(e) => Err(bad(format!("are wrong: {}", e.message))),
        }
    }
}
