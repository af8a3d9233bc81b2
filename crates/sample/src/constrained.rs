//! The draws on the constrained scale: for a model whose `fn model`
//! declares its parameters, the generated `nuts_constrain` runs over every
//! draw of every chain (one batch, each draw a member) and gives each
//! parameter's value, which the summary, the CSV and Python report by name.

use autobatch::parameters::CONSTRAIN_FUNCTION;
use autobatch::{RunConfig, Strategy, Tensor, Value};
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
    let inputs = model.statics.clone().batched("nuts_theta", points);
    let internal = |what: String| {
        SampleError::Run(format!(
            "internal error: mapping the draws to the constrained scale: {what} (this is a bug in autobatch)"
        ))
    };
    let batch = model
        .compiled
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
