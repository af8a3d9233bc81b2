//! The library functions: Stan's distributions (`normal_lpdf`,
//! `poisson_rng`, `multi_normal_lpdf`, ...), the compound special functions
//! (`lbeta`, `log_mix`, ...) and `gp_exp_quad_cov`. None is a primitive: the lowering expands each call into
//! primitives (`crates/lower`'s `library` module), so that `grad`, every
//! executor and native code need nothing of their own. This module says
//! which exist, their parameters (names and kinds, for the front end's
//! checks and messages) and what they give.

/// What an argument may be. All the float arguments of a call have one
/// float type `F`; the lengths named `N` (of the elementwise arguments) are
/// one length, and those named `K` (of the vector and matrix arguments) another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A float scalar or a float vector `[F; N]`, taken elementwise.
    Real,
    /// An `i64` scalar or an `[i64; N]` vector (outcomes, counts), elementwise.
    Int,
    /// A float scalar.
    Scalar,
    /// One float vector `[F; K]` (a simplex, a location, cutpoints).
    Vector,
    /// A square float matrix `[[F; K]; K]`.
    Matrix,
    /// A float matrix `[[F; K]; N]`: a row of predictors per outcome.
    Design,
    /// Points: `[F; N]` or `[[F; D]; N]`.
    Points,
    /// A length known before the program runs (the size `K` of a matrix
    /// drawn): a number, a `const`, a const generic parameter or a
    /// symbolic dimension, as an array length.
    Size,
}

impl ArgKind {
    /// Whether an argument of this kind fixes or follows the length `N` of
    /// the elementwise arguments (with its first axis).
    pub fn is_elementwise(self) -> bool {
        matches!(
            self,
            ArgKind::Real | ArgKind::Int | ArgKind::Design | ArgKind::Points
        )
    }
}

/// One parameter: its name (as Stan's documentation names it) and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: ArgKind,
}

const fn real(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Real,
    }
}

const fn int(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Int,
    }
}

const fn scalar(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Scalar,
    }
}

const fn vector(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Vector,
    }
}

const fn matrix(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Matrix,
    }
}

const fn design(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Design,
    }
}

const fn points(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Points,
    }
}

const fn size(name: &'static str) -> Param {
    Param {
        name,
        kind: ArgKind::Size,
    }
}

/// What a call gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    /// The float scalar `F`: a log density summed over the vectors' elements.
    Sum,
    /// A float of the arguments' common shape, elementwise.
    Elementwise,
    /// A draw for each element of the arguments' common shape (a scalar if
    /// every argument is one), a float or an `i64` as the outcome.
    Draw { integer: bool },
    /// One draw of a vector outcome: `[F; K]`.
    DrawVector,
    /// One draw of a matrix outcome: `[[F; K]; K]`.
    DrawMatrix,
    /// A square float matrix `[[F; N]; N]` (a covariance of `N` points).
    Covariance,
}

/// How the name of a distribution's function ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Suffix {
    /// The log density (or log mass) with every constant term.
    Log,
    /// The log density without the terms that are constant in every argument.
    Unnormalized,
    /// The log of the CDF.
    Lcdf,
    /// The log of the complementary CDF.
    Lccdf,
    /// A random draw.
    Rng,
}

macro_rules! families {
    ($(
        $(#[$doc:meta])*
        $variant:ident: $name:literal, $outcome:ident($oname:literal), [$($param:ident($pname:literal)),*], cdf: $cdf:literal;
    )*) => {
        /// The distributions.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Family {
            $($(#[$doc])* $variant,)*
        }

        impl Family {
            /// Every distribution.
            pub const ALL: &'static [Family] = &[$(Family::$variant),*];

            /// Stan's name (`normal`, `neg_binomial_2_log`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Family::$variant => $name,)*
                }
            }

            /// The outcome (`y`, `n`, `theta`, `L`).
            pub fn outcome(self) -> Param {
                match self {
                    $(Family::$variant => $outcome($oname),)*
                }
            }

            /// The parameters after the outcome.
            pub fn params(self) -> Vec<Param> {
                match self {
                    $(Family::$variant => vec![$($param($pname)),*],)*
                }
            }

            /// Whether it has `_lcdf` and `_lccdf`.
            pub fn has_cdf(self) -> bool {
                match self {
                    $(Family::$variant => $cdf,)*
                }
            }
        }
    };
}

