//! The constrained scale, both ways. The draws: for a model whose `fn
//! model` declares its parameters, the generated `nuts_constrain` runs over
//! every draw of every chain (one batch, each draw a member) and gives each
//! parameter's value, which the summary, the CSV and Python report by name.
//! The initial values a user gives by name go the other way, through the
//! generated `nuts_unconstrain` (Stan's `*_free` transforms).

use autobatch::parameters::{CONSTRAIN_FUNCTION, UNCONSTRAIN_FUNCTION};
use autobatch::{Inputs, RunConfig, Strategy, Tensor, Value};
use autobatch_types::Data;

use crate::model::{Model, SampleError};

/// Each chain's draws `samples[k]` (row after row of `dim` unconstrained
/// values) mapped to the constrained parameters, flattened in declaration
/// order (each parameter row-major): row after row of `width` values.
pub(crate) fn constrain_draws(
    model: &Model,
    samples: &[Vec<f64>],
    dim: usize,
    width: usize,
    threads: usize,
) -> Result<Vec<Vec<f64>>, SampleError> {
    let points = samples.iter().flat_map(|chain| {
        chain
            .chunks(dim)
            .map(|x| Value::Tensor(Tensor::new(vec![dim], Data::F64(x.to_vec()))))
    });
    let inputs = Inputs::new().batched("nuts_theta", points);
    let internal = |what: String| {
        SampleError::Run(format!(
            "internal error: mapping the draws to the constrained scale: {what} (this is a bug in autobatch)"
        ))
    };
    let batch = model
        .bound
        .bind(CONSTRAIN_FUNCTION, &inputs)
        .map_err(|e| internal(e.message().to_string()))?;
    let mut config = RunConfig {
        strategy: Strategy::ProgramCounter,
        ..RunConfig::default()
    };
    config.options.threads = threads;
    let result = batch.run(&config).map_err(|e| internal(e.to_string()))?;
    let mut members = result.members.into_iter();
    let mut out = Vec::with_capacity(samples.len());
    for chain in samples {
        let draws = chain.len() / dim.max(1);
        let mut values = Vec::with_capacity(draws * width);
        for _ in 0..draws {
            let member = members
                .next()
                .ok_or_else(|| internal("a draw has no result".into()))?;
            let value = member.map_err(|e| {
                SampleError::Run(format!(
                    "a draw could not be mapped to the constrained scale: {} at {}",
                    e.message,
                    model.describe_loc(e.loc.line, e.loc.column)
                ))
            })?;
            for tensor in value.flatten() {
                match tensor.data {
                    Data::F64(v) => values.extend(v),
                    _ => return Err(internal("a parameter is not f64".into())),
                }
            }
        }
        if values.len() != draws * width {
            return Err(internal("the parameters' sizes do not add up".into()));
        }
        out.push(values);
    }
    Ok(out)
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
