//! The CPU paths of the products ([`Path`]: portable, AVX2+FMA, AVX-512),
//! which this CPU runs, and the environment variable that caps them.

use crate::internal_error;

/// A CPU path of the products. Every path gives every output element the
/// same bits; [`Path::detected`] is the fastest this CPU runs (at most the
/// one [`SIMD_VARIABLE`] names), and the `*_on` functions run a given path
/// (for the tests that compare them). Paths are ordered slowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Path {
    /// Arrays of lanes and `mul_add`, on any CPU.
    Portable,
    /// 256-bit AVX2 and FMA.
    Avx2,
    /// 512-bit AVX-512 (F, VL, DQ) for the products, AVX2 for the rest.
    Avx512,
}

/// The environment variable that caps the kernels' path: `portable`,
/// `avx2` or `avx512`, read once per process. It only lowers the path (a
/// CPU without AVX-512 stays on AVX2 whatever it says), so an AVX-512 CPU
/// can run and measure the AVX2 path; every path gives the same bits. The
/// kernels ignore any other value; [`requested_path`] reports it as an
/// error, for a program to show its user.
pub const SIMD_VARIABLE: &str = "AUTOBATCH_SIMD";

impl Path {
    /// Every path, slowest first.
    pub const ALL: [Path; 3] = [Path::Portable, Path::Avx2, Path::Avx512];

    /// Its name, as [`SIMD_VARIABLE`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Path::Portable => "portable",
            Path::Avx2 => "avx2",
            Path::Avx512 => "avx512",
        }
    }

    /// The path of that name.
    pub fn from_name(name: &str) -> Option<Path> {
        Path::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the kernels may run the path here: this CPU has it and
    /// [`SIMD_VARIABLE`] allows it (tested once, then cached).
    pub fn available(self) -> bool {
        match self {
            Path::Portable => true,
            Path::Avx2 => crate::vmath::fast_path_available(),
            Path::Avx512 => avx512_available(),
        }
    }

    /// The fastest path the kernels may run here.
    #[inline]
    pub fn detected() -> Path {
        if avx512_available() {
            Path::Avx512
        } else if crate::vmath::fast_path_available() {
            Path::Avx2
        } else {
            Path::Portable
        }
    }

    pub(super) fn check(self, what: &str) {
        if !self.available() {
            internal_error(format!(
                "gemm::{what}: this CPU cannot run the {self:?} path"
            ));
        }
    }
}

/// The path [`SIMD_VARIABLE`] asks for now: `Ok(None)` when it is unset,
/// an error naming the variable, its value and the accepted names when it
/// names no path.
pub fn requested_path() -> Result<Option<Path>, String> {
    let Some(value) = std::env::var_os(SIMD_VARIABLE) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    Path::from_name(text.trim()).map(Some).ok_or_else(|| {
        let names: Vec<&str> = Path::ALL.iter().map(|p| p.name()).collect();
        format!(
            "{SIMD_VARIABLE} is `{text}`; it takes one of {}",
            names.join(", ")
        )
    })
}

/// The fastest path the kernels may take: [`SIMD_VARIABLE`]'s, read once
/// (the fastest of all when it is unset or names no path).
#[inline]
pub(crate) fn ceiling() -> Path {
    static CEILING: std::sync::OnceLock<Path> = std::sync::OnceLock::new();
    *CEILING.get_or_init(|| requested_path().ok().flatten().unwrap_or(Path::Avx512))
}

#[inline]
fn avx512_available() -> bool {
    ceiling() >= Path::Avx512 && cpu_has_avx512()
}

/// Whether this CPU has AVX-512 (F, VL, DQ) besides AVX2 and FMA.
#[inline]
fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::vmath::cpu_has_avx2_fma()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