families! {
    /// `normal(y | mu, sigma)`.
    Normal: "normal", real("y"), [real("mu"), real("sigma")], cdf: true;
    /// `student_t(y | nu, mu, sigma)`.
    StudentT: "student_t", real("y"), [real("nu"), real("mu"), real("sigma")], cdf: true;
    /// `cauchy(y | mu, sigma)`.
    Cauchy: "cauchy", real("y"), [real("mu"), real("sigma")], cdf: true;
    /// `double_exponential(y | mu, sigma)` (Laplace).
    DoubleExponential: "double_exponential", real("y"), [real("mu"), real("sigma")], cdf: true;
    /// `logistic(y | mu, sigma)`.
    Logistic: "logistic", real("y"), [real("mu"), real("sigma")], cdf: true;
    /// `lognormal(y | mu, sigma)`.
    Lognormal: "lognormal", real("y"), [real("mu"), real("sigma")], cdf: true;
    /// `exponential(y | beta)` (rate `beta`).
    Exponential: "exponential", real("y"), [real("beta")], cdf: true;
    /// `gamma(y | alpha, beta)` (shape, rate).
    Gamma: "gamma", real("y"), [real("alpha"), real("beta")], cdf: true;
    /// `inv_gamma(y | alpha, beta)` (shape, scale).
    InvGamma: "inv_gamma", real("y"), [real("alpha"), real("beta")], cdf: true;
    /// `weibull(y | alpha, sigma)` (shape, scale).
    Weibull: "weibull", real("y"), [real("alpha"), real("sigma")], cdf: true;
    /// `chi_square(y | nu)`.
    ChiSquare: "chi_square", real("y"), [real("nu")], cdf: true;
    /// `beta(theta | alpha, beta)`.
    Beta: "beta", real("theta"), [real("alpha"), real("beta")], cdf: true;
    /// `uniform(y | alpha, beta)`.
    Uniform: "uniform", real("y"), [real("alpha"), real("beta")], cdf: true;
    /// `bernoulli(n | theta)`.
    Bernoulli: "bernoulli", int("n"), [real("theta")], cdf: true;
    /// `bernoulli_logit(n | alpha)`.
    BernoulliLogit: "bernoulli_logit", int("n"), [real("alpha")], cdf: false;
    /// `binomial(n | N, theta)`.
    Binomial: "binomial", int("n"), [int("N"), real("theta")], cdf: true;
    /// `binomial_logit(n | N, alpha)`.
    BinomialLogit: "binomial_logit", int("n"), [int("N"), real("alpha")], cdf: false;
    /// `poisson(n | lambda)`.
    Poisson: "poisson", int("n"), [real("lambda")], cdf: true;
    /// `poisson_log(n | alpha)`.
    PoissonLog: "poisson_log", int("n"), [real("alpha")], cdf: false;
    /// `neg_binomial_2(n | mu, phi)`.
    NegBinomial2: "neg_binomial_2", int("n"), [real("mu"), real("phi")], cdf: true;
    /// `neg_binomial_2_log(n | eta, phi)`.
    NegBinomial2Log: "neg_binomial_2_log", int("n"), [real("eta"), real("phi")], cdf: false;
    /// `normal_id_glm(y | x, alpha, beta, sigma)`: `normal(y | alpha + x beta, sigma)`.
    NormalIdGlm: "normal_id_glm", real("y"), [design("x"), real("alpha"), vector("beta"), real("sigma")], cdf: false;
    /// `von_mises(y | mu, kappa)`.
    VonMises: "von_mises", real("y"), [real("mu"), real("kappa")], cdf: true;
    /// `dirichlet(theta | alpha)`, `theta` a simplex.
    Dirichlet: "dirichlet", vector("theta"), [vector("alpha")], cdf: false;
    /// `multi_normal(y | mu, Sigma)`.
    MultiNormal: "multi_normal", vector("y"), [vector("mu"), matrix("Sigma")], cdf: false;
    /// `multi_normal_cholesky(y | mu, L)`, `L` the Cholesky factor of the covariance.
    MultiNormalCholesky: "multi_normal_cholesky", vector("y"), [vector("mu"), matrix("L")], cdf: false;
    /// `lkj_corr_cholesky(L | eta)`, `L` the Cholesky factor of a correlation matrix.
    LkjCorrCholesky: "lkj_corr_cholesky", matrix("L"), [scalar("eta")], cdf: false;
    /// `categorical(y | theta)`, `y` in `1..=K`, `theta` a simplex.
    Categorical: "categorical", int("y"), [vector("theta")], cdf: false;
    /// `categorical_logit(y | beta)`: `categorical(y | softmax(beta))`.
    CategoricalLogit: "categorical_logit", int("y"), [vector("beta")], cdf: false;
    /// `ordered_logistic(k | eta, c)`, `k` in `1..=K`, `c` the `K - 1` ordered cutpoints.
    OrderedLogistic: "ordered_logistic", int("k"), [real("eta"), vector("c")], cdf: false;
}

