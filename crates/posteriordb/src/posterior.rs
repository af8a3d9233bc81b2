//! One posterior's files: the model, its data set, the reference summaries
//! and the settings of its check.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How a posterior is sampled for its check, from its `check.json`; every
/// field may be left out (Stan's defaults: 4 chains of 1000 warmup
/// iterations and 1000 draws, target acceptance 0.8, tree depth 10; seed 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub chains: usize,
    pub warmup: usize,
    pub draws: usize,
    pub seed: u64,
    pub target_accept: f64,
    /// The deepest tree of a trajectory (Stan's `max_treedepth`).
    pub max_depth: u32,
    /// In the fast subset (`--fast`, and the test suite): sampled in
    /// seconds.
    pub fast: bool,
    /// The data set, relative to the posterior's directory, in place of the
    /// one the reference names (for a model that cannot take that one as
    /// it is; the note says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Why the settings differ from the defaults, for the reader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            chains: 4,
            warmup: 1000,
            draws: 1000,
            seed: 1,
            target_accept: 0.8,
            max_depth: 10,
            fast: false,
            data: None,
            note: None,
        }
    }
}

/// One quantity of the reference posterior.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Reference {
    /// Stan's name, indices from 1 (`beta[2]`, `L[2,1]`).
    pub name: String,
    pub mean: f64,
    pub sd: f64,
    /// The reference draws' quantiles (empty when the reference has only
    /// means and sds).
    #[serde(skip)]
    pub quantiles: Vec<Quantile>,
    /// The sd of the reference chains' sds over their mean: how far the sd
    /// of a thousand draws is from being a stable figure.
    #[serde(default)]
    pub chain_sd_spread: Option<f64>,
    /// The reference's bulk ESS (posteriordb's figure).
    #[serde(default, rename = "reference_ess_bulk")]
    pub ess_bulk: Option<f64>,
    /// The quantiles' values, in the order of the file's
    /// `quantile_probabilities`.
    #[serde(default, rename = "quantiles")]
    quantile_values: Vec<f64>,
}

/// The `p` quantile of a reference quantity: `value`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Quantile {
    pub p: f64,
    pub value: f64,
}

impl Reference {
    /// A quantity known by its mean and sd only.
    pub fn new(name: &str, mean: f64, sd: f64) -> Reference {
        Reference {
            name: name.to_string(),
            mean,
            sd,
            quantiles: Vec::new(),
            chain_sd_spread: None,
            ess_bulk: None,
            quantile_values: Vec::new(),
        }
    }
}

/// A posterior ready to sample.
#[derive(Clone, Debug)]
pub struct Posterior {
    pub name: String,
    /// `NAME/model.ab`, as diagnostics name it.
    pub model_path: String,
    pub source: String,
    /// The data set's JSON text.
    pub data: String,
    pub reference: Vec<Reference>,
    pub settings: Settings,
}

/// `examples/posteriordb` of this repository.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/posteriordb")
}

/// The posteriors of `root` that have a model and a reference posterior,
/// sorted by name; only those in the fast subset when `fast`.
pub fn list(root: &Path, fast: bool) -> Result<Vec<String>, String> {
    let entries =
        std::fs::read_dir(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if !(dir.join("model.ab").is_file() && dir.join("reference_posterior.json").is_file()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if !fast || settings(&dir)?.fast {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The settings of the posterior in `dir`: its `check.json`, or the defaults.
fn settings(dir: &Path) -> Result<Settings, String> {
    let path = dir.join("check.json");
    if !path.exists() {
        return Ok(Settings::default());
    }
    serde_json::from_str(&read(&path)?).map_err(|e| format!("{}: {e}", path.display()))
}

/// The reference posterior file: the data set's path and the summaries.
#[derive(Deserialize)]
struct ReferenceFile {
    data: String,
    #[serde(default)]
    quantile_probabilities: Vec<f64>,
    parameters: Vec<Reference>,
}

impl ReferenceFile {
    /// The parameters with their quantiles paired with the probabilities;
    /// an error when the two lists differ in length.
    fn parameters(self) -> Result<Vec<Reference>, String> {
        let probabilities = self.quantile_probabilities;
        self.parameters
            .into_iter()
            .map(|mut r| {
                if !r.quantile_values.is_empty() && r.quantile_values.len() != probabilities.len() {
                    return Err(format!(
                        "`{}` has {} quantiles for {} quantile_probabilities",
                        r.name,
                        r.quantile_values.len(),
                        probabilities.len()
                    ));
                }
                r.quantiles = probabilities
                    .iter()
                    .zip(&r.quantile_values)
                    .map(|(&p, &value)| Quantile { p, value })
                    .collect();
                Ok(r)
            })
            .collect()
    }
}

impl Posterior {
    /// Reads the posterior `name` of `root`; an error names the file.
    pub fn load(root: &Path, name: &str) -> Result<Posterior, String> {
        let dir = root.join(name);
        if !dir.is_dir() {
            return Err(format!("no posterior `{name}` in {}", root.display()));
        }
        let reference_path = dir.join("reference_posterior.json");
        let reference: ReferenceFile = serde_json::from_str(&read(&reference_path)?)
            .map_err(|e| format!("{}: {e}", reference_path.display()))?;
        let settings = settings(&dir)?;
        let data = settings.data.clone().unwrap_or(reference.data.clone());
        let parameters = reference
            .parameters()
            .map_err(|e| format!("{}: {e}", reference_path.display()))?;
        Ok(Posterior {
            name: name.to_string(),
            model_path: format!("{name}/model.ab"),
            source: read(&dir.join("model.ab"))?,
            data: read(&dir.join(data))?,
            reference: parameters,
            settings,
        })
    }
}