impl Family {
    /// Whether the outcome is an integer (`_lpmf`, `_lupmf`) rather than a
    /// real (`_lpdf`, `_lupdf`).
    pub fn is_discrete(self) -> bool {
        self.outcome().kind == ArgKind::Int
    }

    /// Whether its outcome is a vector or a matrix (one draw is a vector).
    pub fn is_multivariate(self) -> bool {
        matches!(self.outcome().kind, ArgKind::Vector | ArgKind::Matrix)
    }

    /// Whether it has an `_rng`: the distributions drawn by transforming
    /// the stream's uniform and normal draws (through the inverse of a
    /// CDF where that is needed: gamma, Poisson and binomial draws; by a
    /// rejection method seeded by one uniform draw for `von_mises`). All
    /// but `normal_id_glm`, which Stan does not draw either.
    pub fn has_rng(self) -> bool {
        self != Family::NormalIdGlm
    }

    /// The parameters of its `_rng`: those after the outcome, preceded by
    /// the size `K` of the matrix drawn for a matrix outcome
    /// (`lkj_corr_cholesky_rng(K, eta)`, as Stan has it).
    pub fn rng_params(self) -> Vec<Param> {
        let mut params = Vec::new();
        if self.outcome().kind == ArgKind::Matrix {
            params.push(size("K"));
        }
        params.extend(self.params());
        params
    }

    /// The name of its function with `suffix` (`normal_lupdf`).
    pub fn function_name(self, suffix: Suffix) -> String {
        let ending = match (suffix, self.is_discrete()) {
            (Suffix::Log, false) => "lpdf",
            (Suffix::Log, true) => "lpmf",
            (Suffix::Unnormalized, false) => "lupdf",
            (Suffix::Unnormalized, true) => "lupmf",
            (Suffix::Lcdf, _) => "lcdf",
            (Suffix::Lccdf, _) => "lccdf",
            (Suffix::Rng, _) => "rng",
        };
        format!("{}_{ending}", self.name())
    }

    /// Whether the function with `suffix` exists.
    pub fn has(self, suffix: Suffix) -> bool {
        match suffix {
            Suffix::Log | Suffix::Unnormalized => true,
            Suffix::Lcdf | Suffix::Lccdf => self.has_cdf(),
            Suffix::Rng => self.has_rng(),
        }
    }
}

/// The compound special functions, elementwise over floats, and the
/// squared-exponential covariance of Gaussian processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// `lbeta(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)`.
    Lbeta,
    /// `inc_beta(a, b, x) = I_x(a, b)`, the regularized incomplete beta function.
    IncBeta,
    /// `lchoose(n, k)`, the log of the binomial coefficient, of floats.
    Lchoose,
    /// `log_mix(theta, lp1, lp2) = ln(theta e^lp1 + (1 - theta) e^lp2)`.
    LogMix,
    /// `log_sum_exp(a, b) = ln(e^a + e^b)`.
    LogSumExp,
    /// `log1p_exp(x) = ln(1 + e^x)` (`softplus`).
    Log1pExp,
    /// `log_inv_logit(x) = ln(inv_logit(x))` (`log_sigmoid`).
    LogInvLogit,
    /// `inv_logit(x) = 1 / (1 + e^-x)` (`sigmoid`).
    InvLogit,
    /// `gp_exp_quad_cov(x, alpha, rho)`: the `[N, N]` matrix
    /// `alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2))` of `N` points (not elementwise).
    GpExpQuadCov,
}

impl Special {
    /// Every compound special function.
    pub const ALL: &'static [Special] = &[
        Special::Lbeta,
        Special::IncBeta,
        Special::Lchoose,
        Special::LogMix,
        Special::LogSumExp,
        Special::Log1pExp,
        Special::LogInvLogit,
        Special::InvLogit,
        Special::GpExpQuadCov,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Special::Lbeta => "lbeta",
            Special::IncBeta => "inc_beta",
            Special::Lchoose => "lchoose",
            Special::LogMix => "log_mix",
            Special::LogSumExp => "log_sum_exp",
            Special::Log1pExp => "log1p_exp",
            Special::LogInvLogit => "log_inv_logit",
            Special::InvLogit => "inv_logit",
            Special::GpExpQuadCov => "gp_exp_quad_cov",
        }
    }

    pub fn params(self) -> Vec<Param> {
        match self {
            Special::Lbeta => vec![real("alpha"), real("beta")],
            Special::IncBeta => vec![real("a"), real("b"), real("x")],
            Special::Lchoose => vec![real("n"), real("k")],
            Special::LogMix => vec![real("theta"), real("lp1"), real("lp2")],
            Special::LogSumExp => vec![real("x"), real("y")],
            Special::Log1pExp | Special::LogInvLogit | Special::InvLogit => vec![real("x")],
            Special::GpExpQuadCov => vec![points("x"), scalar("alpha"), scalar("rho")],
        }
    }
}

/// A library function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    Distribution(Family, Suffix),
    Special(Special),
}

impl Function {
    /// The library function called `name`, if there is one.
    pub fn lookup(name: &str) -> Option<Function> {
        if let Some(s) = Special::ALL.iter().find(|s| s.name() == name) {
            return Some(Function::Special(*s));
        }
        let suffixes = [
            Suffix::Log,
            Suffix::Unnormalized,
            Suffix::Lcdf,
            Suffix::Lccdf,
            Suffix::Rng,
        ];
        Family::ALL.iter().find_map(|family| {
            suffixes
                .iter()
                .find(|s| family.has(**s) && family.function_name(**s) == name)
                .map(|s| Function::Distribution(*family, *s))
        })
    }

    /// Its name as the user writes it.
    pub fn name(self) -> String {
        match self {
            Function::Distribution(family, suffix) => family.function_name(suffix),
            Function::Special(s) => s.name().to_string(),
        }
    }

    /// Its parameters, in order.
    pub fn params(self) -> Vec<Param> {
        match self {
            Function::Distribution(family, Suffix::Rng) => family.rng_params(),
            Function::Distribution(family, _) => {
                let mut params = vec![family.outcome()];
                params.extend(family.params());
                params
            }
            Function::Special(s) => s.params(),
        }
    }

    /// What it gives.
    pub fn result(self) -> ResultKind {
        match self {
            Function::Distribution(family, Suffix::Rng) if family.is_multivariate() => {
                if family.outcome().kind == ArgKind::Matrix {
                    ResultKind::DrawMatrix
                } else {
                    ResultKind::DrawVector
                }
            }
            Function::Distribution(family, Suffix::Rng) => ResultKind::Draw {
                integer: family.is_discrete(),
            },
            Function::Distribution(..) => ResultKind::Sum,
            Function::Special(Special::GpExpQuadCov) => ResultKind::Covariance,
            Function::Special(_) => ResultKind::Elementwise,
        }
    }

    /// Whether `grad` may differentiate through it (not through a draw).
    pub fn is_differentiable(self) -> bool {
        !matches!(self, Function::Distribution(_, Suffix::Rng))
    }

    /// Whether it draws from the member's random stream.
    pub fn is_random(self) -> bool {
        !self.is_differentiable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_find_their_functions() {
        for family in Family::ALL {
            for suffix in [
                Suffix::Log,
                Suffix::Unnormalized,
                Suffix::Lcdf,
                Suffix::Lccdf,
                Suffix::Rng,
            ] {
                let name = family.function_name(suffix);
                let found = Function::lookup(&name);
                if family.has(suffix) {
                    assert_eq!(
                        found,
                        Some(Function::Distribution(*family, suffix)),
                        "{name}"
                    );
                } else {
                    assert_eq!(found, None, "{name}");
                }
            }
        }
        assert_eq!(Function::lookup("normal_lpmf"), None);
        assert_eq!(Function::lookup("poisson_lpdf"), None);
        assert_eq!(
            Function::lookup("lbeta"),
            Some(Function::Special(Special::Lbeta))
        );
    }
}
